"""A job's warnings (`pipeline.job_warnings`: a real engine would refuse it, the simulator does not model something
it sets) reach its outcome.json wherever its group runs: the group carries them, a Slurm batch job's worker reads
them from its group file (`pipeline.run_worker`), and the lifecycle writes them with the outcome. Only a result is
qualified: a refused job, or one that failed without a result, carries none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmsweep import engines
from llmsweep.execute import artifacts as art
from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup
from llmsweep.execute.pipeline import run_worker
from llmsweep.plan import jobs_from_files

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
WARNING = "a real engine would refuse them: [engine.known-incompatibility] test"


def test_a_slurm_worker_writes_the_groups_warnings_into_each_outcome(tmp_path: Path) -> None:
    job = jobs_from_files([FIXED])[0]
    group = ServerGroup(id="sim-g", spec=engines.render(job, simulate=True, port=0), jobs=[job], source="simulated",
                        executor="slurm", warnings={job.id: [WARNING]})
    run_dir = tmp_path / "run"
    group_file = art.write_json(art.server_dir(run_dir, group.id) / art.GROUP_FILE,
                                group.to_json(run_dir, LifecycleSettings()))

    assert run_worker(group_file, event=lambda _: None) == 0

    outcome = json.loads((art.job_dir(run_dir, job.id) / art.OUTCOME_FILE).read_text())
    assert outcome["status"] == "valid" and outcome["warnings"] == [WARNING]


def test_warnings_qualify_results_only_and_are_said_once() -> None:
    def outcome(status: Any) -> JobOutcome:
        return JobOutcome(job_id="j", exp_name="e", status=status)

    for status in ("valid", "smoke", "invalid", "skipped"):
        assert outcome(status).with_warnings([WARNING, WARNING]).with_warnings([WARNING]).warnings == [WARNING]
    for status in ("refused", "failed"):
        assert outcome(status).with_warnings([WARNING]).warnings == []


def test_each_kind_of_warning_reads_right_in_the_runs_completeness_lines(tmp_path: Path) -> None:
    """`it does not model DP attention: …` had no subject on its own, and the run's end said `2 job(s) ran on the
    simulator although it does not model …`; both kinds now say who does what."""
    from llmsweep.execute.pipeline import RunOutcome
    from llmsweep.sim_warnings import WarningKind, engine_refuses, not_modelled, warning_kind

    refuses, missed = engine_refuses("engine.known-incompatibility", "test"), not_modelled(["DP attention"])
    assert refuses == WARNING and warning_kind(refuses) is WarningKind.ENGINE_REFUSES
    assert missed.startswith("the simulator does not model DP attention: ")
    assert warning_kind(missed) is WarningKind.NOT_MODELLED
    outcomes = [JobOutcome(job_id=j, exp_name=j, status="valid", warnings=[refuses, missed]) for j in ("a", "b")]
    lines = RunOutcome(tmp_path, "r", outcomes).completeness().splitlines()
    assert f"  2 jobs ran on the simulator although {refuses}" in lines, lines
    assert ("  2 jobs ran on the simulator, which does not model DP attention: it predicts the points without "
            "modelling it") in lines, lines


def test_a_run_recorded_before_the_warning_named_its_subject_reads_in_todays_words() -> None:
    from llmsweep.results.rundir import RecordedOutcome
    from llmsweep.sim_warnings import WarningKind, warning_kind

    old = "it does not model DP attention: their points predict them as if off"
    read = RecordedOutcome(job_id="j", status="valid", warnings=[old, WARNING]).warnings
    assert read == ["the simulator does not model DP attention: their points predict them as if off", WARNING]
    assert warning_kind(old) is WarningKind.NOT_MODELLED


def test_a_request_timeout_virtual_time_did_not_apply_is_no_engine_refusal(tmp_path: Path) -> None:
    """`run --request-timeout 5` on the quickstart warned `182 request(s) ran longer than --request-timeout 5 s, …`,
    and that warning, of no known opening, was read as an engine refusal: the run's end said `1 job(s) ran on the
    simulator although 182 request(s) …`, and summary.md and the dashboard put it under `a real engine would refuse
    them`. A real engine would run the job; the warning has a kind and a banner of its own."""
    from llmsweep.execute.pipeline import RunOutcome
    from llmsweep.execute.virtual import outlived_timeout
    from llmsweep.report.data import verdict_groups
    from llmsweep.report.markdown import WARNING_HEADS
    from llmsweep.sim_warnings import WarningKind, warning_kind

    late = outlived_timeout([{"sent_at": 0.0, "end_at": 9.0}, {"sent_at": 1.0, "end_at": 2.0}], 5.0)
    assert late is not None and late.startswith("1 request ran longer than --request-timeout 5 s")
    assert warning_kind(late) is WarningKind.TIMEOUT_NOT_APPLIED
    for recorded in ("182 requests ran longer than --request-timeout 5 s", "182 request(s) ran longer than "
                     "--request-timeout 5 s"):  # said in words, and as runs recorded before 2026-12-07 said it
        assert warning_kind(recorded) is WarningKind.TIMEOUT_NOT_APPLIED, recorded

    lines = RunOutcome(tmp_path, "r", [JobOutcome(job_id="a", exp_name="a", status="valid", warnings=[late])]
                       ).completeness().splitlines()
    assert f"  1 job ran in virtual time, where {late}" in lines, lines
    assert not any("although" in line for line in lines), lines

    point = {"id": "r0", "job_id": "a", "verdict": "valid", "valid": True, "reasons": [], "reason": ""}
    groups = verdict_groups([point], [], {"r0": [late]})
    assert groups["timeout-not-applied"]["count"] == 1 and "simulated-only" not in groups
    assert "refuse" not in WARNING_HEADS["timeout-not-applied"]


def test_a_server_on_no_gpu_is_a_kind_of_its_own_in_every_place_that_says_warnings(tmp_path: Path) -> None:
    """A CPU rehearsal's per-GPU figures are the endpoint's (its launch uses 0 GPUs): said as that, not as an engine
    refusal (a warning of no known opening), in the run's end, summary.md and the dashboard's banners."""
    from llmsweep.execute.pipeline import RunOutcome
    from llmsweep.report.data import VERDICT_KINDS, WARNING_BANNER, verdict_groups
    from llmsweep.report.markdown import WARNING_HEADS
    from llmsweep.sim_warnings import WarningKind, no_gpu_figures, warning_kind

    one, eight = no_gpu_figures(1), no_gpu_figures(8)
    assert warning_kind(one) is warning_kind(eight) is WarningKind.NO_GPU
    assert one.endswith("per-GPU figures are the whole endpoint's") and "divided by the 8 GPUs" in eight
    lines = RunOutcome(tmp_path, "r", [JobOutcome(job_id=j, exp_name=j, status="valid", warnings=[one])
                                       for j in ("a", "b")]).completeness().splitlines()
    assert "  2 jobs ran on no GPU (their launch uses 0): per-GPU figures are the whole endpoint's" in lines, lines
    point = {"id": "r0", "job_id": "a", "verdict": "valid", "valid": True, "reasons": [], "reason": ""}
    groups = verdict_groups([point], [], {"r0": [one]})
    assert groups["no-gpu"]["count"] == 1 and "simulated-only" not in groups
    assert set(WARNING_BANNER.values()) <= set(VERDICT_KINDS) and set(WARNING_BANNER.values()) == set(WARNING_HEADS)
    js = (Path(__file__).resolve().parents[3] / "src" / "llmsweep" / "report" / "assets" / "dashboard.js").read_text()
    assert all(f'"{kind}"' in js for kind in VERDICT_KINDS)  # the dashboard's banners know every kind


def test_a_context_the_server_reports_apart_from_its_launch_is_a_kind_of_its_own(tmp_path: Path) -> None:
    """A real engine's server that reports (`/v1/models`) another context than its launch set: said as that in the
    run's end, summary.md and the dashboard's banners, never as a simulator's warning (a warning of no known opening
    read as `simulated-only`: "1 job ran on the simulator although the server reports a context ...")."""
    from llmsweep.execute.pipeline import RunOutcome
    from llmsweep.report.data import WARNING_BANNER, verdict_groups
    from llmsweep.report.markdown import WARNING_HEADS
    from llmsweep.sim_warnings import WarningKind, context_served, warning_kind

    said = context_served(32_768, 8_192)
    assert warning_kind(said) is WarningKind.CONTEXT_SERVED
    lines = RunOutcome(tmp_path, "r", [JobOutcome(job_id="a", exp_name="a", status="valid", warnings=[said])]
                       ).completeness().splitlines()
    (line,) = [x for x in lines if "32,768" in x]
    assert line.startswith("  1 job ran with another context served: the server reports 32,768 tokens where the "
                           "launch set 8,192"), lines
    assert "simulator" not in line
    point = {"id": "r0", "job_id": "a", "verdict": "valid", "valid": True, "reasons": [], "reason": ""}
    groups = verdict_groups([point], [], {"r0": [said]})
    assert groups["context-served"]["count"] == 1 and "simulated-only" not in groups
    assert WARNING_BANNER[WarningKind.CONTEXT_SERVED] in WARNING_HEADS


def test_a_point_modelled_with_catalog_estimates_is_a_warning_of_its_own_kind(tmp_path: Path) -> None:
    """`predict` marked a point modelled with catalog figures the catalog marks as estimates (`⚠1 modelled with catalog
    estimates: …`, words of its own); `run` recorded no warning for the same job, so its table, outcome.json and
    dashboard said plain `valid`. The warning has its home here: `run`'s pipeline records it for a simulated job
    (virtual time or live: `job_warnings` is the job's, whatever serves it), the run's end, summary.md and the
    dashboard's banners say it under a kind of their own, which the dashboard explains."""
    from llmsweep.engines.sim import estimated_figures
    from llmsweep.execute.pipeline import RunOutcome, job_warnings
    from llmsweep.report.data import VERDICT_KINDS, WARNING_BANNER, verdict_groups
    from llmsweep.report.markdown import WARNING_HEADS
    from llmsweep.sim_warnings import WarningKind, catalog_estimates, not_modelled, simulator_warnings, warning_kind

    job = jobs_from_files([FIXED])[0]
    estimated = estimated_figures(job)
    said = catalog_estimates(estimated)
    assert said.startswith("modelled with catalog estimates: " + ", ".join(estimated))
    assert warning_kind(said) is WarningKind.CATALOG_ESTIMATES
    assert job_warnings(job, [], [], simulated=True) == [said]
    assert job_warnings(job, [], [], simulated=False) == []  # a real engine's result stands on no catalog figure
    assert simulator_warnings(["DP attention"], estimated) == [not_modelled(["DP attention"]), said]

    lines = RunOutcome(tmp_path, "r", [JobOutcome(job_id=j, exp_name=j, status="valid", warnings=[said])
                                       for j in ("a", "b")]).completeness().splitlines()
    assert f"  2 jobs ran on the simulator, {said}" in lines, lines
    assert not any("although" in line or "does not model" in line for line in lines), lines

    point = {"id": "r0", "job_id": "a", "verdict": "valid", "valid": True, "reasons": [], "reason": ""}
    groups = verdict_groups([point], [], {"r0": [said]})
    assert groups["catalog-estimates"]["count"] == 1 and "simulated-only" not in groups
    assert WARNING_BANNER[WarningKind.CATALOG_ESTIMATES] in WARNING_HEADS
    assert set(WARNING_BANNER) == set(WarningKind)  # every kind has its banner
    js = (Path(__file__).resolve().parents[3] / "src" / "llmsweep" / "report" / "assets" / "dashboard.js").read_text()
    # the dashboard draws a banner of every kind, with its explanation (`VERDICT_HEAD`)
    assert all(f'"{kind}": function (n)' in js or f"{kind}: function (n)" in js for kind in VERDICT_KINDS)


def test_jobs_that_share_a_request_timeout_warning_say_the_count_is_each_ones(tmp_path: Path) -> None:
    """Two jobs, each with 104 requests past --request-timeout, ended the run with `2 jobs ran in virtual time, where
    104 requests ran longer than …`, which reads as 104 in all: the count is each job's."""
    from llmsweep.execute.pipeline import RunOutcome
    from llmsweep.sim_warnings import timeout_not_applied

    late = timeout_not_applied(104, 1.0)
    lines = RunOutcome(tmp_path, "r", [JobOutcome(job_id=j, exp_name=j, status="valid", warnings=[late])
                                       for j in ("a", "b")]).completeness().splitlines()
    assert ("  2 jobs ran in virtual time, where 104 requests of each ran longer than --request-timeout 1 s, which "
            "virtual time does not apply: a live client would have timed them out (`--live` applies it)") in lines, \
        lines
