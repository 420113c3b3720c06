"""The predictor and the live server are one engine: the project's client driving `sim serve` over loopback sees the
same token accounting (prompt, completion, cached) as the virtual-time predictor for the same workload."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from llmsweep.client.config import Endpoint, RunOptions
from llmsweep.client.runner import run_benchmark_async
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.predict import predict
from llmsweep.sim.server import SimServer, start_server
from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.base import Workload
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload
from llmsweep.workload.traces.synth import SynthProfile

CONFIG = EngineConfig(model="llama-1b", hardware="h200", timing="constant", ttft_s=0.003, itl_s=0.0005)


def _live(workload: Workload, tmp: Path, **options: Any) -> list[dict[str, Any]]:
    async def main() -> None:
        server = SimServer(CONFIG, served_model_name="sim")
        runner, port = await start_server(server, "127.0.0.1", 0)
        try:
            await run_benchmark_async(workload, Endpoint(base_url=f"http://127.0.0.1:{port}", model="sim"),
                                      RunOptions(**options), tmp)
        finally:
            await runner.cleanup()

    asyncio.run(main())
    return [json.loads(line) for line in (tmp / "records.jsonl").read_text().splitlines()]


def _accounting(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    key = ("session", "node", "turn", "request_index", "prompt_tokens", "completion_tokens", "cached_tokens")
    return sorted(tuple(r[k] for k in key) for r in records)


def test_fixed_length_chat_accounting_matches(tmp_path: Path) -> None:
    def workload() -> FixedLengthWorkload:
        return FixedLengthWorkload(FixedLengthConfig(isl=300, osl=12, api="chat", num_prompts=8, range_ratio=0.5))

    live = _live(workload(), tmp_path, concurrency=1, num_requests=8)
    predicted = predict(workload(), CONFIG, concurrency=1, duration=3600)
    assert len(live) == len(predicted) == 8
    assert all(r["error_class"] is None for r in live)
    assert _accounting(live) == _accounting(predicted)


def test_a_fixed_length_warm_up_is_a_phase_of_its_own_in_both(tmp_path: Path) -> None:
    """The live client runs a fixed-length point's warm-up alone and opens the window when it has ended; virtual time
    does the same (`Predictor.run(warmup_requests=...)`)."""
    def workload() -> FixedLengthWorkload:
        return FixedLengthWorkload(FixedLengthConfig(isl=300, osl=12, num_prompts=12, num_warmups=8, range_ratio=0.5))

    live = _live(workload(), tmp_path, concurrency=4, num_requests=12, warmup_requests=8)
    predicted = predict(workload(), CONFIG, concurrency=4, duration=3600, warmup_requests=8)
    for records in (live, predicted):
        assert sum(r["phase"] == "warmup" for r in records) == 8
        warm_end = max(r["end_at"] for r in records if r["phase"] == "warmup")
        assert min(r["sent_at"] for r in records if r["phase"] == "profiling") >= warm_end
    assert _accounting(live) == _accounting(predicted)


def test_agentic_replay_cache_hits_match(tmp_path: Path) -> None:
    # think times and answers capped: fast in wall time. Uncapped, the answers keep AgentX's length (70k tokens over
    # these 25 requests, ~40 s of streaming); the prompt and cache accounting compared here does not depend on it.
    def workload() -> AgenticWorkload:
        return AgenticWorkload(AgenticConfig(synthetic=SynthProfile(traces=2, max_isl=6000, main_turns_median=6,
                                                                      max_main_turns=8, max_osl=64),
                                             concurrency=1, run_id="same", warmup_requests_per_lane=1,
                                             trace_idle_gap_cap_s=0.01, system_idle_gap_cap_s=0.01))

    live = _live(workload(), tmp_path, concurrency=1, num_requests=25)
    live_ok = [r for r in live if r["error_class"] is None]
    # Which 25 requests the live run measures depends on the race between concurrent siblings (subagents) at the
    # 25th: the prediction runs further (40), so whichever 25 went out live are among its requests.
    predicted = predict(workload(), CONFIG, concurrency=1, duration=3600, max_requests=40)
    assert len([r for r in predicted if r["phase"] == "profiling"]) == 40
    # request_index follows dispatch order, which differs between concurrent siblings; the turn identifies a request
    by_key = {(r["session"], r["node"], r["turn"], r["phase"]): r for r in predicted}
    matched = [(r, by_key[k]) for r in live_ok if (k := (r["session"], r["node"], r["turn"], r["phase"])) in by_key]
    assert len(matched) == len(live_ok) >= 20
    assert sum(r["cached_tokens"] for r, _ in matched) > 0
    for r, p in matched:
        assert (r["prompt_tokens"], r["cached_tokens"]) == (p["prompt_tokens"], p["cached_tokens"])
