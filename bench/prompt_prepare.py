"""What building chat prompts in the event loop costs: the fixed-length chat workload at high concurrency, its
prompts built up front (`Workload.prepare`, the default) against built as each request is sent (the baseline, as
before `prepare` existed), on the same simulated server in the same run.

    .venv/bin/python bench/prompt_prepare.py [--concurrency 128] [--isl 1024] [--osl 64] [--prompts 256]
                                             [--tokenizer DIR] [--repeats 2]

A chat prompt's text is re-encoded until its length is exact (milliseconds with a Hugging Face tokenizer); done in
the event loop it delays the sends of the other lanes (schedule lag) and the time stamps of their chunks. The server
is `llmsweep sim serve --timing constant` (TTFT 20 ms, 5 ms per token) in its own process. Printed per mode: send lag
p50/p99, TTFT p50, TPOT p50, output tok/s and client CPU-s, then each as a ratio lazy/prepared.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from llmsweep.client import Endpoint, RunOptions, run_benchmark  # noqa: E402
from llmsweep.metrics.model import SIMULATED  # noqa: E402
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload  # noqa: E402


class LazyWorkload(FixedLengthWorkload):
    """The baseline: every prompt built when its request is sent."""

    def prepare(self) -> None:
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--model", "llama-3.1-8b", "--port", str(port),
         "--served-model-name", "m", "--timing", "constant", "--ttft-ms", "20", "--itl-ms", "5",
         "--max-running-requests", "1024"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the simulated server did not become ready")


def measure(cls: type[FixedLengthWorkload], args: argparse.Namespace, url: str, seed: int) -> dict[str, Any]:
    workload = cls(FixedLengthConfig(isl=args.isl, osl=args.osl, api="chat", num_prompts=args.prompts,
                                     num_warmups=args.concurrency, seed=seed, tokenizer=args.tokenizer))
    options = RunOptions(concurrency=args.concurrency, num_requests=args.prompts, warmup_requests=args.concurrency)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = run_benchmark(workload, Endpoint(base_url=url, model="m", api="chat"), options, Path(out),
                          source=SIMULATED).summary
        wall = time.perf_counter() - t0
    lag = s.client_health.schedule_lag_s
    return {"lag_p50_ms": lag.p50 * 1e3, "lag_p99_ms": lag.p99 * 1e3,
            "ttft_p50_ms": s.latency.ttft.p50 * 1e3, "tpot_p50_ms": s.latency.tpot.p50 * 1e3,
            "output_tps": s.throughput.output_tps, "client_cpu_s": s.client_health.cpu_s_total,
            "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--isl", type=int, default=1024)
    ap.add_argument("--osl", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--tokenizer", default=None, help="tokenizer directory (default: a synthesised llama-1b's)")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    label = args.tokenizer or "a synthesised llama-1b's"
    with contextlib.ExitStack() as stack:  # a synthesised tokenizer goes with the run
        if args.tokenizer is None:
            from llmsweep.modelsynth import SynthRequest, synth_model

            args.tokenizer = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "llama-1b")
            synth_model(SynthRequest(source="llama-1b", out=Path(args.tokenizer)))
        compare(args, label)


def compare(args: argparse.Namespace, tokenizer: str) -> None:
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    try:
        rows: dict[str, list[dict[str, Any]]] = {"prepared": [], "lazy": []}
        for r in range(args.repeats):  # alternate, so a drift of the shared machine falls on both
            for name, cls in (("prepared", FixedLengthWorkload), ("lazy", LazyWorkload)):
                rows[name].append(measure(cls, args, url, seed=2 * r + (name == "lazy")))
                print(f"{name:8s} #{r}: " + "  ".join(f"{k} {v:,.2f}" for k, v in rows[name][-1].items()), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    mean = {name: {k: sum(row[k] for row in runs) / len(runs) for k in runs[0]} for name, runs in rows.items()}
    print(f"\nconc {args.concurrency}, chat {args.isl}/{args.osl}, {args.prompts} prompts, tokenizer {tokenizer}")
    print("ratio lazy / prepared: " + "  ".join(
        f"{k} {mean['lazy'][k] / mean['prepared'][k]:.2f}x" for k in mean["prepared"] if mean["prepared"][k]))


if __name__ == "__main__":
    main()
