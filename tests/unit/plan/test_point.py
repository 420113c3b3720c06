"""The Point: run and predict read one job's concurrency point the same way."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.execute.lifecycle import LifecycleSettings, _run_options, _workload
from llmsweep.plan import jobs_from_files
from llmsweep.plan.job import Job
from llmsweep.plan.point import Point, points_of
from llmsweep.sim.predict import predict_point
from llmsweep.sim.serve_args import engine_config_from_argv
from llmsweep.workload.mooncake import MooncakeWorkload

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def test_a_fixed_point_is_what_run_sends() -> None:
    (job, *_) = sorted(jobs_from_files([RUN / "fixed-sim.yaml"]), key=lambda j: j.concs[0])
    point = Point.of(job)
    assert point.concurrency == 2 and point.load.num_requests == 8 and point.load.warmup_requests == 1
    options = _run_options(job, engines.render(job, simulate=True), LifecycleSettings())
    assert (options.concurrency, options.num_requests, options.warmup_requests, options.max_failure_ratio) == (
        point.load.concurrency, point.load.num_requests, point.load.warmup_requests, point.max_error_ratio)
    # the same prompts: the point salts its seed with the job id, as the lifecycle's workload does
    assert point.workload(simulated=True).config.seed == _workload(job, "simulated").config.seed  # type: ignore[attr-defined]


def test_predict_replays_a_mooncake_trace_from_a_recipe(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 50 * i, "input_length": 600, "output_length": 5,
                                         "hash_ids": [0, i]}) + "\n" for i in range(10)))
    recipe = tmp_path / "replay.yaml"
    recipe.write_text((RUN / "replay-sim.yaml").read_text().replace("mooncake: TRACE", f"mooncake: {trace}"))
    (job,) = jobs_from_files([recipe])
    (point,) = points_of(job)
    assert isinstance(point.workload(simulated=True), MooncakeWorkload)
    predicted = predict_point(point, engine_config_from_argv(engines.render(job, simulate=True).argv))
    assert len(predicted.records) == 10  # every row once
    assert {r["lane"] for r in predicted.records} == {0, 1, 2, 3}  # closed loop at the job's conc, as `run` sends it
    assert predicted.summary is not None
    assert predicted.summary.requests.successful == 10
    assert predicted.summary.source == "predicted"


def test_traces_override_the_agentic_jobs_source_only() -> None:
    from llmsweep.plan.point import trace_source, with_traces

    jobs = jobs_from_files([RUN / "agentic-sim.yaml", RUN / "fixed-sim.yaml"])
    replaced = with_traces(jobs, "synthetic")
    for before, after in zip(jobs, replaced, strict=True):
        assert after.id == before.id
        if before.workload.scenario.value == "agentic-coding":
            assert after.workload.traces is not None and after.workload.traces.synthetic is not None
        else:
            assert after.workload == before.workload
    # `synthetic` is capped like the corpus InferenceX picks for the model: 256k for Qwen3.5, 1M for DeepSeek-V4.
    assert trace_source("synthetic", "qwen3.5").synthetic.max_isl == 256_000  # type: ignore[union-attr]
    assert trace_source("synthetic", "dsv4").synthetic.max_isl is None  # type: ignore[union-attr]
    assert trace_source("org/dataset", "qwen3.5").hf == "org/dataset"


def test_traces_on_a_run_without_an_agentic_job_says_it_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """`run --traces X` on fixed-length recipes only was taken without a word (the audit of the CLI's contracts)."""
    from llmsweep.plan.point import with_traces

    fixed = jobs_from_files([RUN / "fixed-sim.yaml"])
    with caplog.at_level(logging.WARNING, logger="llmsweep.plan.point"):
        assert with_traces(fixed, "synthetic") == fixed
    assert "--traces synthetic changes nothing: no job of this run is an agentic replay" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="llmsweep.plan.point"):
        with_traces(jobs_from_files([RUN / "agentic-sim.yaml", RUN / "fixed-sim.yaml"]), "synthetic")
    assert "changes nothing" not in caplog.text


def test_an_unreadable_trace_source_is_named_once_with_its_fix(tmp_path: Path) -> None:
    from llmsweep.plan.point import check_trace_sources, with_traces

    jobs = jobs_from_files([RUN / "agentic-sim.yaml"])
    assert len(jobs) > 1
    assert check_trace_sources(with_traces(jobs, "synthetic")) == {}
    missing = str(tmp_path / "missing.jsonl")
    (error,) = check_trace_sources(with_traces(jobs, missing)).values()  # one source, however many jobs
    assert "cannot be read" in error.message and "--traces synthetic" in (error.fix or "")
    assert error.message.count(missing) == 1, error.message  # the loader's own message named it too
    empty = tmp_path / "empty"
    empty.mkdir()
    (error,) = check_trace_sources(with_traces(jobs, str(empty))).values()
    assert "holds no trace" in error.message


def test_a_trace_source_bad_after_its_first_trace_is_refused_before_any_server(tmp_path: Path) -> None:
    """The check reads the whole corpus, as each job's replay does: a bad line past the first trace (or a corpus of
    subagent entries alone, which a replay cannot play) refuses the jobs once, before any server starts; it used to
    pass the check and fail every job after its server had started."""
    from llmsweep.plan.point import check_trace_sources, with_traces
    from llmsweep.workload.traces.synth import SynthProfile, synthesize

    jobs = jobs_from_files([RUN / "agentic-sim.yaml"])
    good = [t.to_json_line() for t in synthesize(SynthProfile(traces=3, seed=1, max_isl=4096))]
    corpus = tmp_path / "traces.jsonl"
    corpus.write_text("\n".join([*good, '{"id": "x", "requests": [{"t": "soon", "in": 1, "out": 1}]}']) + "\n")
    (error,) = check_trace_sources(with_traces(jobs, str(corpus))).values()
    assert f"{corpus}:4" in error.message and "--traces synthetic" in (error.fix or "")
    subagents_only = tmp_path / "subagents.jsonl"
    subagents_only.write_text(json.dumps({"id": "s", "requests": [
        {"type": "subagent", "t": 0, "agent_id": "a", "requests": [{"t": 0, "in": 64, "out": 1}]}]}) + "\n")
    (error,) = check_trace_sources(with_traces(jobs, str(subagents_only))).values()
    assert "no trace with a top-level request" in error.message
    corpus.write_text("\n".join(good) + "\n")
    assert check_trace_sources(with_traces(jobs, str(corpus))) == {}


def test_a_damaged_mooncake_row_is_refused_before_any_server(tmp_path: Path) -> None:
    """A Mooncake trace was checked only for existing: a row with no input length (or out of timestamp order) was
    found when the job's workload was built, after its server had started — a model load of GPU time per job. Its
    rows are read as far as the job reading most of them reads (`max-rows`)."""
    from llmsweep.plan.point import check_trace_sources

    trace = tmp_path / "trace.jsonl"
    rows = [json.dumps({"timestamp": 50 * i, "input_length": 600, "output_length": 5, "hash_ids": [0, i]})
            for i in range(10)]
    trace.write_text("\n".join([*rows[:6], '{"timestamp": 300, "output_length": 5}', *rows[7:]]) + "\n")

    def jobs(replay: str) -> list[Job]:
        recipe = tmp_path / "replay.yaml"
        recipe.write_text((RUN / "replay-sim.yaml").read_text().replace("mooncake: TRACE", replay))
        return jobs_from_files([recipe])

    (error,) = check_trace_sources(jobs(f"mooncake: {trace}")).values()
    assert error.message == (f"Mooncake trace {trace}:7: not a Mooncake row: input_length: Field required"), error
    assert "input_length" in (error.fix or "")
    assert check_trace_sources(jobs(f"{{ mooncake: {trace}, max-rows: 6 }}")) == {}  # the bad row is never read
    trace.write_text("\n".join([*rows[:6], rows[2], *rows[7:]]) + "\n")  # a row that arrives before the one above
    (error,) = check_trace_sources(jobs(f"mooncake: {trace}")).values()
    assert f"{trace}:7: the row arrives at 0.1 s, before the row of line 6" in error.message
    trace.write_text("\n".join(rows) + "\n")
    assert check_trace_sources(jobs(f"mooncake: {trace}")) == {}
