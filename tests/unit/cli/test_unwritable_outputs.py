"""An output the command line names that cannot be written (under a regular file, in a missing folder the command
makes none of) is refused before any work: exit 2, one error naming the option, nothing written. Each had been a
traceback (exit 1), most after the work was done; `predict --processes 2` had refused every point instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_main

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
PREDICT = ("predict", RECIPE, "--max-requests", "4", "--duration", "30")

CASES = {
    "results export --out": (("results", "export", "--store", "{tmp}/s.sqlite", "--out", "{out}"), "--out", False),
    "compare --markdown": (("compare", "run-a", "run-b", "--store", "{tmp}/s.sqlite", "--markdown", "{out}"),
                           "--markdown", False),
    "predict --out, 1 process": ((*PREDICT, "--processes", "1", "--out", "{out}"), "--out", True),
    "predict --out, 2 processes": ((*PREDICT, "--processes", "2", "--out", "{out}"), "--out", True),
    "ci collect --out": (("ci", "collect", "{tmp}", "--run", "gh-1-1", "--out", "{out}"), "--out", True),
    "traces synth --out": (("traces", "synth", "--out", "{out}"), "--out", True),  # (True: makes its folders)
    "ci github --out": (("ci", "github", RECIPE, "--out", "{out}"), "--out", True),
    "ci matrix --github-output": (("ci", "matrix", RECIPE, "--github-output", "{out}"), "--github-output", False),
}


@pytest.mark.parametrize(("case", "where"), [(case, where) for case, (_, _, makes_folders) in CASES.items()
                                              for where in ("under a file", "in a missing folder")
                                              if where == "under a file" or not makes_folders])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
        case: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    args, flag, _ = CASES[case]
    monkeypatch.chdir(tmp_path)  # ci github writes inside the repository it runs in
    (tmp_path / "file").write_text("")
    out = tmp_path / ("file/out" if where == "under a file" else "missing/out")
    before = sorted(tmp_path.rglob("*"))
    code, _, err = run_main(capsys, *(str(a).format(tmp=tmp_path, out=out) for a in args))
    assert code == 2, err[-3000:]
    assert "Traceback" not in err and f"{flag} {out} cannot be written" in err, err[-3000:]
    assert "refused" not in err  # predict --processes 2 had refused every point, not the path
    assert sorted(tmp_path.rglob("*")) == before, "nothing is written"
