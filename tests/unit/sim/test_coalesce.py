"""Event-to-event virtual time equals step-by-step virtual time.

The core runs consecutive decode steps as one block while the batch cannot change (see `llmsweep.sim.core`); the
predictor still stamps every chunk. A user relies on the fast path giving the numbers the step path gives: these
tests run the same short windows both ways — fixed-length and agentic, with and without speculative decoding, with
prefix caching, a CPU tier and a KV pool small enough to evict and preempt — and compare what a summary reports
(throughput, TTFT/TPOT percentiles, cache hit rate) within 1 %, the server-metric scrapes, and each request's
token accounting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from llmsweep.metrics import summarise
from llmsweep.sim.acceptance import AcceptanceController
from llmsweep.sim.config import SpecDecodeConfig
from llmsweep.sim.core import EngineCore
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.perf import Batch, decode_step_times
from llmsweep.sim.power import PowerModel
from llmsweep.sim.predict import Predictor
from llmsweep.sim.synthetic import AgentWorkload
from llmsweep.workload.base import Workload
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

MTP = SpecDecodeConfig(method="mtp", k=3, acceptance_length=2.5)
MTP_HIGH = SpecDecodeConfig(method="mtp", k=3, acceptance_length=3.39)  # AL > K: the K+1 clamp binds often


def _fixed() -> Workload:
    return FixedLengthWorkload(FixedLengthConfig(isl=1500, osl=300, num_prompts=48, range_ratio=0.5,
                                                 num_warmups=4))


def _agentic() -> Workload:
    return AgentWorkload(system_tokens=3000, turns=10, tool_tokens=600, osl=150, think_s=0.5, subagent_every=3)


CASES: dict[str, tuple[Callable[[], Workload], EngineConfig, int]] = {
    "fixed": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200"), 16),
    "fixed-mtp-vllm": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200", spec=MTP,
                                            engine_style="vllm"), 16),
    "fixed-mtp-over-k": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200", spec=MTP_HIGH), 16),
    "agentic-prefix-cache": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200"), 8),
    "agentic-mtp-cpu-tier": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200", spec=MTP_HIGH,
                                                    kv_capacity_tokens=40_000, dram_gb=4.0), 12),
    "agentic-cpu-tier": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200", kv_capacity_tokens=40_000,
                                                dram_gb=4.0), 12),
    "agentic-kv-pressure": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200", spec=MTP,
                                                   kv_capacity_tokens=25_000), 12),
    # SGLang retracts by its length key without spec decoding; vLLM preempts while it schedules
    "agentic-kv-pressure-sglang": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200",
                                                          kv_capacity_tokens=25_000), 12),
    "agentic-kv-pressure-vllm": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                        kv_capacity_tokens=25_000), 12),
    # a front end whose latency grows with the requests in flight: submits move, blocks still end before them
    "fixed-loaded-frontend": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                   efficiency={"frontend_per_request_s": 2e-3}), 16),
    "agentic-loaded-frontend": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                       efficiency={"frontend_per_request_s": 2e-3}), 12),
    # ATOM's prefill-first steps: decode blocks run only while nothing can be prefilled, and still equal the steps
    "fixed-prefill-first": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                 scheduler="prefill-first", chunked_prefill_size=16384), 16),
    "fixed-prefill-first-mtp": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                     scheduler="prefill-first", spec=MTP), 16),
    # prompts longer than a chunk: a prefill-first step with a request still to prefill never runs from the arrays
    "fixed-prefill-first-chunked": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                         scheduler="prefill-first", chunked_prefill_size=512), 4),
    "fixed-prefill-first-chunked-mtp": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200",
                                                             engine_style="vllm", scheduler="prefill-first",
                                                             chunked_prefill_size=512, spec=MTP), 4),
    # a full batch with requests waiting: prefill-first admits nobody, so its decode step is the unified one
    "fixed-prefill-first-full": (_fixed, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                      scheduler="prefill-first", max_running_requests=5, spec=MTP),
                                 12),
    "agentic-kv-pressure-prefill-first": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200",
                                                                 engine_style="vllm", scheduler="prefill-first",
                                                                 spec=MTP, kv_capacity_tokens=25_000), 12),
    # TensorRT-LLM's no-evict admission: a waiting head held back by the reservations is admitted only at a finish
    "agentic-kv-pressure-no-evict": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm",
                                                            capacity="no-evict", kv_capacity_tokens=25_000), 12),
    "agentic-kv-pressure-no-evict-mtp": (_agentic, EngineConfig(model="llama-3.1-8b", hardware="h200",
                                                                engine_style="vllm", capacity="no-evict", spec=MTP,
                                                                kv_capacity_tokens=25_000), 12),
}


def _run(case: str, *, coalesce: bool, duration: float = 40.0, rows_from: int | None = None
         ) -> tuple[list[dict[str, Any]], Predictor, int]:
    """Records, the predictor and how many scrapes read the core inside a block of steps (0 on the step path).
    `rows_from`: the core's `rows_from` (running requests from which the batch lives in arrays)."""
    make, config, conc = CASES[case]
    core = build_core(config, coalesce=coalesce)
    if rows_from is not None:
        core.rows_from = rows_from
    inside = 0
    scrape = Predictor.scrape

    def counting_scrape(self: Predictor, now: float, *, probes: bool = True) -> None:
        nonlocal inside
        inside += self.core._plan is not None
        before = (dataclasses.replace(self.core.counters), self.core.used_blocks())
        scrape(self, now, probes=probes)
        # a scrape is a read: what it showed as of `now` is the block's state again after it
        assert (self.core.counters, self.core.used_blocks()) == before

    end_step = core.end_step

    def counting_end_step() -> list[Any]:
        out = end_step()
        if core.last_block is not None and core.last_block.finishes:
            finishing.append(sum(r.finished_at is not None for r in out))
        return out

    finishing: list[int] = []
    core.end_step = counting_end_step  # type: ignore[method-assign]
    predictor = Predictor(core, scrape_interval=1.0)
    predictor.scrape = counting_scrape.__get__(predictor)  # type: ignore[method-assign]
    # the modelled power, read at every scrape (as `run` in virtual time does): it reads steps and busy time
    clock = [0.0]
    power = PowerModel(core, hardware="h200", tp=1, clock=lambda: clock[0])
    watts: list[int] = []

    def probe(t: float) -> None:
        clock[0] = t
        watts.append(power.read()["gpus"][0]["power_usage_mw"])

    predictor.probes.append(probe)
    records = predictor.run(make(), concurrency=conc, duration=duration)
    predictor.stats.counters["watts"] = watts
    predictor.stats.counters["finishing_blocks"] = finishing
    return records, predictor, inside


def _headline(records: list[dict[str, Any]], scrapes: list[dict[str, Any]]) -> dict[str, float]:
    s = summarise(records, gpus=1, server_metrics=scrapes, source="predicted")
    lat = s.latency
    return {
        "output_tps": s.throughput.output_tps,
        "ttft_p50": lat.ttft.p50, "ttft_p90": lat.ttft.p90,
        "tpot_p50": lat.tpot.p50, "tpot_p90": lat.tpot.p90, "tpot_p99": lat.tpot.p99,
        "itl_p50": lat.itl.p50,
        "hit_rate": s.cache.observed_hit_rate or 0.0,
        "requests": s.requests.successful,
    }


@pytest.mark.parametrize("case", list(CASES))
def test_coalesced_prediction_equals_the_step_by_step_one(case: str) -> None:
    step_records, step_pred, step_inside = _run(case, coalesce=False)
    fast_records, fast_pred, fast_inside = _run(case, coalesce=True)
    assert step_inside == 0
    assert fast_inside > 0, "no scrape fell inside a block of steps (blocks run across scrapes)"
    # blocks end with the step in which requests reach their length (and finish them there)
    assert fast_pred.stats.counters["finishing_blocks"] and min(fast_pred.stats.counters["finishing_blocks"]) >= 1
    step, fast = step_pred.core, fast_pred.core
    assert fast.counters.steps == step.counters.steps
    if "no-evict" in case:  # the pool the on-demand case preempts in: admissions wait for reservations instead
        on_demand = _run("agentic-kv-pressure-vllm", coalesce=False)[1].core.counters
        assert step.counters.preemptions == 0 < on_demand.preemptions
        assert step.counters.max_running_seen < on_demand.max_running_seen
    elif case.startswith("agentic-kv-pressure"):
        assert step.counters.preemptions > 0  # the case does exercise a full pool
    if case == "agentic-mtp-cpu-tier":
        assert step.counters.host_hit_tokens > 0

    a, b = _headline(step_records, step_pred.scrapes), _headline(fast_records, fast_pred.scrapes)
    assert a["requests"] >= 20
    for key, value in a.items():
        assert b[key] == pytest.approx(value, rel=0.01, abs=1e-9), (key, value, b[key])

    # the same requests with the same token accounting, a chunk per step, chunk times within float rounding
    def accounting(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["session"], r["node"], r["turn"], r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"],
                r["chunk_tokens"])

    assert [accounting(r) for r in fast_records] == [accounting(r) for r in step_records]
    for x, y in zip(step_records, fast_records, strict=True):
        assert len(x["chunk_times"]) == len(y["chunk_times"])
        np.testing.assert_allclose(y["chunk_times"], x["chunk_times"], rtol=0, atol=1e-6)

    # the modelled power at every scrape (a mW may round the other way: busy time sums in another order)
    np.testing.assert_allclose(fast_pred.stats.counters["watts"], step_pred.stats.counters["watts"], atol=1)

    # server metrics a scrape reads are the same at every scrape, value for value (counters move only at step ends;
    # inside a block `EngineCore.enter_as_of` shows them as of the scrape)
    assert fast_pred.scrapes == step_pred.scrapes


ROWS_CASES = list(CASES)


CROSSING_CASES = ["fixed", "agentic-cpu-tier", "agentic-mtp-cpu-tier", "agentic-kv-pressure-sglang",
                  "agentic-kv-pressure-vllm"]
"""Cases whose batch crosses a threshold of 7 running requests both ways (into the arrays at 7, out below 4)."""


@pytest.mark.parametrize(("case", "rows_from"), [(case, 1) for case in ROWS_CASES] +
                         [(case, 7) for case in CROSSING_CASES])
def test_the_batch_in_arrays_gives_the_records_and_scrapes_of_the_batch_request_by_request(
        case: str, rows_from: int) -> None:
    """A batch in arrays (`EngineCore._schedule_rows`: decodes scheduled and applied in numpy, their chunk stamps
    deferred to the end of their run of steps) gives every record and scrape exactly, at every batch size (the
    threshold forced down to one request, and at 7, where the batch moves into the arrays and out again while decodes
    have runs of steps open); preemptions, retractions and no-evict waits fall back to the step path, and so does
    a prefill-first step with anything to prefill or admit.
    With speculative decoding the draws come from the same stream positions in the same order (a decode's verify
    in batch order, a finishing prefill's first token at its place) and each step's tokens per request are stamped
    as the step path stamps them."""
    by_request, by_request_pred, _ = _run(case, coalesce=True, rows_from=1 << 30)
    rows, rows_pred, _ = _run(case, coalesce=True, rows_from=rows_from)
    assert not by_request_pred.core.step_ends
    assert len(rows_pred.core.step_ends) > 100  # the steps did run from the arrays
    assert rows == by_request
    assert rows_pred.scrapes == by_request_pred.scrapes
    assert rows_pred.core.counters == by_request_pred.core.counters
    if case.startswith("agentic-kv-pressure") and "no-evict" not in case:
        assert rows_pred.core.counters.preemptions > 0


def test_a_block_of_planned_draws_is_what_the_draws_one_by_one_give() -> None:
    for al, first_token in ((2.5, True), (3.39, False), (3.9, True), (1.3, False)):
        one = AcceptanceController(3, al, seed=5, counts_first_token=first_token)
        block = AcceptanceController(3, al, seed=5, counts_first_token=first_token)
        for i in range(40):
            planned = block.plan(*((30, 7) if i % 3 else (1, 2)))  # small plans too
            got = []
            for _ in range(planned.size):
                n = one.step()
                one.settle(n, n)
                got.append(n)
            assert planned.ravel().tolist() == got
            assert planned.shape[1] == (7 if i % 3 else 2)
            block.commit(planned.size, int(planned.sum()))
            # a first token (SGLang counts it) between blocks moves the debt like the step path does
            one.first_token()
            block.first_token()
            # a step the planner declined (debt out of its range) is taken one by one on both
            if not len(planned):
                n = one.step()
                one.settle(n, n)
                m = block.step()
                block.settle(m, m)
                assert n == m
        assert block.debt == pytest.approx(one.debt, abs=1e-9)


def test_draws_one_by_one_read_the_seeded_stream_in_order_across_refills_and_planned_runs() -> None:
    """`verify` reads the uniforms as Python floats a window at a time and `plan`/`commit` skip over them as an array:
    over several refills of the buffer, the draws one by one are still the seeded stream's next uniforms, in order."""
    k, al, seed = 3, 3.39, 11
    sampler = AcceptanceController(k, al, seed, counts_first_token=True)
    draws = 3 * AcceptanceController.CHUNK + 1000
    stream = np.random.default_rng(seed).random(2 * draws).tolist()
    pos, debt, bound = 0, 0.0, sampler.bound
    rng = np.random.default_rng(3)
    while pos < draws:
        if rng.random() < 0.3:  # a planned run, committed: the reference steps over the same uniforms
            rows, cols = int(rng.integers(1, 40)), int(rng.integers(1, 17))
            planned = sampler.plan(rows, cols)
            for n in planned.ravel().tolist():
                ref = min(max(int(al + debt + stream[pos]), 1), k + 1)
                assert n == ref
                debt = min(max(debt + (al - n), -bound), bound)
                pos += 1
            sampler.commit(planned.size, int(planned.sum()))
            debt = sampler.debt  # (the closed form's debt: equal to the steps' up to float rounding)
        for _ in range(int(rng.integers(1, 70))):
            left = int(rng.integers(1, 6))
            drawn, emitted = sampler.verify(left)
            ref = min(max(int(al + debt + stream[pos]), 1), k + 1)
            assert (drawn, emitted) == (ref, min(ref, left))
            debt = min(max(debt + (al - min(ref, left)), -bound), bound)
            pos += 1
        assert sampler.debt == debt


def test_the_live_server_path_is_unchanged_without_a_horizon() -> None:
    """`begin_step(now)` with no horizon steps once, as the live HTTP server needs."""
    core: EngineCore = build_core(EngineConfig(model="llama-1b", timing="constant", ttft_s=0.02, itl_s=0.01,
                                               kv_capacity_tokens=100_000))
    reqs = [core.new_request(100, [], 50) for _ in range(4)]
    now, steps = 0.0, 0
    while core.has_work():
        end = core.begin_step(now)
        assert end is not None
        core.end_step()
        assert core.last_block is None
        now, steps = end, steps + 1
    assert steps == 50 and all(r.generated == 50 for r in reqs)
    assert now == pytest.approx(0.02 + 49 * 0.01)


@pytest.mark.parametrize("spec", [None, MTP])
@pytest.mark.parametrize("model,tp", [("llama-3.1-8b", 1), ("qwen3.5-397b-a17b", 8)])
def test_vectorised_step_times_equal_the_scalar_ones(model: str, tp: int, spec: SpecDecodeConfig | None) -> None:
    """A block prices its steps in one pass; each must be the step time the step path computes for that context
    (memory-bound at short contexts, compute-bound attention at long ones for big batches)."""
    timer = EngineConfig(model=model, hardware="h200", tp=tp, ep=tp, precision="fp8", spec=spec).timer()
    seqs = 48
    lookahead = spec.k + 1 if spec else 1
    batch = Batch(decode_seqs=seqs, decode_tokens=seqs * lookahead, draft_tokens=spec.k if spec else 0)
    ctx = np.array([seqs * 10, seqs * 3_000, seqs * 120_000, seqs * 1_000_000], np.int64)
    vectorised = decode_step_times(timer, batch, ctx)
    scalar = []
    for c in ctx.tolist():
        batch.decode_ctx = c
        scalar.append(timer.step_time(batch))
    assert vectorised.tolist() == scalar
    assert sorted(scalar) == scalar and scalar[0] < scalar[-1]  # never falls as the context grows
