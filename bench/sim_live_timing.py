"""How faithfully the live simulated engine keeps its own clock: configured vs client-observed TTFT and ITL.

Run: `.venv/bin/python bench/sim_live_timing.py [--itl-ms 2] [--ttft-ms 20] [--conc 1 8 32]`. Starts `SimServer` in
constant-timing mode on loopback, streams requests with aiohttp, and prints observed TTFT/ITL percentiles and the
server process's CPU use (a busy-waiting server would show ~100 %).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp
import numpy as np

from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.server import SimServer, start_server


async def one(http: aiohttp.ClientSession, url: str, tokens: int) -> tuple[float, list[float]]:
    body = {"model": "sim", "messages": [{"role": "user", "content": "hello " * 100}], "max_tokens": tokens,
            "stream": True}
    t0 = time.perf_counter()
    stamps = []
    async with http.post(url, json=body) as resp:
        async for line in resp.content:
            if line.startswith(b"data: {"):
                n = len(json.loads(line[6:])["choices"][0]["delta"]["content"].split())
                stamps += [time.perf_counter()] * max(n, 1)
    return stamps[0] - t0, list(np.diff(stamps[::1]))


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--itl-ms", type=float, default=2.0)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--conc", type=int, nargs="+", default=[1, 8, 32])
    args = ap.parse_args()
    config = EngineConfig(model="llama-1b", timing="constant", ttft_s=args.ttft_ms / 1e3, itl_s=args.itl_ms / 1e3)
    server = SimServer(config, served_model_name="sim")
    runner, port = await start_server(server, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        async with aiohttp.ClientSession() as http:
            for conc in args.conc:
                c0, w0 = time.process_time(), time.perf_counter()
                results = await asyncio.gather(*(one(http, url, args.tokens) for _ in range(conc)))
                cpu = (time.process_time() - c0) / (time.perf_counter() - w0)
                ttft = np.array([r[0] for r in results]) * 1e3
                itl = np.array([x for r in results for x in r[1] if x > 0]) * 1e3
                print(f"conc {conc:>3}: TTFT mean {ttft.mean():6.2f} ms (configured {args.ttft_ms:.1f} + queueing) | "
                      f"ITL mean {itl.mean():.3f} p50 {np.percentile(itl, 50):.3f} p99 {np.percentile(itl, 99):.3f} "
                      f"ms (configured {args.itl_ms:.3f}) | server+client CPU {100 * cpu:.0f}%")
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
