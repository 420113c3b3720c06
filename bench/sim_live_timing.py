"""How faithfully the live simulated engine keeps its own clock: configured vs client-observed TTFT and ITL.

Run: `.venv/bin/python bench/sim_live_timing.py [--itl-ms 2] [--ttft-ms 20] [--conc 1 8 32]`. Starts
`llmsweep sim serve` in constant-timing mode in its own process on loopback, drives it with llmsweep's client (reads
stamped with the kernel's receive time where the platform gives one, so the measuring client's own event loop does not
show as server time), and prints observed TTFT/ITL percentiles from the records, how the reads were stamped, and the
server process's CPU use (a busy-waiting server would show ~100 %).
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from llmsweep.client import Endpoint, RunOptions, run_benchmark
from llmsweep.client.files import RECORDS_FILE
from llmsweep.metrics import iter_records
from llmsweep.metrics.model import SIMULATED
from llmsweep.workload.base import LaneProgram, RequestIdentity, RequestSpec, Send, Workload


class _Prompts(Workload):
    """Closed-loop chat requests of `config` output tokens."""

    name = "sim-live-timing"

    def __init__(self, config: int) -> None:
        self.config = config
        self._next = itertools.count()

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        while True:
            yield self._one(lane, next(self._next))

    def _one(self, lane: int, index: int) -> LaneProgram:
        yield Send(RequestSpec(api="chat", max_tokens=self.config, input_tokens=100,
                               messages=({"role": "user", "content": "hello " * 100},),
                               identity=RequestIdentity(lane=lane, request_index=index)))


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve(ttft_ms: float, itl_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--model", "llama-1b", "--port", str(port),
         "--served-model-name", "sim", "--timing", "constant", "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the simulator did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--itl-ms", type=float, default=2.0)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--conc", type=int, nargs="+", default=[1, 8, 32])
    args = ap.parse_args()
    proc, url = _serve(args.ttft_ms, args.itl_ms)
    try:
        for conc in args.conc:
            with tempfile.TemporaryDirectory() as tmp:
                cpu0, wall0 = _cpu_of(proc.pid), time.perf_counter()
                res = run_benchmark(_Prompts(args.tokens), Endpoint(base_url=url, model="sim", metrics_url=""),
                                    RunOptions(concurrency=conc, num_requests=2 * conc), Path(tmp),
                                    source=SIMULATED)
                cpu = (_cpu_of(proc.pid) - cpu0) / (time.perf_counter() - wall0)
                recs = list(iter_records(Path(tmp) / RECORDS_FILE))
            ok = [r for r in recs if r["error_class"] is None]
            ttft = np.array([r["first_token_at"] - r["sent_at"] for r in ok]) * 1e3
            itl = np.concatenate([np.diff(r["chunk_times"]) for r in ok]) * 1e3
            itl = itl[itl > 0]
            (kernel, loop) = (sum(w[k] for w in res.summary.client_health.workers)
                              for k in ("reads_kernel_stamped", "reads_loop_stamped"))
            print(f"conc {conc:>3}: TTFT mean {ttft.mean():6.2f} ms (configured {args.ttft_ms:.1f} + queueing) | "
                  f"ITL mean {itl.mean():.3f} p50 {np.percentile(itl, 50):.3f} p99 {np.percentile(itl, 99):.3f} ms "
                  f"(configured {args.itl_ms:.3f}) | {len(ok)}/{len(recs)} ok, reads stamped by the kernel "
                  f"{kernel}, by the loop {loop} | server CPU {100 * cpu:.0f}%", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
