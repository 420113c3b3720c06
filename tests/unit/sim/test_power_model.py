"""The simulator's power model: idle watts when idle, more when busy, an energy counter that integrates the power,
and tokens per joule that rise with concurrency (throughput grows faster than the draw)."""

from __future__ import annotations

import pytest

from llmsweep.catalog.power import find_power
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.power import PowerModel


def _run(concurrency: int, seconds: float = 4.0) -> tuple[float, float, int]:
    """(average W per GPU, energy J, generated tokens) of `concurrency` long decodes on one H200 for `seconds`."""
    core = build_core(EngineConfig(model="llama-3.1-8b", hardware="h200", tp=1))
    model = PowerModel(core, hardware="h200", tp=1, clock=lambda: core.now)
    for i in range(concurrency):
        core.new_request(512, [i * 1000 + k for k in range(8)], 100_000, now=0.0)
    readings = []
    next_read = 0.25
    while core.now < seconds:
        end = core.begin_step(core.now)
        assert end is not None
        core.end_step()
        if core.now >= next_read:
            doc = model.read()
            readings.append(doc["gpus"][0]["power_usage_mw"] / 1000)
            next_read += 0.25
    return sum(readings) / len(readings), model.energy_j, core.counters.generation_tokens


def test_an_idle_engine_draws_idle_watts() -> None:
    core = build_core(EngineConfig(model="llama-3.1-8b", hardware="h200"))
    t = [0.0]
    model = PowerModel(core, hardware="h200", tp=2, clock=lambda: t[0])
    t[0] = 1.0
    doc = model.read()
    idle = find_power("h200").idle_w  # type: ignore[union-attr]
    assert doc["source"] == "simulated" and len(doc["gpus"]) == 2
    assert doc["gpus"][0]["power_usage_mw"] == pytest.approx(idle * 1000)
    assert doc["gpus"][0]["total_energy_consumption_mj"] == pytest.approx(idle * 1000)  # 1 s at idle, in mJ
    assert doc["gpus"][0]["utilization_gpu"] == 0


def test_busy_power_sits_between_idle_and_max_and_tokens_per_joule_rise_with_concurrency() -> None:
    spec = find_power("h200")
    assert spec is not None
    watts_1, energy_1, tokens_1 = _run(1)
    watts_32, energy_32, tokens_32 = _run(32)
    assert spec.idle_w < watts_1 < watts_32 <= spec.max_w
    assert tokens_32 / energy_32 > 3 * tokens_1 / energy_1
