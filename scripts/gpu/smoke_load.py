#!/usr/bin/env python3
"""GPU-side smoke load for a freshly started engine: warm up every concurrency level, then measure each once.

Not llmsweep's benchmark client (that is `llmsweep bench`): a dependency-light check, aiohttp only, that the server
streams, honours `ignore_eos` (every request must yield exactly max_tokens) and how fast it is, so a device call
proves the whole path before a sweep spends GPU time. Prints one JSON line per level and writes them to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import time

import aiohttp


def prompt(words: int, rnd: random.Random) -> str:
    vocab = ["model", "token", "server", "request", "answer", "question", "value", "result", "time", "data"]
    return " ".join(rnd.choice(vocab) for _ in range(words))


async def one(session: aiohttp.ClientSession, url: str, body: dict) -> dict:
    t0 = time.perf_counter()
    stamps: list[float] = []
    usage: dict = {}
    async with session.post(url, json=body) as resp:
        if resp.status != 200:
            return {"error": f"HTTP {resp.status}: {(await resp.text())[:200]}"}
        async for raw in resp.content:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                stamps.append(time.perf_counter())
    if not stamps:
        return {"error": "no text streamed"}
    itl = [b - a for a, b in itertools.pairwise(stamps)]
    return {"ttft": stamps[0] - t0, "itl": itl, "e2e": stamps[-1] - t0,
            "completion_tokens": usage.get("completion_tokens", 0)}


async def level(base: str, model: str, conc: int, n: int, max_tokens: int, words: int, seed: int) -> dict:
    rnd = random.Random(seed)
    url = f"{base}/v1/completions"
    timeout = aiohttp.ClientTimeout(total=1800)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        sem = asyncio.Semaphore(conc)

        async def limited() -> dict:
            async with sem:
                body = {"model": model, "prompt": prompt(words, rnd), "max_tokens": max_tokens, "ignore_eos": True,
                        "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.0}
                return await one(session, url, body)

        t0 = time.perf_counter()
        results = await asyncio.gather(*(limited() for _ in range(n)))
        wall = time.perf_counter() - t0
    ok = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r]
    itl = [x for r in ok for x in r["itl"]]
    out_tokens = sum(r["completion_tokens"] for r in ok)
    return {
        "concurrency": conc, "requests": n, "ok": len(ok), "errors": errors[:3],
        "short": sum(1 for r in ok if r["completion_tokens"] != max_tokens),
        "ttft_ms_mean": 1e3 * statistics.fmean(r["ttft"] for r in ok) if ok else None,
        "itl_ms_mean": 1e3 * statistics.fmean(itl) if itl else None,
        "output_tok_s": out_tokens / wall if wall else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--requests-per-level", type=int, default=4, help="requests = this × concurrency")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-words", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    rows = []
    for c in levels:  # warm-up: first use of a batch size triggers JIT and graph capture
        asyncio.run(level(args.base_url, args.model, c, c, 8, args.prompt_words, seed=c))
    for c in levels:
        row = asyncio.run(level(args.base_url, args.model, c, c * args.requests_per_level, args.max_tokens,
                                args.prompt_words, seed=1000 + c))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r for r in rows if r["errors"] or r["short"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
