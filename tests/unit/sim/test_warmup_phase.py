"""A fixed-length point's warm-up is a phase of its own in virtual time, as the client runs it: its warm-up requests
run alone, and the profiling window opens when the last of them has ended. The predictor had sent profiling requests
beside the warm-up, so the window's first requests shared the engine with it (InferenceX's 2 x conc warm-ups: -1.4 %
to -2.6 % output throughput against the live client, -13 % on a KV-tight point)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmsweep import engines
from llmsweep.plan import jobs_from_files
from llmsweep.plan.point import Point
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.predict import predict, predict_point
from llmsweep.sim.serve_args import engine_config_from_argv
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"
CONFIG = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm")


def _workload(conc: int) -> FixedLengthWorkload:
    return FixedLengthWorkload(FixedLengthConfig(isl=1024, osl=64, num_prompts=6 * conc, num_warmups=2 * conc,
                                                 range_ratio=0.8, seed=5))


def _phases(records: list[dict[str, Any]]) -> tuple[float, float]:
    """When the last warm-up request ended, and when the first profiling request was sent."""
    warm_end = max(r["end_at"] for r in records if r["phase"] == "warmup")
    first = min(r["sent_at"] for r in records if r["phase"] == "profiling")
    return warm_end, first


def test_profiling_waits_for_the_warm_up_and_opens_when_it_ends() -> None:
    conc = 8
    records = predict(_workload(conc), CONFIG, concurrency=conc, duration=3600, warmup_requests=2 * conc)
    assert sum(r["phase"] == "warmup" for r in records) == 2 * conc
    assert sum(r["phase"] == "profiling" for r in records) == 6 * conc
    warm_end, first = _phases(records)
    assert first == warm_end  # the window opens as the warm-up ends, not later
    # and every lane starts its profiling there together, as the client's lanes after its warm-up barrier
    assert sum(r["sent_at"] == first for r in records if r["phase"] == "profiling") == conc


def test_fewer_warm_ups_than_lanes_hold_every_lane() -> None:
    """2 warm-ups at conc 16 (a KV-tight point's): the 14 lanes without one wait for them too."""
    workload = FixedLengthWorkload(FixedLengthConfig(isl=2048, osl=32, num_prompts=48, num_warmups=2, seed=1))
    records = predict(workload, CONFIG, concurrency=16, duration=3600, warmup_requests=2)
    warm_end, first = _phases(records)
    assert first == warm_end > 0
    assert sum(r["sent_at"] == first for r in records if r["phase"] == "profiling") == 16


def test_without_a_warm_up_phase_lanes_go_on_their_own() -> None:
    """A workload whose warm-up is not the client's phase (warmup_requests 0, as an agentic replay's, which drains
    its own) is not held: its first profiling requests go out beside the warm-up."""
    conc = 8
    records = predict(_workload(conc), CONFIG, concurrency=conc, duration=3600)
    warm_end, first = _phases(records)
    assert first < warm_end


def test_predicted_points_hold_their_warm_up_as_run_and_predict_do() -> None:
    """`predict_point` (what `predict` and `run` in virtual time call) passes the point's warm-up count."""
    (job, *_) = sorted(jobs_from_files([RUN / "fixed-sim.yaml"]), key=lambda j: j.concs[0])
    point = Point.of(job)
    assert point.load.warmup_requests > 0
    config = engine_config_from_argv(engines.render(job, simulate=True).argv)
    records = predict_point(point, config, summarize=False).records
    warm_end, first = _phases(records)
    assert first == warm_end
