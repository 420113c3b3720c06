"""How long the virtual-time predictor takes for a one-hour AgentX-like replay at concurrency 16 (target < 10 s).

Run: `.venv/bin/python bench/predict_speed.py [--workload agentx|toy] [--duration 3600] [--concurrency 16]
[--profile]`. Prints the wall and CPU time of the prediction (lane programs, prompt text and the engine together),
the request and step counts, and the predicted throughput and prefix-cache hit rate.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from llmsweep.sim.config import SpecDecodeConfig
from llmsweep.sim.core import EngineCore
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.predict import Predictor
from llmsweep.sim.synthetic import AgentWorkload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--model", default="qwen3.5-397b-a17b")
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--precision", default="fp8")
    ap.add_argument("--no-spec", action="store_true")
    ap.add_argument("--dram-gb", type=float, default=0.0)
    ap.add_argument("--workload", choices=["agentx", "toy"], default="agentx",
                    help="agentx: the real AgenticWorkload on the synthetic AgentX corpus; toy: sim.synthetic")
    ap.add_argument("--max-isl", type=int, default=1_000_000, help="agentx: corpus scale (largest prompt)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    spec = None if args.no_spec else SpecDecodeConfig(method="mtp", k=3, acceptance_length=3.39)
    config = EngineConfig(model=args.model, hardware=args.hardware, tp=args.tp, ep=args.tp, precision=args.precision,
                          spec=spec, dram_gb=args.dram_gb)
    core: EngineCore = build_core(config)
    if args.workload == "agentx":
        from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
        from llmsweep.workload.traces.synth import SynthProfile

        t_build = time.perf_counter()
        workload = AgenticWorkload(AgenticConfig(synthetic=SynthProfile(traces=64, max_isl=args.max_isl),
                                                 concurrency=args.concurrency, run_id="bench"))
        print(f"corpus built in {time.perf_counter() - t_build:.2f} s (not counted below)")
    else:
        workload = AgentWorkload(system_tokens=20000, turns=60, tool_tokens=1500, osl=600, think_s=3.0)
    predictor = Predictor(core)
    profiler = cProfile.Profile() if args.profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    records = predictor.run(workload, concurrency=args.concurrency, duration=args.duration)
    if profiler:
        profiler.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    c = core.counters
    ok = [r for r in records if r["status"] == 200]
    out = sum(r["completion_tokens"] for r in ok)
    isl = sum(r["prompt_tokens"] for r in ok) / max(len(ok), 1)
    hit = (c.device_hit_tokens + c.host_hit_tokens) / max(c.prefix_query_tokens, 1)
    print(f"model={args.model} hw={args.hardware} tp={args.tp} conc={args.concurrency} duration={args.duration:.0f}s")
    print(f"predicted in {wall:.2f} s wall, {cpu:.2f} s CPU (one core): {len(records)} requests, {c.steps} steps, "
          f"{predictor.stats.virtual_seconds:.0f} virtual s, {cpu / max(c.steps, 1) * 1e6:.1f} us CPU/step")
    print(f"mean ISL {isl:,.0f} tokens, output {out / predictor.stats.virtual_seconds:,.0f} tok/s, "
          f"prefix hit {hit:.3f}, preemptions {c.preemptions}, KV pool {core.capacity_tokens:,} tokens")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
