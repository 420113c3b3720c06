"""`llmsweep.shell`: a word the scripts llmsweep writes reads back as exactly the value, and an assignment to a name
that is not a variable name is never one (`shlex.quote` left `PATH=/tmp/evil:=x` and `X+=v` bare: bash reassigned
PATH, appended to X)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from llmsweep.shell import assignment

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _bash(script: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["bash", "-c", script], capture_output=True, timeout=30)


@pytest.mark.parametrize("name", ["PATH=/tmp/evil:", "A=B", "=", "", "A\0B"])
def test_a_name_no_environment_can_hold_is_refused(name: str) -> None:
    """Any `NAME=value` word of a name with '=' sets another variable (`PATH=/tmp/evil:=x` set PATH): refused."""
    with pytest.raises(ValueError, match="not an environment variable name"):
        assignment(name, "x")


@pytest.mark.parametrize("name", ["X+", "X[0]", "X.Y", "ENROOT CACHE", "1X", "a-b"])
def test_an_invalid_name_is_one_inert_word_that_env_still_reads(name: str) -> None:
    """Bash sees a command word, never an assignment (`X+=more` appended to X); `env WORD` sets NAME=value."""
    word = assignment(name, "more")
    done = _bash(f"X=keep; {word}; printf '%s|' \"$?\" \"$X\"")
    assert done.stdout == b"127|keep|", (word, done)  # not found as a command, X untouched
    assert f"{name}=more" in _bash(f"env {word} env").stdout.decode().splitlines()


def test_a_variable_name_is_a_plain_assignment() -> None:
    assert assignment("X_1", "a b") == "X_1='a b'"
    assert _bash(f"{assignment('X', 'a b')}; printf %s \"$X\"").stdout == b"a b"


@pytest.mark.parametrize("raw", [b"/data/m\xff", b"\xfe\xff", b"a\x1b\xc3(b", b"/x/\xe9t\xe9 $(y)'z"])
def test_a_word_of_bytes_that_are_not_utf8_reads_back_as_those_bytes(raw: bytes) -> None:
    """A path or argument as the OS gave it holds its non-UTF-8 bytes as surrogates (`os.fsdecode`): quoting it was a
    UnicodeEncodeError; it is written as those bytes (`$'…\\xff…'`), and bash gives back exactly them."""
    import os

    from llmsweep.shell import quote

    word = os.fsdecode(raw)
    quoted = quote(word)
    assert quoted.isascii() and quoted.isprintable(), quoted
    assert _bash(f"printf %s {quoted}").stdout == raw
