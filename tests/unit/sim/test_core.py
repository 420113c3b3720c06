"""The engine core's scheduling, KV and spec-decode behaviour, through the virtual-time predictor (fast, no HTTP)."""

from __future__ import annotations

from itertools import pairwise

from llmsweep.sim.config import SimConfig, SpecDecodeConfig
from llmsweep.sim.core import EngineCore
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.perf import ConstantTimer
from llmsweep.sim.predict import Predictor
from llmsweep.sim.synthetic import AgentWorkload, ChatWorkload


def _throughput(records: list[dict], duration: float) -> float:
    """Steady-state output tokens per second: tokens streamed in the last two thirds of the run."""
    start = duration / 3
    chunks = ((t, n) for r in records for t, n in zip(r["chunk_times"], r["chunk_tokens"], strict=True))
    return sum(n for t, n in chunks if start <= t <= duration) / (duration - start)


def _mean_e2e(records: list[dict]) -> float:
    done = [r["end_at"] - r["sent_at"] for r in records if r["status"] == 200]
    return sum(done) / len(done)


def _sweep(config: EngineConfig, grid: list[int], duration: float = 180.0) -> list[tuple[float, float]]:
    out = []
    for conc in grid:
        records = Predictor(build_core(config)).run(ChatWorkload(isl=2000, osl=200), concurrency=conc,
                                                    duration=duration)
        out.append((_throughput(records, duration), _mean_e2e(records)))
    return out


def _knee(throughputs: list[float], grid: list[int]) -> int:
    """Smallest concurrency reaching 90% of the best throughput of the sweep."""
    best = max(throughputs)
    return next(c for c, t in zip(grid, throughputs, strict=True) if t >= 0.9 * best)


GRID = [1, 4, 16, 64, 128, 256]


def test_throughput_and_latency_rise_with_concurrency_and_halving_hbm_moves_the_knee_down() -> None:
    full = EngineConfig(model="llama-3.1-8b", hardware="h100", max_running_requests=256)
    half = full.model_copy(update={"perf_overrides": {"hbm_bytes": 40e9}})
    sweep_full, sweep_half = _sweep(full, GRID), _sweep(half, GRID)
    for sweep in (sweep_full, sweep_half):
        tput = [t for t, _ in sweep]
        lat = [e for _, e in sweep]
        knee = GRID.index(_knee(tput, GRID))
        assert all(b > a for a, b in pairwise(tput[:knee + 1])), tput  # rises up to the knee
        assert all(t >= 0.9 * max(tput) for t in tput[knee:]), tput  # then flattens (no collapse)
        assert knee < len(GRID) - 1, "no knee: throughput still scales at the top of the grid"
        assert all(b >= a for a, b in pairwise(lat)), lat  # latency only grows with load
    knee_full = _knee([t for t, _ in sweep_full], GRID)
    knee_half = _knee([t for t, _ in sweep_half], GRID)
    assert knee_half < knee_full, (knee_half, knee_full)
    # the smaller KV pool caps the batch: lower ceiling, and queueing shows up as latency at high concurrency
    assert max(t for t, _ in sweep_half) < 0.9 * max(t for t, _ in sweep_full)
    assert sweep_half[-1][1] > sweep_full[-1][1]


def _small_core(capacity_tokens: int, *, host_tokens: int = 0, block: int = 16, max_running: int = 64,
                spec: SpecDecodeConfig | None = None) -> EngineCore:
    config = SimConfig(block_size=block, kv_capacity_tokens=capacity_tokens, host_capacity_tokens=host_tokens,
                       max_running_requests=max_running, max_prefill_tokens=4096, chunked_prefill_size=2048,
                       spec=spec)
    return EngineCore(config, ConstantTimer(ttft_s=0.02, itl_s=0.01))


def test_kv_capacity_is_never_exceeded_and_oversubscription_preempts() -> None:
    core = _small_core(1024)
    for _ in range(8):
        core.new_request(100, [], 400)
    now, peak = 0.0, 0
    finished = []
    while core.has_work():
        end = core.begin_step(now)
        assert end is not None
        peak = max(peak, core.pool.used_blocks())
        assert core.pool.used_blocks() <= core.num_blocks
        finished += [r for r in core.end_step() if r.finished_at is not None]
        now = end
    assert core.counters.preemptions > 0
    assert peak == core.num_blocks  # the pool was the binding constraint
    assert sorted(r.generated for r in finished) == [400] * 8  # preempted requests still complete exactly


def test_ample_kv_never_preempts() -> None:
    core = _small_core(100_000)
    for _ in range(8):
        core.new_request(100, [], 400)
    now = 0.0
    while core.has_work():
        now = core.begin_step(now) or now
        core.end_step()
    assert core.counters.preemptions == 0


def test_a_request_larger_than_the_pool_is_rejected_with_a_context_error() -> None:
    core = _small_core(256)
    req = core.new_request(300, [], 10)
    assert req.error is not None and "maximum context length" in req.error
    assert not core.has_work()


def _agentic(core: EngineCore, concurrency: int, duration: float = 300.0) -> tuple[float, float]:
    records = Predictor(core).run(AgentWorkload(system_tokens=800, turns=8, tool_tokens=300, osl=60, think_s=1.0,
                                                subagent_every=3), concurrency=concurrency, duration=duration)
    ok = [r for r in records if r["status"] == 200]
    theoretical = sum(r["theoretical_cached_tokens"] for r in ok) / sum(r["input_tokens_expected"] for r in ok)
    observed = sum(r["cached_tokens"] for r in ok) / sum(r["prompt_tokens"] for r in ok)
    return observed, theoretical


def test_prefix_hit_ratio_tracks_the_theoretical_ceiling_when_capacity_is_ample_and_falls_when_not() -> None:
    observed, theoretical = _agentic(_small_core(2_000_000), concurrency=8)
    assert theoretical > 0.5
    assert 0.85 * theoretical <= observed <= theoretical + 1e-9
    starved, _ = _agentic(_small_core(12_000), concurrency=8)
    assert starved < observed - 0.15


def test_a_cpu_tier_raises_the_hit_ratio_under_kv_pressure() -> None:
    gpu_only, _ = _agentic(_small_core(12_000), concurrency=12)
    core = _small_core(12_000, host_tokens=1_000_000)
    with_host, _ = _agentic(core, concurrency=12)
    assert with_host > gpu_only + 0.1
    assert core.counters.host_hit_tokens > 0


def test_speculative_decoding_speeds_up_decode_by_about_the_acceptance_length() -> None:
    def decode_speed(spec: SpecDecodeConfig | None) -> float:
        config = EngineConfig(model="llama-3.1-8b", hardware="h200", spec=spec)
        records = Predictor(build_core(config)).run(ChatWorkload(isl=1000, osl=600, requests=4), concurrency=1,
                                                    duration=1000)
        speeds = [(r["completion_tokens"] - 1) / (r["end_at"] - r["first_token_at"]) for r in records]
        return sum(speeds) / len(speeds)

    al = 3.39
    ratio = decode_speed(SpecDecodeConfig(method="mtp", k=3, acceptance_length=al)) / decode_speed(None)
    assert 0.75 * al <= ratio <= 1.02 * al, ratio


def test_spec_counters_realise_the_configured_acceptance_length() -> None:
    for al in (1.6, 2.5, 3.39):
        core = _small_core(1_000_000, spec=SpecDecodeConfig(k=3, acceptance_length=al))
        for _ in range(16):
            core.new_request(64, [], 2000)
        now = 0.0
        while core.has_work():
            now = core.begin_step(now) or now
            for r in core.end_step():
                assert 1 <= r.last_emitted <= 4
        c = core.counters
        realised = 1 + c.spec_accepted_tokens / c.spec_verify_steps
        assert abs(realised - al) < 0.03 * al, (al, realised)
        assert c.spec_draft_tokens == 3 * c.spec_verify_steps


def test_same_seed_same_prediction_and_different_seed_differs_only_with_randomness() -> None:
    spec = SpecDecodeConfig(k=3, acceptance_length=2.5)

    def run(seed: int) -> list[dict]:
        config = EngineConfig(model="llama-1b", hardware="h200", spec=spec, seed=seed)
        return Predictor(build_core(config)).run(AgentWorkload(system_tokens=500, turns=4, tool_tokens=200, osl=50),
                                                 concurrency=4, duration=60)

    a, b, c = run(1), run(1), run(2)
    assert a == b
    assert a != c


def test_a_request_beyond_the_context_length_is_refused_as_an_engine_refuses_it() -> None:
    """prompt + max_tokens above the served context is a context overflow, whatever room the KV pool has."""
    config = SimConfig(block_size=16, kv_capacity_tokens=100_000, context_length=1000)
    core = EngineCore(config, ConstantTimer(ttft_s=0.02, itl_s=0.01))
    assert core.new_request(900, [], 100).error is None  # exactly the context fits
    req = core.new_request(900, [], 101)
    assert req.error is not None
    assert "maximum context length is 1000 tokens" in req.error and "(900 in the messages, 101 in the completion)" \
        in req.error
    assert core.counters.requests_rejected == 1 and len(core.waiting) == 1
