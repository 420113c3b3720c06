"""`render` writes a value with control characters as bash reads it back exactly, and prints no raw control
character: `env: {FOO: "a\\e[2Jb\\nc"}` rendered `export FOO='ab\\nc'` under `--format sh > x.sh` (click stripped the
ANSI sequence off a pipe), and on a terminal the raw ESC bytes cleared the screen (`shlex.quote` leaves control
characters raw)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.shell import assignment, quote

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
JOB = "qwen3.5_256_64_fp8_sglang_tp8-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc2"
"""A unique prefix of fixed-sim.yaml's conc 2 job."""
VALUE = "a\x1b[2Jb\nc'd\\e\t\x7f\u2028\u00e9 $(x) `y`"
"""ESC, newline, quote, backslash, tab, DEL, a non-printable and a printable non-ASCII character, shell syntax."""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _bash_prints(script: str) -> bytes:
    return subprocess.run(["bash", "-c", script], capture_output=True, check=True, timeout=30).stdout


@pytest.mark.parametrize("word", [VALUE, "plain", "", "it's", "\x00"[1:] + "\x01\x02\x1f", "é\u200b"])
def test_a_quoted_word_reads_back_exactly_and_holds_no_control_character(word: str) -> None:
    quoted = quote(word)
    assert quoted.isprintable() or quoted == "''"
    assert _bash_prints(f"printf %s {quoted}") == word.encode("utf-8")
    assert _bash_prints(f"{assignment('FOO', word)}; printf %s \"$FOO\"") == word.encode("utf-8")


def test_render_sh_sets_the_exact_value_and_prints_no_control_character(tmp_path: Path) -> None:
    text = FIXED.read_text(encoding="utf-8")
    assert "    engine: { name: sim }\n" in text
    recipe = tmp_path / "r.yaml"
    escaped = VALUE.replace("\\", "\\\\").replace("\x1b", "\\e").replace("\n", "\\n").replace("\t", "\\t")
    escaped = escaped.replace("\x7f", "\\x7f").replace("\u2028", "\\L")
    recipe.write_text(text.replace("    engine: { name: sim }\n",
                                   f'    engine: {{ name: sim }}\n    env: {{ FOO: "{escaped}" }}\n'),
                      encoding="utf-8")
    res = CliRunner().invoke(cli, ["render", str(recipe), "--job", JOB, "--format", "sh"])
    script = res.stdout
    assert script.startswith("#!/usr/bin/env bash"), res.output
    assert all(c.isprintable() or c == "\n" for c in script), [c for c in script if not c.isprintable()]
    (export,) = [line for line in script.splitlines() if line.startswith("export FOO=")]
    assert _bash_prints(f"{export}; printf %s \"$FOO\"") == VALUE.encode("utf-8")
    text_form = CliRunner().invoke(cli, ["render", str(recipe), "--job", JOB]).stdout
    assert "\x1b" not in text_form and export.removeprefix("export ") in text_form


def test_server_command_txt_and_slurm_exports_quote_control_characters_as_render_does() -> None:
    """`server_command.txt` (LaunchSpec.shell_command) and the Slurm batch script's exports (env_assignment) wrote the
    raw ESC and newline of a recipe value, as `render` did before; they share `llmsweep.shell`'s quoting now."""
    from llmsweep.engines.launch import LaunchSpec, env_assignment

    spec = LaunchSpec(engine="sim", argv=("sim-serve", "--model", VALUE), env={"FOO": VALUE}, port=1)
    line = spec.shell_command()
    assert line.isprintable(), line
    assert _bash_prints(f"f() {{ printf '%s|%s' \"$FOO\" \"$2\"; }}; {line.replace('sim-serve', 'f', 1)}") == (
        f"{VALUE}|{VALUE}".encode())
    export = env_assignment("FOO", VALUE)
    assert export.isprintable() and _bash_prints(f"export {export}; printf %s \"$FOO\"") == VALUE.encode("utf-8")
