"""A job a real engine would refuse runs on the simulator (its engine rules soften to warnings there), and every
place that shows its result says so: the run's outcome (`warnings`, in run.json and the job's outcome.json), the
end-of-run rows (`run --json`; the table marks the verdict, `cli/test_run_table.py`), the summary on stderr and the
dashboard's banner. It used to be a stderr warning before the run and then four plain `valid` points; then the
job's outcome.json said `"warnings": []` and the end rows had no word of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.cli.main import main
from llmsweep.report.data import build_payload
from llmsweep.results.point import points_from_run
from llmsweep.results.rundir import load_run
from llmsweep.sim_warnings import WarningKind, warning_kind

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "policy" / "engine.known-incompatibility.yaml"


def test_a_result_the_real_engine_would_refuse_says_so_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    recipe = tmp_path / "recipe.yaml"  # a short window: the verdict is smoke, which is a result all the same
    recipe.write_text(RECIPE.read_text() + "  workload:\n    duration: 60\n")
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(["run", str(recipe), "--simulate", "--traces", "synthetic", "--out", str(out), "--no-report", "--json"])
    captured = capsys.readouterr()
    assert done.value.code == 0, captured.err
    rows = json.loads(captured.out)["jobs"]
    assert [r["verdict"] for r in rows] == ["smoke", "smoke"]  # the simulator's results, as their source says
    outcomes = json.loads((out / "run.json").read_text())["outcomes"]
    for o in outcomes:
        # and the catalog estimates the simulator modelled the job with (`sim_warnings.catalog_estimates`)
        warning, estimates = said = o["warnings"]
        assert warning_kind(estimates) is WarningKind.CATALOG_ESTIMATES
        assert warning.startswith("a real engine would refuse them: [engine.known-incompatibility]")
        assert "direct I/O backend and layer_first layout" in warning and "(simulated:" not in warning
        # one text wherever the outcome is read: the job's own outcome.json and the end rows say the same
        assert json.loads((out / "jobs" / o["job_id"] / "outcome.json").read_text())["warnings"] == said
    assert [r["warnings"] for r in rows] == [o["warnings"] for o in outcomes]
    assert "2 jobs ran on the simulator although a real engine would refuse them" in captured.err
    # `predict` says the same of each point, in --json and as its table's mark (it marked the estimates alone)
    with pytest.raises(SystemExit) as done:
        main(["predict", str(recipe), "--traces", "synthetic", "--processes", "1", "--json"])
    predicted = json.loads(capsys.readouterr().out)
    assert [(p["conc"], p["warnings"]) for p in predicted] == [(r["conc"], r["warnings"]) for r in rows]
    with pytest.raises(SystemExit) as done:
        main(["predict", str(recipe), "--traces", "synthetic", "--processes", "1"])
    table = capsys.readouterr().out
    assert done.value.code == 0 and table.count("smoke ⚠1,2") == 2, table
    assert " ".join(table.split()).count(" ".join(f"⚠1 {warning}".split())) == 1, table
    run = load_run(out)
    banner = build_payload(run, points_from_run(run))["verdicts"]["simulated-only"]
    assert banner["count"] == 2 and len(banner["reasons"]) == 1
    assert "[engine.known-incompatibility]" in banner["reasons"][0]["reason"]
    # the stored results say it too: the store kept the run's outcomes, and the listing and `show` read them back
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    with pytest.raises(SystemExit):
        main(["results", "list", "--run", run_id, "--json"])
    listed = json.loads(capsys.readouterr().out)
    assert [r["warnings"] for r in listed] == [said] * 2
    with pytest.raises(SystemExit):
        main(["results", "list", "--run", run_id])
    table = capsys.readouterr().out
    assert table.count("smoke ⚠1,2") == 2 and table.count("⚠1 a real engine would refuse them:") == 1, table
    with pytest.raises(SystemExit):
        main(["results", "show", listed[0]["result_id"]])
    assert f"warning 1  {warning}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["results", "show", listed[0]["result_id"], "--json"])
    assert json.loads(capsys.readouterr().out)["warnings"] == said
    # our lossless export carries them, and an import into another store keeps the marks (they were dropped)
    exported = tmp_path / "export.json"
    with pytest.raises(SystemExit):
        main(["results", "export", "--run", run_id, "--out", str(exported)])
    assert [r["warnings"] for r in json.loads(exported.read_text())["results"]] == [said] * 2
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "other.sqlite"))
    with pytest.raises(SystemExit):
        main(["results", "import", str(exported)])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["results", "list", "--run", run_id, "--json"])
    assert [r["warnings"] for r in json.loads(capsys.readouterr().out)] == [said] * 2


def test_a_launch_the_real_engine_cannot_render_is_said_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang has no Medusa: the real launch does not render. `--simulate` rendered only the simulator's launch, so
    the finding vanished and the job came out valid with no word of it (and two rules that read the rendering
    crashed into `policy.internal` warnings)."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    recipe = RECIPE.parent / "serve.render-failed.yaml"
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(["run", str(recipe), "--simulate", "--out", str(out), "--no-report", "--json"])
    captured = capsys.readouterr()
    assert done.value.code == 0, captured.err
    (outcome,) = json.loads((out / "run.json").read_text())["outcomes"]
    assert outcome["status"] == "valid"
    warning, estimates = said = outcome["warnings"]  # and the catalog estimates it was modelled with
    assert warning_kind(estimates) is WarningKind.CATALOG_ESTIMATES
    assert warning.startswith("a real engine would refuse them: [serve.render-failed] cannot render: SGLang has no "
                              "`medusa` speculative decoding"), warning
    assert json.loads((out / "jobs" / outcome["job_id"] / "outcome.json").read_text())["warnings"] == said
    (row,) = json.loads(captured.out)["jobs"]
    assert row["warnings"] == said
    assert "policy.internal" not in captured.err
