"""An output the command line names that cannot be written (under a regular file, in a missing folder the command
makes none of) is refused before any work: exit 2, one error naming the option, nothing written. Each had been a
traceback (exit 1), most after the work was done; `predict --processes 2` had refused every point instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_main
from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

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
                                              for where in ("under a file", "in a missing folder",
                                                            "through a dangling link")
                                              if where != "in a missing folder" or not makes_folders])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
        case: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    args, flag, _ = CASES[case]
    monkeypatch.chdir(tmp_path)  # ci github writes inside the repository it runs in
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "gone")  # a link to a folder removed since (a scratch disk not mounted)
    out = tmp_path / {"under a file": "file/out", "in a missing folder": "missing/out",
                      "through a dangling link": "link/out"}[where]
    before = sorted(tmp_path.rglob("*"))
    code, _, err = run_main(capsys, *(str(a).format(tmp=tmp_path, out=out) for a in args))
    assert code == 2, err[-3000:]
    assert "Traceback" not in err and f"{flag} {out} cannot be written" in err, err[-3000:]
    assert "refused" not in err  # predict --processes 2 had refused every point, not the path
    assert sorted(tmp_path.rglob("*")) == before, "nothing is written"


def test_a_run_out_that_is_not_utf8_is_refused_before_anything_is_planned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --out $'/tmp/o\\xff'` ran every job, then could not store them ('utf-8' codec can't encode character
    '\\udcff'): the store records the run's path as UTF-8. It is refused first: exit 2, naming --out as given and the
    fix, nothing planned, made or stored."""
    import os

    from llmsweep.execute import pipeline

    def planned(*_: object, **__: object) -> None:
        raise AssertionError("the run was planned")

    monkeypatch.setattr(pipeline, "_plan_and_check", planned)
    out = Path(os.fsdecode(os.fsencode(tmp_path) + b"/o\xff"))
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--out", out, "--store", tmp_path / "s.sqlite")
    assert code == 2, err[-3000:]
    assert f"--out {tmp_path}/o\\xff is not valid UTF-8" in err and "pass --out a path that is UTF-8 text" in err, err
    assert list(tmp_path.iterdir()) == [], "nothing is made or stored"


def test_writable_out_refuses_a_path_that_is_not_utf8(tmp_path: Path) -> None:
    """`discover` checks its --out with `writable_out` as `run` does: the same refusal, before the folder is made."""
    import os

    from llmsweep.errors import ConfigError
    from llmsweep.execute.pipeline import writable_out

    out = Path(os.fsdecode(os.fsencode(tmp_path) + b"/o\xff"))
    with pytest.raises(ConfigError, match="is not valid UTF-8"):
        writable_out(out)
    assert not out.exists()


@pytest.mark.parametrize("where", ["under a file", "through a dangling link"])
@pytest.mark.parametrize("command", ["run", "results ingest"])
def test_a_store_that_cannot_be_made_says_why_as_an_out_does(command: str, where: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`run --store /tmp/x/fs.yaml/x.sqlite` (a path through a regular file) said `[Errno 17] File exists`, where the
    `--out` equivalent says "is a file, not a folder": the store is checked the same way and said alike, before
    anything runs or is stored."""
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    blocker = tmp_path / ("file" if where == "under a file" else "link")
    store = blocker / "x.sqlite"
    if command == "run":
        args: tuple[str | Path, ...] = ("run", RECIPE, "--out", tmp_path / "run")
    else:
        run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=4), requests=20)],
                                  run_id="run1")
        args = ("results", "ingest", run.path)
    before = sorted(tmp_path.rglob("*"))
    code, _, err = run_main(capsys, *args, "--store", store)
    assert code == 2, err[-3000:]
    what = "is a file, not a folder" if where == "under a file" else f"is a symbolic link to {tmp_path / 'gone'}"
    assert f"results store {store} cannot be written: {blocker} {what}" in err, err[-3000:]
    assert "Errno" not in err and "Traceback" not in err and err.count("error:") == 1, err[-3000:]
    assert sorted(tmp_path.rglob("*")) == before, "nothing is written"
