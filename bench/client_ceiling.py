"""What can one llmsweep client drive, and how true are its times? A zero-compute streaming server in a separate
process, our client at concurrency 1…1,024, and (optionally) aiperf against the same server in the same run.

    .venv/bin/python bench/client_ceiling.py [--levels 1,4,16,64,256,1024] [--osl 128] [--passes zero,timed]
        [--settings default,earlier] [--client-workers 1,2] [--repeats 3] [--aiperf PATH] [--json FILE] [--role-first]

Reported per run: requests/s and chunks/s, client CPU seconds (this process, its worker processes and record helpers)
and per streamed token, the TTFT error (client TTFT minus the TTFT the server served, per request: mean/p50/p99) and
the delivery error (client first-token stamp minus the moment the server wrote that first chunk, both on this
machine's clock), how often the first token shares its stamp with the second chunk (both taken in one read, or
merged by the kernel: the usual cause of a TTFT error), request transit (the client's send stamp to the server's
receive stamp: the TTFT error is delivery plus transit), ITL as seen and as served, p99 schedule lag,
and how late the machine wakes a sleeping process during the run (a probe process: the machine's own share of any
timing error). The server serves from the moment a request's bytes reached its socket (the kernel's receive time on
Linux, so its own busy loop is not billed to the client) to its write of the first chunk. The second pass ("timed")
injects TTFT 20 ms / ITL 5 ms at concurrency 64 and 256, the setting of research/peer-baselines.md, and ends with one
line per level: llmsweep's mean TTFT error (median and range of the repeats) next to aiperf's. --role-first has the
server write a role-only event just before each first token, as vLLM's chat streams do.

--settings compares client settings side by side in one run, alternating within each repeat so load drift hits them
alike: `default`; `read-whole` (a response's first reads taken whole, not event by event: the client before
split_first_events); `loop-stamps` (reads stamped in the read callback, not by the kernel); `before-kernel-stamps`
(that, and finished streams parsed in the event loop: the client before kernel stamps and the record helper);
`records-in-loop` / `records-helper` (finished streams parsed in the event loop / by the record helper process);
`earlier` (reads stamped when the request's task resumes, no turns for client work: the client before timing at high
concurrency was fixed).
--client-workers compares worker counts likewise. With --repeats > 1 a median line per setting follows. aiperf (its own
defaults; a tokenizer is synthesized offline) is compared when --aiperf, $LLMSWEEP_AIPERF or an `aiperf` on PATH names
one; otherwise its rows are skipped. The load average is printed with each pass: the figures are only comparable within
a run. Goals: <= 50 us client CPU per streamed token; TTFT error <= 5 ms at concurrency 64 and 256 on 2 shared cores.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from llmsweep.words import noun

REPO = Path(__file__).resolve().parent.parent
_IDX = re.compile(rb"idx=(\d+)")


# ---------------------------------------------------------------------------------------------------- the server
class _SSEServer(asyncio.Protocol):
    """A minimal HTTP/1.1 keep-alive server on asyncio's protocol layer.

    aiohttp's web server spends ~0.3 ms of Python per request; when 64 requests arrive together it queues them for
    ~20 ms before a handler even starts, and that would be billed to the client. Here a request costs tens of
    microseconds and is stamped the moment its bytes reach the server process, so what the benchmark measures is the
    client. Streams share one ticker: every ITL the next chunk goes to every stream.
    """

    served: ClassVar[dict[str, list[float]]] = {}  # shared by every connection of the one server process
    active: ClassVar[dict[_SSEServer, list[Any]]] = {}
    ttft = 0.0
    itl = 0.0
    counter = itertools.count()
    CHUNK = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "}}]}\n\n'
    FRAME = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
    ROLE = (b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,'
            b'"delta":{"role":"assistant","content":""}}]}\n\n')
    role_first = False  # a role-only event written just before the first token, as vLLM's chat streams have

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr: asyncio.Transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.t_recv = 0.0
        self.rx: float | None = None
        _kernel_receive_times(transport, self)

    def received(self, data: bytes, rx: float | None) -> None:
        self.rx = rx
        self.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        _SSEServer.active.pop(self, None)

    def data_received(self, data: bytes) -> None:
        if not self.buf:
            self.t_recv = self.rx or time.time()
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < head_end + 4 + length:
                return
            body = self.buf[head_end + 4 : head_end + 4 + length]
            self.buf = self.buf[head_end + 4 + length :]
            method, path = head.split(" ", 2)[:2]
            self._route(method, path, body, self.t_recv)
            self.t_recv = time.time()

    def _plain(self, payload: bytes, ctype: bytes = b"application/json") -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (ctype, len(payload))
        self.tr.write(head + payload)

    def _route(self, method: str, path: str, body: bytes, received: float) -> None:
        if path.startswith("/served"):
            self._plain(json.dumps(_SSEServer.served).encode())
        elif path.startswith("/reset"):
            _SSEServer.served.clear()
            self._plain(b"ok", b"text/plain")
        elif path.startswith("/v1/models"):
            self._plain(b'{"object":"list","data":[{"id":"m","object":"model"}]}')
        elif path.startswith("/v1/"):
            req = json.loads(body)
            m = _IDX.search(body)
            key = m.group(1).decode() if m else f"anon-{next(_SSEServer.counter)}"
            n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            self.tr.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            state = [n, key, received, 0.0, n]  # remaining, request key, received, first chunk, total
            if _SSEServer.ttft:
                asyncio.get_running_loop().call_later(_SSEServer.ttft, self._first, state)
            else:
                self._first(state)
        else:
            self._plain(b"ok", b"text/plain")

    def _first(self, state: list[Any]) -> None:
        if self.tr.is_closing():
            return
        if _SSEServer.role_first:
            self.tr.write(b"%x\r\n%s\r\n" % (len(self.ROLE), self.ROLE))
        self.tr.write(self.FRAME)
        state[3] = time.time()
        state[0] -= 1
        if state[0] > 0 and _SSEServer.itl:
            _SSEServer.active[self] = state
        else:
            self.tr.write(self.FRAME * state[0])
            state[0] = 0
            self._finish(state)

    def _finish(self, state: list[Any]) -> None:
        usage = b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":128,"completion_tokens":%d}}\n\n' % state[4]
        tail = usage + b"data: [DONE]\n\n"
        self.tr.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
        _SSEServer.served[state[1]] = [state[2], state[3], time.time()]


def _kernel_receive_times(transport: Any, proto: _SSEServer) -> None:
    """Stamp a request as received when its bytes reached this machine (the kernel's receive time, SO_TIMESTAMPNS on
    Linux), not when this busy loop got to it: what the server served starts there. Elsewhere, the read callback."""
    sock = getattr(transport, "_sock", None)
    if not sys.platform.startswith("linux") or sock is None or getattr(transport, "_read_ready_cb", None) is None:
        return
    so_timestampns = getattr(socket, "SO_TIMESTAMPNS", 35)
    sock.setsockopt(socket.SOL_SOCKET, so_timestampns, 1)

    def read() -> None:
        try:
            data, ancillary, _, _ = sock.recvmsg(transport.max_size, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            transport._fatal_error(exc, "read error")
            return
        if not data:
            transport._read_ready__on_eof()
            return
        rx = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == so_timestampns:
                sec, nsec = struct.unpack_from("qq", payload)
                rx = sec + nsec * 1e-9
        proto.received(data, rx)

    transport._read_ready_cb = read


def _tick(loop: asyncio.AbstractEventLoop, next_at: float) -> None:
    """Write the next chunk to every active stream, then schedule the next tick (a sync callback: no tasks)."""
    for proto, state in list(_SSEServer.active.items()):
        if proto.tr.is_closing():
            _SSEServer.active.pop(proto, None)
            continue
        proto.tr.write(_SSEServer.FRAME)
        state[0] -= 1
        if state[0] <= 0:
            del _SSEServer.active[proto]
            proto._finish(state)
    next_at += _SSEServer.itl
    loop.call_at(max(next_at, loop.time()), _tick, loop, next_at)


def serve(port: int, ttft_ms: float, itl_ms: float, role_first: bool = False) -> None:
    """Zero-compute OpenAI-style streaming: one token per chunk, usage at the end, optional TTFT/ITL."""
    _SSEServer.ttft, _SSEServer.itl = ttft_ms / 1e3, itl_ms / 1e3
    _SSEServer.role_first = role_first

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_SSEServer, "127.0.0.1", port, backlog=4096)
        if _SSEServer.itl:
            loop.call_soon(_tick, loop, loop.time())
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(ttft_ms: float, itl_ms: float, role_first: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--ttft-ms", str(ttft_ms),
                             "--itl-ms", str(itl_ms), *(["--role-first"] if role_first else [])])
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("ceiling server did not start")


def _served(url: str) -> dict[str, list[float]]:
    served: dict[str, list[float]] = json.loads(urllib.request.urlopen(url + "/served", timeout=30).read())
    return served


def _reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url + "/reset", method="POST"), timeout=10).read()


class _Probe:
    """How late a sleeping process on this machine wakes up while a client runs: a third process sleeps 2 ms at a
    time and notes by how much it overslept. That lateness is the machine's share of any timing error (both the server
    and the client wake up late on a loaded host); it puts each row's error in context."""

    def __enter__(self) -> _Probe:
        self.proc = subprocess.Popen([sys.executable, __file__, "--probe"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # sampling: a run shorter than the probe's start-up still gets its samples
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self.proc.communicate(b"", timeout=30)
        self.stats = json.loads(out or b"{}")

    def result(self) -> dict[str, float]:
        return {f"wake_{k}_ms": v for k, v in self.stats.items()}


def probe() -> None:
    """--probe: sleep 2 ms at a time until stdin closes, then print the oversleep's mean/p50/p99 in ms."""
    import threading

    done = threading.Event()
    def wait_for_eof() -> None:
        sys.stdin.buffer.read()
        done.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    late: list[float] = []
    print("sampling", flush=True)
    while not (done.is_set() and late):
        t = time.perf_counter()
        time.sleep(0.002)
        late.append(time.perf_counter() - t - 0.002)
    print(json.dumps(_ms(late) if late else {}))


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------------- our client
from llmsweep.workload.base import LaneProgram, RequestIdentity, RequestSpec, Send, Workload  # noqa: E402

_FILLER = " ".join(["word"] * 120)


class CeilingWorkload(Workload):
    """Closed-loop chat requests of `config` output tokens; request indices unique across worker processes (the
    server keys what it served by them). Module level with a picklable config, so worker processes can rebuild it."""

    name = "ceiling"

    def __init__(self, config: int) -> None:
        self.config = config
        self._next = itertools.count()
        self._worker, self._workers = 0, 1

    def bind_worker(self, worker: int, workers: int) -> None:
        self._worker, self._workers = worker, workers

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        while True:
            yield self._one(lane, next(self._next) * self._workers + self._worker)

    def _one(self, lane: int, i: int) -> LaneProgram:
        yield Send(RequestSpec(api="chat", max_tokens=self.config, input_tokens=128,
                               messages=({"role": "user", "content": f"idx={i} {_FILLER}"},),
                               identity=RequestIdentity(lane=lane, request_index=i)))


def _workload(osl: int) -> Any:
    return CeilingWorkload(osl)


# Client settings the bench can compare in one run (see the module docstring).
SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "loop-stamps": {"stamp_reads": "protocol"},
    "no-first-reads-first": {"read_first_tokens_first": False},
    "read-whole": {"split_first_events": False},
    "before-kernel-stamps": {"stamp_reads": "protocol", "record_process": False},
    "records-in-loop": {"record_process": False},
    "records-helper": {"record_process": True},
    "earlier": {"stamp_reads": "task", "loop_budget_s": None, "record_process": False},
    "task-stamps": {"stamp_reads": "task"},
    "no-pacing": {"loop_budget_s": None},
    "budget-1ms": {"loop_budget_s": 0.001},
    "budget-4ms": {"loop_budget_s": 0.004},
}


def _usage() -> float:
    """CPU seconds of this process and its reaped children (worker processes; the server is reaped only at the end)."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _ms(values: list[float]) -> dict[str, float]:
    arr = np.array(values) * 1e3
    return {"mean": float(arr.mean()), "p50": float(np.median(arr)), "p99": float(np.percentile(arr, 99))}


def run_ours(url: str, concurrency: int, requests: int, osl: int, out: Path, server_pid: int,
             **options: Any) -> dict[str, Any]:
    from llmsweep.client import Endpoint, RunOptions, run_benchmark
    from llmsweep.client.files import RECORDS_FILE
    from llmsweep.metrics import iter_records
    from llmsweep.metrics.model import SIMULATED

    _reset(url)
    cpu0 = _usage()
    srv0 = _cpu_of(server_pid)
    t0 = time.perf_counter()
    with _Probe() as probe:
        # the stand-in server is no engine: its timings are the ones it was told to serve, so the run is labelled
        # simulated (`measured` would claim a real engine's figures)
        res = run_benchmark(_workload(osl), Endpoint(base_url=url, model="m", metrics_url=""),
                            RunOptions(concurrency=concurrency, num_requests=requests, timeout_s=120, **options), out,
                            source=SIMULATED)
    wall = time.perf_counter() - t0
    client_cpu = _usage() - cpu0
    served = _served(url)
    recs = list(iter_records(out / RECORDS_FILE))
    ok = [r for r in recs if r["error_class"] is None]
    delivery, ttft_c, ttft_s, itl_s, transit, joined = [], [], [], [], [], []
    for r in ok:
        s = served.get(str(r["request_index"]))
        if s is None:
            continue
        delivery.append(r["first_token_at"] - s[1])
        transit.append(s[0] - r["sent_at"])
        ttft_c.append(r["first_token_at"] - r["sent_at"])
        joined.append(len(r["chunk_times"]) > 1 and r["chunk_times"][0] == r["chunk_times"][1])
        ttft_s.append(s[1] - s[0])
        if osl > 1:
            itl_s.append((s[2] - s[1]) / (osl - 1))
    sm = res.summary
    span = sm.throughput.duration_s or wall
    chunks = sum(len(r["chunk_times"]) for r in ok)
    tokens = sm.tokens.output_total
    err = _ms([c - v for c, v in zip(ttft_c, ttft_s, strict=True)])
    dlv = _ms(delivery)
    return {
        "client": "llmsweep", "concurrency": concurrency, "requests": len(ok), "failed": len(recs) - len(ok),
        "workers": len(sm.client_health.workers),
        "record_helper": any(w.get("record_helper") for w in sm.client_health.workers), **probe.result(),
        "req_s": len(ok) / span, "chunks_s": chunks / span, "tok_s": tokens / span,
        "client_cpu_s": client_cpu, "server_cpu_s": _cpu_of(server_pid) - srv0, "wall_s": wall,
        "chunks_per_core_s": chunks / client_cpu if client_cpu else 0.0,
        "cpu_us_per_token": client_cpu / tokens * 1e6 if tokens else 0.0,
        "ttft_client_ms": 1e3 * float(np.median(ttft_c)), "ttft_served_ms": 1e3 * float(np.median(ttft_s)),
        "ttft_client_mean_ms": 1e3 * float(np.mean(ttft_c)), "ttft_served_mean_ms": 1e3 * float(np.mean(ttft_s)),
        "ttft_error_mean_ms": err["mean"], "ttft_error_p50_ms": err["p50"], "ttft_error_p99_ms": err["p99"],
        "transit_p50_ms": 1e3 * float(np.median(transit)), "transit_mean_ms": 1e3 * float(np.mean(transit)),
        "transit_p99_ms": 1e3 * float(np.percentile(transit, 99)),
        "delivery_mean_ms": dlv["mean"], "delivery_p50_ms": dlv["p50"], "delivery_p99_ms": dlv["p99"],
        "first_joined_pct": 100 * float(np.mean(joined)) if joined else 0.0,
        "itl_client_ms": 1e3 * sm.latency.tpot.mean,
        "itl_served_ms": 1e3 * float(np.mean(itl_s)) if itl_s else 0.0,
        "lag_p99_ms": 1e3 * sm.client_health.schedule_lag_s.p99,
        "max_inflight": sm.client_health.max_inflight,
    }


# ---------------------------------------------------------------------------------------------------- aiperf
def aiperf_tokenizer(tmp: Path) -> Path:
    """A local tokenizer for aiperf (it counts synthetic prompt tokens with one): `llmsweep model synth`, offline."""
    out = tmp / "tokenizer"
    subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "model", "synth", "tiny", "--out", str(out),
                    "--weights", "none"], check=True, capture_output=True)
    return out


def run_aiperf(aiperf: str, url: str, concurrency: int, requests: int, osl: int, server_pid: int,
               tokenizer: Path) -> dict[str, Any]:
    """aiperf at its own defaults against the same server; its error is its mean TTFT minus the mean TTFT the server
    served (aiperf keeps no per-request key the server could match)."""
    from llmsweep.peers.aiperf import read_aiperf_figures

    _reset(url)
    art = Path(tempfile.mkdtemp(prefix="aiperf-"))
    cmd = [aiperf, "profile", "--model", "m", "--url", url, "--endpoint-type", "chat", "--streaming",
           "--concurrency", str(concurrency), "--request-count", str(requests),
           "--tokenizer", str(tokenizer), "--use-legacy-max-tokens",
           "--use-server-token-count", "--synthetic-input-tokens-mean", "128", "--output-tokens-mean", str(osl),
           "--extra-inputs", "ignore_eos:true", "--artifact-dir", str(art), "--ui-type", "none"]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    srv0 = _cpu_of(server_pid)
    t0 = time.perf_counter()
    with _Probe() as probe:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    served = _served(url)
    try:
        figures = read_aiperf_figures(art) if proc.returncode == 0 else None
    except (OSError, ValueError) as exc:
        figures, proc.stderr = None, f"{proc.stderr}\n{exc}"
    finally:
        shutil.rmtree(art, ignore_errors=True)
    if figures is None or not served:
        return {"client": "aiperf", "error": (proc.stderr or proc.stdout)[-800:]}
    n = len(served)
    span = max(v[2] for v in served.values()) - min(v[0] for v in served.values())
    served_ttft = [v[1] - v[0] for v in served.values()]
    itl_s = [(v[2] - v[1]) / (osl - 1) for v in served.values()] if osl > 1 else [0.0]
    ttft = figures["latency"]["ttft"]
    row: dict[str, Any] = {
        "client": "aiperf", "version": figures.get("aiperf_version"), "concurrency": concurrency, "requests": n,
        "req_s": n / span, "tok_s": n * osl / span, "client_cpu_s": cpu, "wall_s": wall,
        "server_cpu_s": _cpu_of(server_pid) - srv0, "cpu_us_per_token": cpu / (n * osl) * 1e6,
        "ttft_served_ms": 1e3 * float(np.median(served_ttft)),
        "ttft_served_mean_ms": 1e3 * float(np.mean(served_ttft)),
        "itl_served_ms": 1e3 * float(np.mean(itl_s)), **probe.result(),
    }
    if ttft["mean"] is not None:
        row["ttft_error_mean_ms"] = 1e3 * ttft["mean"] - row["ttft_served_mean_ms"]
    if ttft["p50"] is not None:
        row["ttft_error_p50_ms"] = 1e3 * ttft["p50"] - row["ttft_served_ms"]
    return row


# ---------------------------------------------------------------------------------------------------- report
def _row(r: dict[str, Any]) -> str:
    nan = float("nan")
    who = r["client"] + (f"[{r['setting']},w{r['workers']}{'+h' if r.get('record_helper') else ''}]"
                         if "setting" in r else "")
    line = (f"{who:>20} c{r['concurrency']:<5} {r['requests']:>5} req {r['req_s']:>7.1f} req/s "
            f"{r.get('chunks_s', r['tok_s']):>7.0f} chunk/s  client {r['client_cpu_s']:>5.2f} CPU-s "
            f"({r['cpu_us_per_token']:>5.1f} us/tok)  server {r['server_cpu_s']:.2f} CPU-s  "
            f"TTFT error mean/p50/p99 {r.get('ttft_error_mean_ms', nan):6.2f}/{r.get('ttft_error_p50_ms', nan):6.2f}/"
            f"{r.get('ttft_error_p99_ms', nan):6.2f} ms")
    if "delivery_p50_ms" in r:
        line += (f"  delivery mean/p50/p99 {r['delivery_mean_ms']:6.2f}/{r['delivery_p50_ms']:6.2f}/"
                 f"{r['delivery_p99_ms']:6.2f} ms  first token joined {r['first_joined_pct']:.0f}%  "
                 f"transit mean/p50/p99 {r['transit_mean_ms']:.2f}/{r['transit_p50_ms']:.2f}/"
                 f"{r['transit_p99_ms']:.2f} ms  "
                 f"ITL client/served {r['itl_client_ms']:.2f}/{r['itl_served_ms']:.2f} ms  "
                 f"lag p99 {r['lag_p99_ms']:.1f} ms")
    elif "itl_served_ms" in r:
        line += f"  ITL served {r['itl_served_ms']:.2f} ms"
    if "wake_mean_ms" in r:
        line += f"  machine wakes late mean/p99 {r['wake_mean_ms']:.2f}/{r['wake_p99_ms']:.2f} ms"
    return line


def _versus(c: int, ours: list[dict[str, Any]], theirs: dict[str, Any] | None) -> str:
    """One line per timed level: llmsweep's mean TTFT error (median and spread of its runs) next to aiperf's."""
    errs = sorted(r["ttft_error_mean_ms"] for r in ours)
    wake = float(np.median([r["wake_mean_ms"] for r in ours if "wake_mean_ms" in r] or [float("nan")]))
    line = (f"c{c} mean TTFT error: llmsweep {float(np.median(errs)):.2f} ms (median of {len(errs)}, "
            f"{errs[0]:.2f}-{errs[-1]:.2f}; machine wakes late {wake:.2f} ms on average)")
    if theirs is None:
        return line + ", aiperf not run"
    if "error" in theirs or "ttft_error_mean_ms" not in theirs:
        return line + ", aiperf failed"
    return line + f", aiperf {theirs.get('version') or ''} {theirs['ttft_error_mean_ms']:.2f} ms"


def _medians(rows: list[dict[str, Any]]) -> str:
    keys = ("ttft_error_mean_ms", "ttft_error_p50_ms", "ttft_error_p99_ms", "delivery_mean_ms", "delivery_p50_ms",
            "delivery_p99_ms", "client_cpu_s", "cpu_us_per_token")
    med = {k: float(np.median([r[k] for r in rows])) for k in keys if all(k in r for r in rows)}
    return (f"  median of {len(rows)}: TTFT error mean/p50/p99 {med['ttft_error_mean_ms']:.2f}/"
            f"{med['ttft_error_p50_ms']:.2f}/{med['ttft_error_p99_ms']:.2f} ms, delivery mean/p50/p99 "
            f"{med['delivery_mean_ms']:.2f}/{med['delivery_p50_ms']:.2f}/{med['delivery_p99_ms']:.2f} ms, client "
            f"{med['client_cpu_s']:.2f} CPU-s ({med['cpu_us_per_token']:.1f} us/token)")


def _load() -> str:
    try:
        return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ttft-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--itl-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--role-first", action="store_true",
                    help="the server writes a role-only event just before each first token (as vLLM's chat streams do)")
    ap.add_argument("--levels", default="1,4,16,64,256,1024")
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--requests", type=int, default=0, help="requests per level (default max(8*c, 400), <= 4096)")
    ap.add_argument("--passes", default="zero,timed",
                    help="which servers: zero (zero compute, every level) and/or timed (TTFT 20 ms / ITL 5 ms, "
                         "levels 64 and 256)")
    ap.add_argument("--settings", default="default",
                    help="comma list of client settings to compare side by side: " + ", ".join(
                        f"{k} ({v or 'the defaults'})" for k, v in SETTINGS.items()))
    ap.add_argument("--client-workers", default="default",
                    help="comma list of worker counts to compare; 'default' = the client's own choice")
    ap.add_argument("--repeats", type=int, default=1, help="runs per setting; a median line follows when > 1")
    ap.add_argument("--aiperf", default=os.environ.get("LLMSWEEP_AIPERF") or shutil.which("aiperf"),
                    help="aiperf executable to compare at c64 and c256 (default $LLMSWEEP_AIPERF, else aiperf on "
                         "PATH; skipped when neither exists)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve, args.ttft_ms, args.itl_ms, args.role_first)
        return
    if args.probe:
        probe()
        return
    levels = [int(x) for x in args.levels.split(",")]
    settings = [x.strip() for x in args.settings.split(",")]
    if unknown := [x for x in settings if x not in SETTINGS]:
        ap.error(f"unknown {noun(len(unknown), 'setting')} {unknown}; choose from {list(SETTINGS)}")
    workers: list[int | None] = [None if x.strip() == "default" else int(x) for x in args.client_workers.split(",")]
    passes = {x.strip() for x in args.passes.split(",")}
    if not args.aiperf:
        print("aiperf: not installed (set LLMSWEEP_AIPERF or --aiperf to compare against it); its rows are skipped",
              flush=True)
    rows: list[dict[str, Any]] = []
    versus: list[str] = []
    tokenizer: Path | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for key, label, ttft, itl, lv in (
            ("zero", "zero-compute server", 0.0, 0.0, levels),
            ("timed", "server TTFT 20 ms, ITL 5 ms", 20.0, 5.0, [c for c in (64, 256) if c in levels]),
        ):
            if key not in passes or not lv:
                continue
            print(f"== {label} (osl {args.osl}, one token per chunk; client and server share this machine's "
                  f"{os.cpu_count()} cores; {_load()})", flush=True)
            proc, url = _start_server(ttft, itl, args.role_first)
            try:
                for c in lv:
                    n = args.requests or min(max(8 * c, 400), 4096)
                    combos = [(setting, w) for setting in settings for w in workers]
                    reps: dict[tuple[str, int | None], list[dict[str, Any]]] = {k: [] for k in combos}
                    for i in range(args.repeats):  # settings alternate within a repeat: load drifts, pairs do not
                        for setting, w in combos:
                            opts: dict[str, Any] = dict(SETTINGS[setting])
                            if w is not None:
                                opts["workers"] = w
                            r = run_ours(url, c, n, args.osl, Path(tmp) / f"{key}-{c}-{setting}-{w}-{i}",
                                         proc.pid, **opts)
                            r["server"], r["setting"], r["load"] = label, setting, _load()
                            rows.append(r)
                            reps[(setting, w)].append(r)
                            print(_row(r), flush=True)
                    if args.repeats > 1:
                        for (setting, w), rs in reps.items():
                            print(f"{setting} workers {w or 'default'} c{c}:" + _medians(rs), flush=True)
                    a: dict[str, Any] | None = None
                    if args.aiperf and c in (64, 256):
                        if tokenizer is None:
                            tokenizer = aiperf_tokenizer(Path(tmp))
                        a = run_aiperf(args.aiperf, url, c, n, args.osl, proc.pid, tokenizer)
                        a["server"], a["load"] = label, _load()
                        rows.append(a)
                        if "error" in a:
                            print(f"  aiperf failed: {a['error']}", flush=True)
                        else:
                            print(_row(a), flush=True)
                    if key == "timed":
                        first = reps[combos[0]]
                        versus.append(_versus(c, first, a))
                        print(versus[-1], flush=True)
            finally:
                proc.terminate()
                proc.wait()
    if versus:
        print("== " + f"llmsweep ({settings[0]}) against aiperf, TTFT 20 ms / ITL 5 ms server; {_load()}")
        for line in versus:
            print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
