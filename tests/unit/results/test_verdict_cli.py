"""`llmsweep compare --baseline RUN --format markdown`: a pull request's verdict per point and the success rate."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.results.verdict import success_rate


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_regression_is_called_only_with_a_between_run_band(make_run, store_path: Path) -> None:
    base = make_run("base", concs=(4,), requests=100)
    reps = [make_run(f"base{i}", concs=(4,), requests=100, seed=10 + i) for i in range(2)]
    slow = make_run("pr", concs=(4, 8), requests=100, seed=5, speed=0.5, expected_extra=("never-ran",))
    _run("results", "ingest", str(base.path))
    md = _run("compare", "--baseline", "base", str(slow.path), "--format", "markdown", "--resamples", "30",
              "--no-history", *[a for r in reps for a in ("--repeats-from", str(r.path))])
    assert "1 regression(s), 0 improvement(s), 0 without change" in md
    assert "❌ regression" in md and "(no between-run band)" not in md
    assert "Sweep success rate: **66.7%** (2/3 jobs)" in md  # the job that never ran counts as a failure
    assert "**New points:**" in md

    # Without repeats nothing can be called: the same slowdown is `no change`, and the verdict says why.
    alone = _run("compare", "--baseline", "base", str(slow.path), "--format", "markdown", "--resamples", "30",
                 "--no-history")
    assert "0 regression(s), 0 improvement(s), 1 without change" in alone
    assert "➖ no change (no between-run band)" in alone


def test_baseline_takes_exactly_one_run(make_run, store_path: Path) -> None:
    res = CliRunner().invoke(cli, ["compare", "--baseline", "x"])
    assert res.exit_code != 0 and "run under test" in res.output


def test_success_rate_reads_the_runs_outcomes(make_run) -> None:
    run = make_run("r", concs=(1, 4))
    meta = {"outcomes": [{"job_id": "a", "status": "valid"}, {"job_id": "b", "status": "skipped"},
                         {"job_id": "c", "status": "failed"}, {"job_id": "d", "status": "refused"}]}
    rate = success_rate(meta, [])
    assert (rate.success, rate.total, rate.rate) == (2, 4, 0.5)
    assert success_rate(run.meta, []).total == 2  # no outcomes recorded: the expected jobs, none with a result
