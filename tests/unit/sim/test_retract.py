"""KV pressure as each engine meets it: vLLM V1 preempts the most recently admitted request while it schedules the
running ones; SGLang retracts decodes before the step (`retract_decode`: fewest output tokens first, the longer
prompt first on ties, until the rest fit), requeues them at the tail of the waiting queue and counts them in
`sglang:num_retracted_requests_total`."""

from __future__ import annotations

from typing import Literal

import numpy as np

from llmsweep.sim.config import SimConfig, SpecDecodeConfig
from llmsweep.sim.core import EngineCore, SimRequest
from llmsweep.sim.metrics import CoreCollector
from llmsweep.sim.perf import ConstantTimer

NO_HASHES = np.empty(0, np.uint64)
Style = Literal["sglang", "vllm"]


def _core(style: Style, capacity_tokens: int, *, block: int,
          spec: SpecDecodeConfig | None = None) -> EngineCore:
    config = SimConfig(engine_style=style, block_size=block, kv_capacity_tokens=capacity_tokens,
                       max_running_requests=64, max_prefill_tokens=4096, chunked_prefill_size=2048, spec=spec)
    return EngineCore(config, ConstantTimer(ttft_s=0.02, itl_s=0.01))


def _step(core: EngineCore, now: float) -> tuple[float, list[SimRequest]]:
    """One step; returns its end and the requests it preempted or retracted, in the order the engine did."""
    victims: list[SimRequest] = []
    preempt = core._preempt

    def watched(r: SimRequest, **kwargs: bool) -> None:
        victims.append(r)
        preempt(r, **kwargs)

    core._preempt = watched  # type: ignore[method-assign]
    try:
        end = core.begin_step(now)
    finally:
        del core._preempt
    assert end is not None
    core.end_step()
    return end, victims


def _retracted_total(core: EngineCore) -> float:
    collector = CoreCollector(core, model_name="m", style="sglang")
    values = [s.value for fam in collector.collect() for s in fam.samples
              if s.name == "sglang:num_retracted_requests_total"]
    assert len(values) == 1
    return values[0]


def _run_out(core: EngineCore, now: float) -> None:
    while core.has_work():
        now, _ = _step(core, now)


def _two_waves(style: Style) -> tuple[EngineCore, list[SimRequest], float]:
    """Twelve requests at block size 1: six one-token prompts decode from step 1, six more (prompts of 1 and 2
    tokens) from step 2. Returns the core before step 3, the requests and the time."""
    core = _core(style, 64, block=1)
    first = [core.new_request(1, NO_HASHES, 20) for _ in range(6)]
    now, _ = _step(core, 0.0)
    second = [core.new_request(1 + i % 2, NO_HASHES, 20) for i in range(6)]
    now, _ = _step(core, now)
    reqs = first + second
    assert [r.generated for r in reqs] == [2] * 6 + [1] * 6 and all(r.prefilled for r in reqs)
    return core, reqs, now


def _pool_runs_dry(style: Style) -> tuple[EngineCore, list[SimRequest]]:
    """:func:`_two_waves`, then every free block taken outside the batch, so each of the twelve decodes of step 3
    lacks its block; then the blocks given back and the run to its end. Returns the core and the victims of step 3
    in the engine's order."""
    core, reqs, now = _two_waves(style)
    held = core.pool.allocate_array(core.pool.available())
    assert held is not None and core.pool.available() == 0
    now, victims = _step(core, now)
    core.pool.release(held)
    _run_out(core, now)
    assert [r.generated for r in reqs] == [20] * 12  # victims recompute and still complete exactly
    return core, victims


def test_sglang_retracts_the_fewest_outputs_first_and_the_longer_prompt_on_ties_until_the_rest_fit() -> None:
    core, victims = _pool_runs_dry("sglang")
    # the second wave has generated fewer tokens: its 2-token prompts go first (the later in the batch first among
    # equals), then its 1-token ones, until the freed blocks cover the remaining decodes (5 freed 8 >= 7 needed)
    assert [r.rid for r in victims] == [11, 9, 7, 10, 8]
    assert _retracted_total(core) == core.counters.preemptions >= 5


def test_vllm_preempts_the_most_recently_admitted_while_it_schedules() -> None:
    _, victims = _pool_runs_dry("vllm")
    # each decode that lacks a block preempts the last of the running list (vLLM V1's `self.running.pop()`)
    assert [r.rid for r in victims] == [11, 10, 9, 8, 7]


def test_retracted_requests_join_the_tail_of_the_waiting_queue_and_preempted_ones_its_head() -> None:
    orders: dict[Style, list[int]] = {"sglang": [11, 9, 7, 10, 8], "vllm": [7, 8, 9, 10, 11]}
    for style, order in orders.items():
        core, _, now = _two_waves(style)
        queued = core.new_request(3, NO_HASHES, 5)  # arrives before step 3, which admits nobody (it preempts)
        assert core.pool.allocate_array(core.pool.available()) is not None
        core.begin_step(now)
        waiting = [r.rid for r in core.waiting]
        assert waiting == ([queued.rid, *order] if style == "sglang" else [*order, queued.rid]), style
        core.end_step()


def test_a_request_admitted_first_but_still_prefilling_is_sglangs_victim_and_not_vllms() -> None:
    """A long prompt admitted first finishes its chunked prefill a step after a short one admitted with it, so it has
    generated fewer tokens: SGLang retracts it (and its prompt stays cached for its return); vLLM preempts the short
    one, the most recently admitted."""
    got = {}
    styles: tuple[Style, ...] = ("sglang", "vllm")
    for style in styles:
        core = _core(style, 136 * 16, block=16)
        long = core.new_request(2100, np.arange(1000, 1131, dtype=np.uint64), 60)
        short = core.new_request(20, np.array([7], np.uint64), 60)
        now, first = 0.0, None
        while core.has_work():
            outputs = (long.generated, short.generated)
            now, victims = _step(core, now)
            if victims and first is None:
                first = victims
                assert outputs[0] < outputs[1]  # the long prompt started decoding a step later
        assert first is not None, style
        got[style] = [r.rid for r in first]
        assert long.generated == short.generated == 60
        if style == "sglang":
            # its prompt's blocks stayed cached: its returns recompute less than one prompt in all
            assert long.preemptions and core.counters.computed_prompt_tokens - 2120 < 2100
            assert _retracted_total(core) == core.counters.preemptions
    assert got == {"sglang": [0], "vllm": [1]}


def test_with_speculative_decoding_sglang_retracts_from_the_end_of_the_batch() -> None:
    """SGLang's spec path keeps the batch order (its filter can only cut from the back): the most recently admitted
    decode goes first, as in vLLM, though before the step and until the rest fit."""
    core = _core("sglang", 64, block=1, spec=SpecDecodeConfig(k=1, acceptance_length=1.0))
    first = [core.new_request(1, NO_HASHES, 10) for _ in range(3)]
    now, _ = _step(core, 0.0)
    second = [core.new_request(p, NO_HASHES, 10) for p in (4, 1, 1)]
    now, _ = _step(core, now)
    assert [r.generated for r in first + second] == [2] * 3 + [1] * 3
    held = core.pool.allocate_array(core.pool.available())
    assert held is not None
    now, victims = _step(core, now)
    # (the length key would take the 4-token prompt first, then one more: [3, 5])
    assert [r.rid for r in victims] == [5, 4, 3]
    core.pool.release(held)
    _run_out(core, now)
    assert all(r.generated == 10 for r in first + second)
