"""Shell words for the scripts llmsweep writes: a value is one inert word, and the script holds no raw control
character.

`shlex.quote` makes any string one word, but leaves control characters raw inside its single quotes: an ESC sequence
in a recipe value clears the screen of whoever prints the script, and a tool that strips ANSI codes on the way
(click does when stdout is not a terminal) changes the value the script sets. A word holding one is written as bash's
ANSI-C quoting instead, `$'…'`, every non-printable character as its UTF-8 bytes (`\\xHH`, whatever the locale), so
the script prints safely and sets the exact value. A byte that is not UTF-8, held in a str as Python's
surrogateescape does (`os.fsdecode(b'/data/m\\xff')`, a path or argument as the OS gave it), is written as that byte
(`\\xff`), so the word reads back as the original bytes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A shell variable name."""


def quote(word: str) -> str:
    """`word` as one shell word that reads back as exactly `word` (bash), with no raw control character in it: its
    UTF-8 bytes, a surrogateescape'd byte (`\\udcff`) as the byte it stands for. A lone surrogate that stands for no
    byte (`\\ud800`) is a UnicodeEncodeError: no bytes are that string."""
    if word.isprintable():
        return shlex.quote(word)
    out = []
    for c in word:
        if c in "\\'":
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            out.append("".join(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogateescape")))
    return "$'" + "".join(out) + "'"


def join(words: Iterable[str]) -> str:
    """`words` as one shell command line: each word :func:`quote`d (a control character written `$'…'`, never raw, in
    a file a terminal may print)."""
    return " ".join(quote(w) for w in words)


def assignment(name: str, value: str) -> str:
    """`NAME=value`, the value one word (:func:`quote`). A name that is not a variable name is quoted whole, always
    inside quotes: the shell then sees one inert word, never code and never an assignment (`X+=v`, which shlex.quote
    leaves bare, appends to X), and `env` still reads it as NAME=value. A name no environment can hold (empty, or
    with `=` or NUL in it: any `NAME=value` word would set another variable, `PATH=/x:=v` PATH) is a ValueError."""
    if NAME.fullmatch(name):
        return f"{name}={quote(value)}"
    if not name or "=" in name or "\0" in name:
        raise ValueError(f"{name!r} is not an environment variable name (it is empty or holds '=' or NUL); give a "
                         "name of letters, digits and _")
    word = quote(f"{name}={value}")
    return word if word.startswith(("'", "$'")) else f"'{word}'"  # bare: only shlex's safe characters, no quote
