"""Stand-in for one vLLM 0.26.0 disaggregated worker with NixlConnector (CPU rehearsal of a real P/D run).

It does on a CPU what llmsweep reads from a real worker, and fails where a real one would:

- prints vLLM's three start-up lines a role read-back parses (`non-default args: {...}` with the
  `KVTransferConfig(... kv_role=...)`, `Initializing a V1 LLM engine (v0.26.0) with config: ... tensor_parallel_size=N`,
  `Creating v1 connector with name: NixlPullConnector and engine_id: ...`, as 0.26.0 logs NixlConnector);
- binds its NIXL side channel, a TCP listener on `VLLM_NIXL_SIDE_CHANNEL_HOST:VLLM_NIXL_SIDE_CHANNEL_PORT` (vLLM binds
  it on every worker), so two workers given one port fail at start as vLLM's would ("Address already in use");
- serves llmsweep's simulator (vLLM style) behind a front that speaks vLLM's P/D protocol: as `kv_producer`, a request
  whose `kv_transfer_params` ask for a remote decode is answered with the KV handle (engine id, block ids, its side
  channel's host and port); as `kv_consumer`, a request carrying a handle connects to the producer's side channel (the
  "transfer") and its prompt tokens count as `external_kv_transfer`, else as `local_compute`, in
  `vllm:prompt_tokens_by_source`; a transfer that cannot connect counts in `vllm:nixl_num_failed_transfers` and the
  prompt is recomputed; the decode's usage reports the transferred tokens as cached, as vLLM does.

Faults for tests (environment): LLMSWEEP_STANDIN_OMIT_KV=1 makes a producer answer without `kv_transfer_params`;
LLMSWEEP_STANDIN_RECOMPUTE=1 makes a consumer ignore the handle and recompute the prompt (vLLM without a connector:
"Got kv_transfer_params, but no KVConnector found"); LLMSWEEP_STANDIN_TAKE_ENGINE_PORT_ONCE=PATH makes the
first worker launched (the one that creates PATH) hand its engine a port another listener holds: the engine exits
"address already in use", and the worker with it, as a port taken between pick and bind;
LLMSWEEP_STANDIN_VERSION=V makes every worker say it runs vLLM V (its /version and start-up log) and
LLMSWEEP_STANDIN_DECODE_VERSION=V the `kv_consumer` workers alone: another build than the image declares.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

VERSION = "0.26.0"
BLOCK = 16
"""vLLM's default KV block size: the tokens of a prompt's last partial block are computed where it decodes."""


def _opts(argv: list[str]) -> dict[str, str | bool]:
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            opts[argv[i]] = True
            i += 1
    return opts


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_HELD: list[socket.socket] = []
"""A port this process holds so that the engine behind cannot bind it (the LLMSWEEP_STANDIN_TAKE_ENGINE_PORT_ONCE
fault)."""


def _taken_port() -> int:
    """A port another listener holds: the one a fault hands the engine behind, as if taken between pick and bind."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    _HELD.append(sock)
    return int(sock.getsockname()[1])


def _first_to_take(marker: str | None) -> bool:
    """Whether this worker is the first launched under the fault (it creates `marker`; atomic, as workers start
    side by side): its engine finds its port taken."""
    if not marker:
        return False
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def behind(argv: list[str]) -> list[str]:
    """The worker's argv as the simulator behind the front serves it: on loopback, on a free port of its own."""
    out, i = [], 0
    port = str(_taken_port() if _first_to_take(os.environ.get("LLMSWEEP_STANDIN_TAKE_ENGINE_PORT_ONCE")) else
               _free_port())
    while i < len(argv):
        if argv[i] in ("--port", "--host") and i + 1 < len(argv):
            out += [argv[i], port if argv[i] == "--port" else "127.0.0.1"]
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _log(where: str, text: str) -> None:
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [{where}] {text}", flush=True)


class Worker:
    def __init__(self, argv: list[str]) -> None:
        opts = _opts(argv)
        self.config = json.loads(str(opts["--kv-transfer-config"]))
        self.role = str(self.config.get("kv_role"))
        self.connector = str(self.config.get("kv_connector"))
        self.engine_id = str(uuid.uuid4())
        self.model = str(opts.get("--served-model-name", opts.get("--model", "model")))
        self.tp = int(str(opts.get("--tensor-parallel-size", 1)))
        self.host, self.port = str(opts.get("--host", "0.0.0.0")), int(str(opts.get("--port", 8000)))
        self.side_host = os.environ.get("VLLM_NIXL_SIDE_CHANNEL_HOST", "localhost")
        self.side_port = int(os.environ.get("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600"))
        self.omit_kv = os.environ.get("LLMSWEEP_STANDIN_OMIT_KV") == "1"
        self.recompute = os.environ.get("LLMSWEEP_STANDIN_RECOMPUTE") == "1"
        self.version = os.environ.get("LLMSWEEP_STANDIN_VERSION") or VERSION
        if self.role == "kv_consumer":
            self.version = os.environ.get("LLMSWEEP_STANDIN_DECODE_VERSION") or self.version
        self.by_source = {"local_compute": 0, "local_cache_hit": 0, "external_kv_transfer": 0}
        self.failed = 0
        self.xfers, self.xfer_s, self.xfer_bytes = 0, 0.0, 0
        self.lock = threading.Lock()

    def say_started(self, argv: list[str]) -> None:
        opts = _opts(argv)
        config = (f"KVTransferConfig(kv_connector='{self.connector}', engine_id='{self.engine_id}', "
                  f"kv_buffer_device='cuda', kv_buffer_size=1000000000.0, kv_role='{self.role}', kv_rank=None, "
                  "kv_parallel_size=1, kv_ip='127.0.0.1', kv_port=14579, kv_connector_extra_config={}, "
                  "kv_connector_module_path=None, enable_permute_local_kv=False, kv_load_failure_policy='fail')")
        args = [f"'model_tag': '{opts.get('--model')}'", f"'host': '{self.host}'", f"'port': {self.port}",
                f"'served_model_name': ['{self.model}']"]
        if self.tp != 1:  # vLLM lists only what differs from its defaults
            args.append(f"'tensor_parallel_size': {self.tp}")
        args.append(f"'kv_transfer_config': {config}")
        _log("api_utils.py:273", "non-default args: {" + ", ".join(args) + "}")
        _log("core.py:117", f"Initializing a V1 LLM engine (v{self.version}) with config: "
             f"model='{opts.get('--model')}', "
             f"tensor_parallel_size={self.tp}, pipeline_parallel_size=1, data_parallel_size=1, "
             "decode_context_parallel_size=1")
        # vLLM 0.26.0 resolves `NixlConnector` to its pull connector and logs that name (a real worker's log,
        # tests/data/vllm/pd-0.26.0-prefill.log)
        logged = "NixlPullConnector" if self.connector == "NixlConnector" else self.connector
        _log("factory.py:62", f"Creating v1 connector with name: {logged} and engine_id: {self.engine_id}")
        _log("standin", f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')} side channel "
             f"{self.side_host}:{self.side_port}")

    # -- the NIXL side channel -----------------------------------------------------------------------------------
    def bind_side_channel(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # ZMQ's TCP listeners set SO_REUSEADDR: a port held only by connections in TIME_WAIT (a worker stopped a
        # moment ago) binds; one another worker listens on does not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.side_host if self.side_host != "localhost" else "127.0.0.1", self.side_port))
        except OSError as exc:
            print(f"zmq.error.ZMQError: Address already in use (addr='tcp://{self.side_host}:{self.side_port}'): "
                  f"{exc}", file=sys.stderr, flush=True)
            sys.exit(1)
        sock.listen(64)
        threading.Thread(target=self._serve_side, args=(sock,), daemon=True).start()
        return sock

    def _serve_side(self, sock: socket.socket) -> None:
        while True:
            conn, _addr = sock.accept()
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    conn.sendall(json.dumps({"engine_id": self.engine_id}).encode() + b"\n")
                except OSError:
                    pass

    def pull(self, params: dict[str, Any]) -> bool:
        """The consumer's transfer: a handshake with the producer's side channel (True when it answered), timed and
        counted as vLLM's NIXL histograms count a transfer (bytes: 16 KiB per block, made up)."""
        began = time.monotonic()
        moved = self._pull(params)
        if moved:
            with self.lock:
                self.xfers += 1
                self.xfer_s += time.monotonic() - began
                self.xfer_bytes += 16384 * len(params.get("remote_block_ids") or [])
        return moved

    def _pull(self, params: dict[str, Any]) -> bool:
        try:
            with socket.create_connection((str(params["remote_host"]), int(params["remote_port"])), timeout=5) as c:
                c.sendall(json.dumps({"engine_id": params.get("remote_engine_id"),
                                      "block_ids": params.get("remote_block_ids")}).encode() + b"\n")
                answer = json.loads(c.makefile().readline())
            return bool(answer.get("engine_id")) and answer["engine_id"] == params.get("remote_engine_id")
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def count(self, prompt: int, transferred: bool, cached: int) -> int:
        """Count one request's prompt tokens by source; returns the cached tokens its usage reports (vLLM: local
        cache hits plus transferred tokens)."""
        with self.lock:
            if transferred:
                moved = prompt - prompt % BLOCK if prompt % BLOCK else prompt - 1
                self.by_source["external_kv_transfer"] += moved
                self.by_source["local_compute"] += prompt - moved
                return moved
            self.by_source["local_cache_hit"] += cached
            self.by_source["local_compute"] += prompt - cached
            return cached

    def metrics(self, sim_text: str) -> str:
        kept = [line for line in sim_text.splitlines() if "vllm:prompt_tokens_by_source" not in line
                and "vllm:nixl_" not in line]
        labels = f'engine="0",model_name="{self.model}"'
        kept.append("# TYPE vllm:prompt_tokens_by_source counter")
        kept += [f'vllm:prompt_tokens_by_source_total{{{labels},source="{k}"}} {float(v)}'
                 for k, v in self.by_source.items()]
        kept += ["# TYPE vllm:nixl_num_failed_transfers counter",
                 f"vllm:nixl_num_failed_transfers_total{{{labels}}} {float(self.failed)}",
                 "# TYPE vllm:nixl_xfer_time_seconds histogram",
                 f"vllm:nixl_xfer_time_seconds_sum{{{labels}}} {self.xfer_s}",
                 f"vllm:nixl_xfer_time_seconds_count{{{labels}}} {float(self.xfers)}",
                 "# TYPE vllm:nixl_bytes_transferred histogram",
                 f"vllm:nixl_bytes_transferred_sum{{{labels}}} {float(self.xfer_bytes)}",
                 f"vllm:nixl_bytes_transferred_count{{{labels}}} {float(self.xfers)}"]
        return "\n".join(kept) + "\n"


def serve(worker: Worker, sim_port: int) -> None:
    import aiohttp
    from aiohttp import web

    sim = f"http://127.0.0.1:{sim_port}"
    state: dict[str, aiohttp.ClientSession] = {}

    async def open_session(app: web.Application) -> None:
        state["s"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                                           connector=aiohttp.TCPConnector(limit=0), trust_env=False)

    async def close_session(app: web.Application) -> None:
        await state["s"].close()

    async def passthrough(request: web.Request) -> web.StreamResponse:
        try:
            async with state["s"].request(request.method, sim + request.path_qs, data=await request.read()) as resp:
                body = await resp.read()
                if request.path == "/metrics" and resp.status == 200:
                    body = worker.metrics(body.decode()).encode()
                return web.Response(body=body, status=resp.status,
                                    content_type=resp.content_type or "application/json")
        except (aiohttp.ClientError, OSError) as exc:
            return web.Response(status=503, text=f"engine not up: {exc}")

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        params = body.pop("kv_transfer_params", None)
        transferred = False
        if worker.role == "kv_consumer" and isinstance(params, dict) and params.get("remote_host") \
                and not worker.recompute:
            transferred = worker.pull(params)
            if not transferred:
                with worker.lock:
                    worker.failed += 1
        async with state["s"].post(sim + request.path, json=body) as resp:
            if resp.status != 200 or not body.get("stream"):
                doc = json.loads(await resp.read())
                if resp.status == 200:
                    _usage(worker, doc, transferred)
                    if worker.role == "kv_producer" and isinstance(params, dict) and params.get("do_remote_decode") \
                            and not worker.omit_kv:
                        n = int(doc["usage"]["prompt_tokens"])
                        doc["kv_transfer_params"] = {
                            "do_remote_prefill": True, "do_remote_decode": False,
                            "remote_block_ids": list(range((n + BLOCK - 1) // BLOCK)),
                            "remote_engine_id": worker.engine_id, "remote_request_id": doc.get("id"),
                            "remote_host": worker.side_host, "remote_port": worker.side_port, "tp_size": worker.tp,
                            "remote_num_tokens": n}
                return web.json_response(doc, status=resp.status)
            out = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
            await out.prepare(request)
            async for line in resp.content:
                if line.startswith(b"data: {") and b'"usage"' in line:
                    doc = json.loads(line[len(b"data: "):])
                    if doc.get("usage"):
                        _usage(worker, doc, transferred)
                        line = b"data: " + json.dumps(doc).encode() + b"\n"
                await out.write(line)
            await out.write_eof()
            return out

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": worker.version})  # all vLLM's /version says

    app = web.Application(client_max_size=1 << 30)
    app.add_routes([web.post("/v1/completions", completions), web.post("/v1/chat/completions", completions),
                    web.get("/version", version),
                    web.route("*", "/{tail:.*}", passthrough)])
    app.on_startup.append(open_session)
    app.on_cleanup.append(close_session)
    web.run_app(app, host=worker.host, port=worker.port, print=None, access_log=None)


def _usage(worker: Worker, doc: dict[str, Any], transferred: bool) -> None:
    usage = doc["usage"]
    details = usage.get("prompt_tokens_details") or {}
    cached = worker.count(int(usage["prompt_tokens"]), transferred, int(details.get("cached_tokens") or 0))
    usage["prompt_tokens_details"] = {**details, "cached_tokens": cached}


def main(argv: list[str], sim: list[str]) -> None:
    worker = Worker(argv)
    worker.say_started(argv)
    if worker.connector != "NixlConnector":
        print(f"stand-in: only NixlConnector is rehearsed, not {worker.connector}", file=sys.stderr, flush=True)
        sys.exit(1)
    worker.bind_side_channel()
    sim_port = int(sim[sim.index("--port") + 1])
    child = subprocess.Popen(sim)
    stopping = threading.Event()

    def engine_died() -> None:
        """The engine behind the front exits (its port taken before it bound it, a crash): the worker exits with it,
        as a vLLM API server whose engine core died does, rather than answer 503 until a readiness deadline."""
        code = child.wait()
        # a signal's end (the launcher stops the whole process group, the engine with the front) is a stop, not a death
        if not stopping.is_set() and code >= 0:
            print(f"stand-in: the engine behind the front exited with status {code}", file=sys.stderr, flush=True)
            os._exit(code if 0 < code < 256 else 1)

    threading.Thread(target=engine_died, daemon=True).start()
    try:
        serve(worker, sim_port)
    finally:
        stopping.set()
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
