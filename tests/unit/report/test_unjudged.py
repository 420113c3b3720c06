"""A job folder whose `valid` summary no outcome.json closed (the run killed after the client wrote the summary and
before the job's read-back checks, power record and server check) is not a result: the report, the store and
`compare` say it is unjudged, with the reason, reading the one definition `--resume` reads
(`job_files.unjudged`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from llmsweep.results.rundir import load_run

KILLER = """
import json, os, signal, sys
from pathlib import Path
from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run
# What `run` does for a job: the client's summary first, the job's verdict (outcome.json) after its checks. This
# process is killed in between, as a SIGKILL of `run` there leaves it.
write_synthetic_run(Path(sys.argv[1]), [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4, 8)],
                    run_id="killed", closed=False)
for jid, status, reasons in (("qwen3.5_tp8_conc1_kvnone_spec-none_sglang_mi300x", "valid", []),
                             ("qwen3.5_tp8_conc8_kvnone_spec-none_sglang_mi300x", "failed",
                              ["Slurm job 12 reached its time limit while this job ran"])):
    (Path(sys.argv[1]) / "jobs" / jid / "outcome.json").write_text(
        json.dumps({"job_id": jid, "exp_name": "x", "status": status, "reasons": reasons}))
os.kill(os.getpid(), signal.SIGKILL)
"""
JUDGED, UNJUDGED, CLOSED_FAILED = (f"qwen3.5_tp8_conc{c}_kvnone_spec-none_sglang_mi300x" for c in (1, 4, 8))


def killed_run(root: Path) -> Path:
    tests = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), *sys.path])}
    done = subprocess.run([sys.executable, "-c", KILLER, str(root)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    return root


def test_a_summary_no_outcome_judged_is_reported_and_stored_as_unjudged_not_valid(tmp_path: Path) -> None:
    """`llmsweep report RUN` (and the store's ingest) of such a run drew the unjudged summary as a valid point, a
    label the run did not earn; a job closed `failed` after its valid summary (Slurm's time limit) was drawn valid too.
    Both now are jobs without a result, listed with why and the fix; the judged job is still a valid point."""
    from llmsweep.report import write_report
    from llmsweep.results.store import Store

    run_dir = killed_run(tmp_path / "run")
    for jid in (JUDGED, UNJUDGED, CLOSED_FAILED):
        assert json.loads((run_dir / "jobs" / jid / "summary.json").read_text())["validity"]["verdict"] == "valid"
    run = load_run(run_dir)
    by_id = {a.job_id: a for a in run.jobs}
    assert by_id[JUDGED].summary is not None
    assert by_id[UNJUDGED].summary is None, "an unjudged valid summary was read as the job's result"
    assert by_id[JUDGED].unjudged is None and "unjudged" in (by_id[UNJUDGED].unjudged or "")
    assert "--resume" in by_id[UNJUDGED].why_no_result()
    assert by_id[CLOSED_FAILED].summary is None
    assert "closed the job failed: Slurm job 12" in by_id[CLOSED_FAILED].why_no_result()
    assert set(run.missing_job_ids) == {UNJUDGED, CLOSED_FAILED}

    files = write_report(run, tmp_path / "report", png=False)
    payload = json.loads(files.data.read_text())
    assert [p["job_id"] for p in payload["points"]] == [JUDGED]
    assert files.points == 1 and (files.failed, files.missing) == (2, 0)  # they ran: failed, not missing
    missing = {m["job_id"]: m for m in payload["missing"]}
    assert missing[UNJUDGED]["status"] == "unjudged"
    assert "no outcome.json closed the job" in missing[UNJUDGED]["reason"]
    assert missing[CLOSED_FAILED]["status"] == "failed" and "Slurm job 12" in missing[CLOSED_FAILED]["reason"]
    failed_banner = " ".join(g["reason"] for g in payload["verdicts"]["failed"]["reasons"])
    assert "unjudged: its summary says valid" in failed_banner
    assert "unjudged: its summary says valid" in files.html.read_text()

    with Store(tmp_path / "store.sqlite") as store:
        ingested = store.ingest_run(run_dir)
        assert ingested.results == 1 and set(ingested.jobs_without_result) == {UNJUDGED, CLOSED_FAILED}
        assert any("unjudged" in why for why in ingested.unread)
        assert [p.job_id for p in store.results("killed")] == [JUDGED]
        assert store.ingest_job(run_dir, run_dir / "jobs" / UNJUDGED) is False  # the per-job ingest as well
        assert [p.job_id for p in store.results("killed")] == [JUDGED]


    from llmsweep.results.sides import resolve_points

    said: list[str] = []
    _, points = resolve_points(str(run_dir), None, warn=said.append)  # `compare RUN_DIR …`
    assert [p.job_id for p in points] == [JUDGED]
    assert len(said) == 2 and any("unjudged" in s for s in said)
