"""How fast and how lean is `summarise` on a big run? Generates N synthetic records (default 1 M, spread over an
hour, with per-chunk times) and summarises them in a fresh process, printing wall time and peak memory.

    .venv/bin/python bench/summarize_scale.py [--records 1000000] [--osl 64] [--keep DIR]

Goal: 1 M records in <= 30 s and <= 2 GB. For contrast (research/peer-baselines.md): InferenceX's aggregator took
714 s and 13.9 GB on 1 M records *without* per-chunk lists and ran out of memory with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def generate(path: Path, n: int, osl: int, seed: int = 0) -> None:
    """Write n records like a 3,600 s closed-loop run would (5 % errors, 1 % warmup)."""
    rng = np.random.default_rng(seed)
    sent = np.sort(rng.uniform(0, 3600, n)) + 1.8e9
    ttft = rng.gamma(2.0, 0.05, n)
    itl = rng.gamma(4.0, 0.004, n)
    err = rng.random(n) < 0.05
    warm = rng.random(n) < 0.01
    steps = np.arange(osl)
    with path.open("w") as fh:
        for i in range(n):
            s = float(sent[i])
            chunks = (s + ttft[i] + steps * itl[i]).round(6).tolist()
            e = bool(err[i])
            rec = {
                "id": f"w0-{i}", "trace": "", "lane": i % 256, "turn": 0,
                "phase": "warmup" if warm[i] else "profiling", "session": str(i), "node": "", "request_index": i,
                "api": "completions", "scheduled_at": s - 0.0001, "sent_at": s, "first_byte_at": s + 0.001,
                "first_token_at": None if e else chunks[0], "end_at": chunks[-1] + 0.0005,
                "chunk_times": [] if e else chunks, "chunk_tokens": [] if e else [1] * osl,
                "status": 500 if e else 200, "error_class": "http" if e else None, "error": "HTTP 500" if e else None,
                "prompt_tokens": None if e else 1024, "completion_tokens": None if e else osl,
                "cached_tokens": None if e else 512, "input_tokens_expected": 1024,
                "theoretical_cached_tokens": 512, "max_tokens": osl, "worker": 0,
            }
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")


CHILD = """
import resource, sys, time, json
t = time.perf_counter()
from llmsweep.metrics import summarise
s = summarise(sys.argv[1], gpus=8)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"wall_s": wall, "peak_mb": peak, "child_peak_mb": children, "successful": s["requests"]["successful"],
                  "itl_count": s["latency"]["itl"]["count"], "qps_samples": s["qps"]["samples"]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--osl", type=int, default=64, help="content chunks per record")
    ap.add_argument("--keep", type=Path, default=None, help="write the records here instead of a temp dir")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = (args.keep or Path(tmp)) / "records.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        generate(path, args.records, args.osl)
        gen_s = time.perf_counter() - t
        size_mb = path.stat().st_size / 2**20
        # baseline in the same run: just reading and json-parsing every line (the floor for any summariser)
        t = time.perf_counter()
        with path.open("rb") as fh:
            for line in fh:
                json.loads(line)
        parse_s = time.perf_counter() - t
        out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
        res = json.loads(out.stdout)
    print(f"records: {args.records:,} x {args.osl} chunks, file {size_mb:,.0f} MB (generated in {gen_s:.1f} s)")
    print(f"summarise: {res['wall_s']:.1f} s wall, peak RSS {res['peak_mb']:,.0f} MB in the summarising process, "
          f"{res['child_peak_mb']:,.0f} MB in the largest parsing child; upper bound of the whole: "
          f"{res['peak_mb'] + res['child_peak_mb'] * min(os.cpu_count() or 1, 8):,.0f} MB (goal <= 30 s, <= 2048 MB)")
    print(f"baseline json parse of every line: {parse_s:.1f} s -> summarise / parse = {res['wall_s'] / parse_s:.2f}x")
    print(f"successful {res['successful']:,}, ITL gaps {res['itl_count']:,}, QPS windows {res['qps_samples']:,}")


if __name__ == "__main__":
    main()
