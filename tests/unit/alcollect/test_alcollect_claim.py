"""`al collect` claims the curve's folder (`folderlock`, as `bench` and `run` claim --out) from before it reads the
curve until it has written it. Before, two collections into one --out both exited 0, the surviving curve's header
(output_len 512) sitting over the other run's evidence (max_tokens 32), and two `--merge-into` of one curve each read
it before the other wrote it: one collection's cells were lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from llmsweep.catalog.golden import load_curve
from llmsweep.folderlock import claim

REPO = Path(__file__).resolve().parents[3]
LLAMA = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"
CURVE = "llama-1b_ngram.yaml"


def _args(*extra: str | Path) -> list[str | Path]:
    return ["al", "collect", LLAMA, "--simulate", "--prompts", "builtin", "--num-prompts", "1", "--output-len", "8",
            "--thinking", "off", *extra]


@pytest.mark.parametrize("force", [False, True])
def test_a_collection_into_a_folder_a_live_process_holds_is_refused_before_any_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], force: bool) -> None:
    out = tmp_path / "golden"
    with claim(out, "llmsweep al collect", fix="x"):
        code, stdout, err = run_main(capsys, *_args("-k", "1", "--out", out, *(["--force"] if force else [])))
    assert code == 2, (stdout, err)
    assert f"another `llmsweep al collect` is using {out} (pid {os.getpid()})" in err, err
    assert "fix: wait for it to finish, or pass another --out" in err, err
    assert not (out / CURVE).exists() and not (out / "llama-1b_ngram.runs").exists()


def test_a_named_run_dir_a_live_collection_holds_is_refused_before_any_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two collections into other curve folders but one --run-dir: each checked the folder before either wrote a cell,
    then each wrote its cells' evidence over the other's. The named evidence folder is claimed as the curve's is."""
    evidence = tmp_path / "evidence"
    with claim(evidence, "llmsweep al collect", fix="x"):
        code, stdout, err = run_main(capsys, *_args("-k", "1", "--out", tmp_path / "mine", "--run-dir", evidence))
    assert code == 2, (stdout, err)
    assert f"another `llmsweep al collect` is using {evidence} (pid {os.getpid()})" in err, err
    assert "fix: wait for it to finish, or pass another --run-dir" in err, err
    assert not (tmp_path / "mine" / CURVE).exists() and not (evidence / "thinking_off-k1").exists()
    # free again: the collection takes it (the curve's own folder as --run-dir is claimed once)
    code, stdout, err = run_main(capsys, *_args("-k", "1", "--out", tmp_path / "mine", "--run-dir", evidence))
    assert code == 0 and (evidence / "thinking_off-k1").is_dir(), (stdout, err)
    code, stdout, err = run_main(capsys, *_args("-k", "2", "--out", tmp_path / "own", "--run-dir", tmp_path / "own"))
    assert code == 0, (stdout, err)


@pytest.mark.timeout(120)
def test_a_curve_written_while_the_collection_checked_its_outputs_is_not_replaced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The window before the claim: another collection that wrote the curve then (a different --output-len) is
    found by the check made again under the claim, not overwritten by this one's header over its evidence."""
    from llmsweep.alcollect import collect as collect_module

    out = tmp_path / "golden"
    other = "# written by another collection\n"
    real = collect_module.refuse_unwritable_outputs

    def checked_then_written(*args: Any, **kw: Any) -> None:
        real(*args, **kw)
        out.mkdir(exist_ok=True)
        (out / CURVE).write_text(other)

    monkeypatch.setattr(collect_module, "refuse_unwritable_outputs", checked_then_written)
    code, stdout, err = run_main(capsys, *_args("-k", "1", "--out", out))
    assert code == 2 and f"{out / CURVE} exists" in err, (stdout, err)
    assert (out / CURVE).read_text() == other and not (out / "llama-1b_ngram.runs").exists()


@pytest.mark.timeout(240)
def test_a_merge_into_a_curve_another_merge_is_completing_is_refused_and_no_cell_is_lost(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.alcollect import collect as collect_module

    out = tmp_path / "golden"
    code, _, err = run_main(capsys, *_args("-k", "1", "--out", out))
    assert code == 0, err
    curve = out / CURVE
    real = collect_module._run_cell
    second: list[subprocess.CompletedProcess[str]] = []

    def cell_while_another_merges(*args: Any, **kw: Any) -> Any:
        # a second `--merge-into` of the same curve, started while this one measures its cell
        second.append(subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *map(str, _args(
            "-k", "3", "--merge-into", curve))], capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}))
        return real(*args, **kw)

    monkeypatch.setattr(collect_module, "_run_cell", cell_while_another_merges)
    code, stdout, err = run_main(capsys, *_args("-k", "2", "--merge-into", curve))
    assert code == 0, (stdout, err)
    (other,) = second
    assert other.returncode == 2, other.stderr[-2000:]
    assert f"another `llmsweep al collect` is using {out} (pid {os.getpid()})" in other.stderr, other.stderr
    assert "then run this --merge-into again" in other.stderr
    # the curve holds the first collection's cell and this one's: nothing was merged over them and lost
    assert sorted(load_curve(curve).values["thinking_off"]) == [1, 2]


def test_a_cell_says_how_far_its_load_is_while_it_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell said nothing between its server's start and its result (minutes on a GPU): the client's progress is a
    line on stderr every CELL_PROGRESS_S (here every poll), and stdout stays the --json document."""
    import json

    from llmsweep.alcollect import collect as collect_module

    monkeypatch.setattr(collect_module, "CELL_PROGRESS_S", 0.0)
    code, stdout, err = run_main(capsys, *_args("-k", "1", "--out", tmp_path / "golden", "--json"))
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("thinking_off K=1: ") and " done, " in line]
    assert lines and "1/1 request done, 0 failed" in lines[-1], err
    assert json.loads(stdout)["cells"][0]["k"] == 1
