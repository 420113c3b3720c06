"""The simulator's disaggregated prefill/decode model: the physics a benchmark engineer relies on when comparing a
disaggregated point with an aggregated one, and what the deployment exports."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from llmsweep.errors import ConfigError
from llmsweep.metrics.roles import KV_BYTES, KV_IN_FLIGHT, KV_PREALLOC, KV_SECONDS
from llmsweep.sim.disagg import Cluster, DisaggConfig, DisaggPredictor, Link, RolePlan
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.perf import Batch, RooflineTimer
from llmsweep.sim.predict import predict
from llmsweep.workload.base import LaneProgram, RequestIdentity, RequestSpec, Send, Workload

ENGINE = EngineConfig(model="llama-3.1-8b", hardware="h200", tp=1, calibrated=False)
NVLINK = Link(kind="scale-up", name="nvlink4", gbps=450, latency_s=8e-6)
NIC = Link(kind="scale-out", name="ConnectX-7 400G", gbps=50, latency_s=10e-6)


class Fixed(Workload):
    """Every lane sends `per_lane` requests of `isl` prompt tokens (distinct words: no prefix sharing) one by one."""

    def __init__(self, isl: int, osl: int, per_lane: int) -> None:
        self.isl, self.osl, self.per_lane = isl, osl, per_lane

    def one(self, lane: int, i: int) -> LaneProgram:
        prompt = " ".join(f"l{lane}r{i}w{k}" for k in range(self.isl))
        yield Send(RequestSpec(api="completions", max_tokens=self.osl, prompt=prompt,
                               identity=RequestIdentity(session=f"l{lane}r{i}", node="", turn=0, lane=lane)))

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        for i in range(self.per_lane):
            yield self.one(lane, i)


def deployment(prefill_workers: int = 1, decode_workers: int = 1, *, same_domain: bool = False,
               engine: EngineConfig = ENGINE) -> DisaggConfig:
    nodes = list(range(prefill_workers + decode_workers))
    return DisaggConfig(
        prefill=RolePlan(kind="prefill", engine=engine, gpus_per_worker=1,
                         nodes=tuple((n,) for n in nodes[:prefill_workers])),
        decode=RolePlan(kind="decode", engine=engine, gpus_per_worker=1,
                        nodes=tuple((n,) for n in nodes[prefill_workers:])),
        scaleup=NVLINK, scaleout=NIC, domain_nodes=len(nodes) if same_domain else 1, gpus_per_node=8,
        transfer_backend="nixl")


Records = list[dict[str, Any]]


def run_disagg(config: DisaggConfig, workload: Workload, concurrency: int) -> tuple[Records, DisaggPredictor]:
    predictor = DisaggPredictor(Cluster(config), scrape_interval=1.0)
    return predictor.run(workload, concurrency=concurrency, duration=1e6), predictor


def ttft(records: list[dict[str, Any]]) -> np.ndarray:
    return np.array([r["first_token_at"] - r["sent_at"] for r in records])


def tpot(records: list[dict[str, Any]]) -> np.ndarray:
    return np.array([(r["end_at"] - r["first_token_at"]) / (r["completion_tokens"] - 1) for r in records])


def test_at_long_isl_and_low_concurrency_ttft_pays_the_kv_transfer() -> None:
    isl = 16_000
    work = Fixed(isl, 32, per_lane=3)
    agg = predict(work, ENGINE, concurrency=1, duration=1e6)
    dis, predictor = run_disagg(deployment(), work, concurrency=1)
    transfer = predictor.cluster.transfer_time(isl, 0, 0)
    # 16k tokens x 128 KiB of KV over a 50 GB/s NIC at 70 %: tens of milliseconds, not a rounding error
    assert transfer > 0.05
    assert all(r["status"] == 200 for r in [*agg, *dis]) and len(agg) == len(dis) == 3
    assert np.all(ttft(dis) >= ttft(agg) + transfer * (1 - 1e-9)), (ttft(dis), ttft(agg), transfer)
    # the same pair inside one NVLink domain moves the KV ~9x faster: the link is the catalog's, not a constant
    near, near_predictor = run_disagg(deployment(same_domain=True), work, concurrency=1)
    assert near_predictor.cluster.transfer_time(isl, 0, 0) < transfer / 5
    assert ttft(near).mean() < ttft(dis).mean()


def test_at_high_concurrency_decode_interference_disappears_from_tpot() -> None:
    isl, osl, conc = 2048, 128, 32
    work = Fixed(isl, osl, per_lane=4)
    agg = predict(work, ENGINE, concurrency=conc, duration=1e6)
    dis, _ = run_disagg(deployment(prefill_workers=2), work, concurrency=conc)
    assert len(agg) == len(dis) == conc * 4 and all(r["status"] == 200 for r in [*agg, *dis])
    # The slowest step a decode worker can take with every lane decoding at its longest context: no prefill in it.
    timer = RooflineTimer(ENGINE.perf_inputs(), efficiency=ENGINE.efficiency_factors())
    bound = timer.step_time(Batch(decode_seqs=conc, decode_tokens=conc, decode_ctx=conc * (isl + osl)))
    assert tpot(dis).max() <= bound * (1 + 1e-9), (tpot(dis).max(), bound)
    # Aggregated, the prefills of arriving requests share steps with the decodes: TPOT carries them.
    assert np.median(tpot(agg)) > bound
    assert np.median(tpot(agg)) > 1.3 * np.median(tpot(dis))


def test_the_deployment_exports_per_role_metrics_like_a_real_one() -> None:
    work = Fixed(1024, 16, per_lane=2)
    records, predictor = run_disagg(deployment(prefill_workers=2, decode_workers=2), work, concurrency=4)
    assert len(records) == 8
    last = predictor.scrapes[-1]["samples"]
    roles = {(labels["role"], labels["worker"]) for _, labels, _ in last}
    assert roles == {("prefill", "0"), ("prefill", "1"), ("decode", "0"), ("decode", "1")}
    by = {(name, labels["role"], labels["worker"]): value for name, labels, value in last}
    transfers = sum(by[(KV_SECONDS.count, "decode", w)] for w in "01")
    assert transfers == 8  # every request's KV moved once
    assert sum(by[(KV_BYTES.total, "decode", w)] for w in "01") == pytest.approx(
        8 * 1024 * ENGINE.perf_inputs().kv_bytes_per_token)
    # the round-robin router spread the prompts over both prefill workers
    assert all(by[("sglang:prompt_tokens_total", "prefill", w)] == 4 * 1024 for w in "01")


def test_decode_admission_waits_for_kv_room_and_every_request_still_completes() -> None:
    small = ENGINE.model_copy(update={"kv_capacity_tokens": 3 * 1024, "block_size": 64})
    work = Fixed(1000, 64, per_lane=2)
    records, predictor = run_disagg(deployment(engine=small), work, concurrency=4)
    assert len(records) == 8 and all(r["status"] == 200 for r in records)
    queued = [v for s in predictor.scrapes for name, labels, v in s["samples"]
              if name == KV_PREALLOC.name]
    assert max(queued) >= 1  # a hand-off waited for decode-side KV blocks before its transfer
    assert predictor.cluster.drained()


@pytest.mark.parametrize("capacity", ["on-demand", "no-evict"])
def test_a_no_evict_decode_worker_reserves_each_hand_off_s_whole_length_and_never_preempts(capacity: str) -> None:
    """TensorRT-LLM's GUARANTEED_NO_EVICT on the decode side (its generation server schedules a hand-off's KV under
    the same capacity scheduler): a hand-off starts its transfer only when its whole length fits what the running and
    in-flight requests have not reserved, so nothing is preempted; on demand, the same load preempts."""
    small = ENGINE.model_copy(update={"kv_capacity_tokens": 6 * 1024, "block_size": 64, "capacity": capacity})
    records, predictor = run_disagg(deployment(engine=small), Fixed(600, 1200, per_lane=2), concurrency=4)
    assert len(records) == 8 and all(r["status"] == 200 for r in records)
    preempted = sum(w.core.counters.preemptions for w in predictor.cluster.decode)
    assert (preempted == 0) if capacity == "no-evict" else (preempted > 0), preempted
    assert predictor.cluster.drained() and all(w.reserved == 0 for w in predictor.cluster.decode)


def test_a_pair_across_domains_without_scale_out_figures_is_a_clear_error() -> None:
    config = deployment().model_copy(update={"scaleout": None})
    with pytest.raises(ConfigError, match="no scale-out bandwidth") as err:
        config.links()
    assert "scaleout_gbps" in (err.value.fix or "")


def test_the_least_load_router_sends_work_to_the_idle_worker() -> None:
    config = deployment(prefill_workers=2, decode_workers=2).model_copy(update={"router_policy": "least_load"})
    cluster = Cluster(config)
    cluster.prefill[0].outstanding = 3
    cluster.decode[1].outstanding = 1
    assert cluster.route() == (1, 0)
    rr = Cluster(deployment(prefill_workers=2, decode_workers=2))
    assert [rr.route() for _ in range(3)] == [(0, 0), (1, 1), (0, 0)]


def test_the_prefill_worker_holds_the_prompts_kv_until_the_transfer_has_read_it() -> None:
    slow = deployment().model_copy(update={"scaleout": NIC.model_copy(update={"gbps": 0.5})})
    predictor = DisaggPredictor(Cluster(slow), scrape_interval=0.02)
    records = predictor.run(Fixed(1024, 8, per_lane=1), concurrency=1, duration=1e6)
    assert len(records) == 1 and records[0]["status"] == 200

    def value(samples: list[list[Any]], name: str, role: str) -> float:
        return float(next(v for n, labels, v in samples if n == name and labels["role"] == role))

    in_transfer = [s["samples"] for s in predictor.scrapes
                   if value(s["samples"], KV_IN_FLIGHT.name, "decode") > 0]
    assert in_transfer  # a 1024-token prompt over 0.5 GB/s takes about 0.4 s
    for samples in in_transfer:  # the prefill worker is idle, yet its pool still holds the prompt's blocks
        assert value(samples, "sglang:num_running_reqs", "prefill") == 0
        assert value(samples, "sglang:token_usage", "prefill") > 0
    assert value(predictor.scrapes[-1]["samples"], "sglang:token_usage", "prefill") == 0


class Staggered(Fixed):
    """`Fixed` with output lengths that differ by lane and request: requests finish (and their lanes send the next)
    while the other decode worker is inside a block."""

    def one(self, lane: int, i: int) -> LaneProgram:
        for action in super().one(lane, i):
            assert isinstance(action, Send)
            yield Send(dataclasses.replace(action.spec, max_tokens=2 + (97 * lane + 61 * i) % self.osl))


@pytest.mark.parametrize(("spec", "prefill_workers"), [(False, 1), (True, 1), (True, 2)])
def test_coalesced_disaggregated_prediction_equals_the_step_by_step_one(spec: bool, prefill_workers: int) -> None:
    """Decode workers run blocks of decode steps across scrapes and through the step in which requests finish; the
    records and every scrape equal the step-by-step path's (chunk times to float rounding)."""
    from llmsweep.sim.config import SpecDecodeConfig

    engine = ENGINE.model_copy(update={"spec": SpecDecodeConfig(method="mtp", k=3, acceptance_length=2.5)}
                               if spec else {})
    config = deployment(prefill_workers, 2, engine=engine)

    def run(coalesce: bool) -> tuple[Records, DisaggPredictor, int]:
        predictor = DisaggPredictor(Cluster(config, coalesce=coalesce), scrape_interval=0.25)
        blocks = 0
        for w in predictor.cluster.decode:
            end_step = w.core.end_step

            def counting(end_step: Any = end_step, core: Any = w.core) -> list[Any]:
                nonlocal blocks
                out = end_step()
                blocks += core.last_block is not None and core.last_block.finishes
                return out

            w.core.end_step = counting  # type: ignore[method-assign]
        records = predictor.run(Staggered(isl=3000, osl=400, per_lane=4), concurrency=10, duration=1e6)
        return records, predictor, blocks

    step_records, step_pred, _ = run(False)
    fast_records, fast_pred, finishing_blocks = run(True)
    assert finishing_blocks > 0  # blocks ended with the step in which their requests finished
    assert len(step_records) == 40 and all(r["status"] == 200 for r in step_records)

    def accounting(r: dict[str, Any]) -> tuple[Any, ...]:
        return r["session"], r["prompt_tokens"], r["completion_tokens"], r["chunk_tokens"]

    assert [accounting(r) for r in fast_records] == [accounting(r) for r in step_records]
    for x, y in zip(step_records, fast_records, strict=True):
        np.testing.assert_allclose(y["chunk_times"], x["chunk_times"], rtol=0, atol=1e-6)
        assert y["end_at"] == pytest.approx(x["end_at"], abs=1e-6)
    assert len(fast_pred.scrapes) == len(step_pred.scrapes) > 5
    for x, y in zip(step_pred.scrapes, fast_pred.scrapes, strict=True):
        assert [s[:2] for s in x["samples"]] == [s[:2] for s in y["samples"]]
        np.testing.assert_allclose([s[2] for s in y["samples"]], [s[2] for s in x["samples"]], rtol=1e-9)
    steps = [w.core.counters.steps for w in fast_pred.cluster.workers]
    assert steps == [w.core.counters.steps for w in step_pred.cluster.workers]


@pytest.mark.parametrize(("spec", "scheduler"), [(False, "unified"), (True, "unified"), (False, "prefill-first"),
                                                  (True, "prefill-first")])
def test_a_decode_batch_in_arrays_gives_the_records_and_scrapes_of_the_batch_request_by_request(
        spec: bool, scheduler: str) -> None:
    """A decode worker's running batch in arrays (`EngineCore._schedule_rows`, from `ROWS` running requests; here
    from one), with the requests it adopts between and inside its steps joining it, gives exactly the records, chunk
    stamps and scrapes of the batch taken request by request — over two points run one after another on one
    deployment, as `predict` runs a job's concurrencies; under ATOM's prefill-first scheduler too (a decode
    worker's steps are decode steps: it adopts prefilled requests, nothing waits)."""
    from llmsweep.sim.config import SpecDecodeConfig

    update: dict[str, Any] = {"scheduler": scheduler}
    if spec:
        update["spec"] = SpecDecodeConfig(method="mtp", k=3, acceptance_length=2.5)
    engine = ENGINE.model_copy(update=update)
    config = deployment(1, 2, engine=engine)

    def run(rows_from: int) -> tuple[list[Records], list[list[dict[str, Any]]], Cluster]:
        cluster = Cluster(config)
        for w in cluster.decode:
            w.core.rows_from = rows_from
        records, scrapes = [], []
        start = 0.0
        for conc in (6, 10):
            predictor = DisaggPredictor(cluster, start_time=start, scrape_interval=0.25)
            records.append(predictor.run(Staggered(isl=3000, osl=400, per_lane=3), concurrency=conc,
                                         duration=1e6))
            scrapes.append(predictor.scrapes)
            start += predictor.stats.virtual_seconds + 30.0
        return records, scrapes, cluster

    by_request, by_request_scrapes, plain = run(10**9)
    in_arrays, in_arrays_scrapes, arrays = run(1)
    assert all(not w.core.step_ends for w in plain.decode)
    assert all(len(w.core.step_ends) > 100 for w in arrays.decode)  # the arrays took the decode steps
    assert [len(r) for r in by_request] == [18, 30]
    assert in_arrays == by_request
    assert in_arrays_scrapes == by_request_scrapes
