"""ATOM's step shape (`SimConfig.scheduler="prefill-first"`), against the unified shape of vLLM V1 and SGLang.

ATOM (ROCm/ATOM `atom/model_engine/scheduler.py` `Scheduler._schedule`) returns a prefill-only batch whenever it can
schedule a prefill — an unfinished chunked prompt first, then waiting requests FCFS — and runs decodes only in steps
where nothing can be prefilled; a new request takes KV blocks for its whole remaining prompt when admitted. The
simulator served every ATOM job in vLLM's unified shape, where a new prompt's chunk rides in the same step as the
running decodes: its ATOM predictions had decodes that never stall for a prefill.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.simcore import BS, core
from support.simcore import hashes as _hashes

from llmsweep.sim.core import EngineCore


def _core(scheduler: str, **kw: Any) -> EngineCore:
    return core(scheduler=scheduler, **kw)


def _step(core: EngineCore, now: float) -> tuple[float, list[int]]:
    end = core.begin_step(now)
    assert end is not None
    return end, [r.rid for r in core.end_step()]


@pytest.mark.parametrize("scheduler", ["unified", "prefill-first"])
def test_a_new_prompt_stalls_the_running_decodes_only_prefill_first(scheduler: str) -> None:
    core = _core(scheduler)
    a = core.new_request(640, _hashes(640, 1), 50)
    now, emitted = _step(core, 0.0)  # a's prefill: its first token
    assert emitted == [a.rid]
    now, emitted = _step(core, now)  # a decodes
    assert emitted == [a.rid]
    b = core.new_request(640, _hashes(640, 2), 50, now=now)
    now, emitted = _step(core, now)
    if scheduler == "prefill-first":
        assert emitted == [b.rid], "the step that prefills b holds no decode"
        assert a.generated == 2
    else:
        assert sorted(emitted) == [a.rid, b.rid], "b's prompt rides in the step with a's decode"
        assert a.generated == 3
    now, emitted = _step(core, now)  # nothing left to prefill: both decode
    assert sorted(emitted) == [a.rid, b.rid]


@pytest.mark.parametrize(("scheduler", "blocks_after_first_chunk"),
                         [("unified", 1024 // BS), ("prefill-first", 5000 // BS + 1)])
def test_prefill_first_takes_the_whole_prompt_s_kv_at_admission(scheduler: str, blocks_after_first_chunk: int) -> None:
    core = _core(scheduler, chunked_prefill_size=1024, max_prefill_tokens=1024)
    r = core.new_request(5000, _hashes(5000, 3), 10)
    core.begin_step(0.0)
    assert r.chunk == 1024
    assert len(r.blocks) == blocks_after_first_chunk
    core.end_step()


def test_prefill_first_runs_decodes_when_the_waiting_head_cannot_be_admitted() -> None:
    """No skip past a head that does not fit: with every running slot taken, the waiting request waits and the
    running ones decode."""
    core = _core("prefill-first", max_running_requests=2)
    a, b = (core.new_request(128, _hashes(128, i), 5) for i in (4, 5))
    now, emitted = _step(core, 0.0)  # both prefill in one prefill-only step
    assert sorted(emitted) == [a.rid, b.rid]
    c = core.new_request(128, _hashes(128, 6), 5, now=now)
    now, emitted = _step(core, now)
    assert sorted(emitted) == [a.rid, b.rid] and c.chunk == 0 and c.cached_tokens == -1
    while not a.done:
        now, emitted = _step(core, now)
    now, emitted = _step(core, now)  # a and b finished: c is admitted, alone in its prefill step
    assert emitted == [c.rid]


def test_an_unfinished_chunked_prompt_is_prefilled_before_a_waiting_one() -> None:
    core = _core("prefill-first", chunked_prefill_size=1024, max_prefill_tokens=1024)
    long = core.new_request(3000, _hashes(3000, 7), 5)
    now, _ = _step(core, 0.0)
    short = core.new_request(128, _hashes(128, 8), 5, now=now)
    now, _ = _step(core, now)
    assert long.computed == 2048 and short.cached_tokens == -1  # the budget went to the unfinished prompt


def test_a_step_that_retracted_admits_nobody_prefill_first_too() -> None:
    """SGLang-style retraction before a step (only by hand: `sim serve --engine-style sglang --scheduler
    prefill-first`) admits no waiting request in that step, as the unified shape does not: a retracted request is
    not taken straight back in."""
    engine = core(engine_style="sglang", kv=40 * BS, scheduler="prefill-first")
    for i in range(8):
        engine.new_request(128, _hashes(128, 100 + i), 400)
    now, retracting_steps = 0.0, 0
    while engine.has_work() and now < 60:
        before = engine.counters.preemptions
        running = {r.rid for r in engine.running}
        end = engine.begin_step(now)
        if end is None:
            break
        if engine.counters.preemptions > before:
            retracting_steps += 1
            assert {r.rid for r in engine._scheduled} <= running, "a step that retracted admitted a request"
        engine.end_step()
        now = end
    assert retracting_steps > 0
