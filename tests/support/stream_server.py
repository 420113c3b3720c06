"""A real OpenAI-compatible streaming server for tests: known TTFT and inter-token delays, chosen faults.

It streams `/v1/chat/completions` and `/v1/completions` over loopback, logs when it actually sent every chunk
(`served`, also `GET /served`), and serves Prometheus text at `/metrics` with vLLM-style names. A request can ask for
a fault through its body field `test_fault` (clients send it via `RequestSpec.extra_body`), or the server can inject
one on every Nth request. Faults: `http500`, `http503`, `http429` (rate limited, with Retry-After), `overflow`
(HTTP 400 "maximum context length"), `reset` (connection reset mid-stream), `stall` (stops sending after the first
chunk), `invalid_json` (a garbage event mid-stream), `stream_error` (an error event), `truncated` (the response ends
cleanly in the middle of an event, half the tokens sent), `early_end` (a clean end after half the tokens: no usage,
no finish_reason, no `[DONE]`), `slow_first_byte` (the response headers come after `slow_first_byte_s`). Faults of
what a stream says: `no_content` (every chunk `choices: []`, then usage and `[DONE]`), `empty_content` (every chunk's
content ""), `usage_inflated` (usage says 1000 completion tokens), `ignore_max_tokens` (10 times max_tokens sent and
counted), `usage_negative` / `usage_string` (completion_tokens -5 / "8"), `lone_surrogate` (the first chunk's content
`"\\ud800x"`), `long_line` (after the first chunk, `long_line_bytes` without a line end, then a stall). A killed
server is the subprocess form killed by the test.

Use in-process (`with StreamServer(ServerConfig(ttft_s=0.05)) as srv: srv.url`) — it runs its own event loop in a
thread — or in a separate process (`run_in_subprocess(...)`, or `python -m tests.support.stream_server --port 0`),
which tests kill to simulate a dying server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

FAULTS = ("http500", "http503", "http429", "overflow", "reset", "stall", "invalid_json", "stream_error", "truncated",
          "early_end", "slow_first_byte", "no_content", "empty_content", "usage_inflated", "ignore_max_tokens",
          "usage_negative", "usage_string", "lone_surrogate", "long_line")


@dataclass
class ServerConfig:
    ttft_s: float = 0.0
    itl_s: float = 0.0
    tokens_per_chunk: int = 1
    usage: str = "separate"  # "separate" (choices: [] chunk), "final_chunk" (with finish_reason), "none"
    send_done: bool = True
    strict_fields: bool = False  # 422 on ignore_eos / stream_options, like transformers serve
    cached_fraction: float = 0.0
    fault: str | None = None
    fault_every: int = 0  # inject `fault` on every Nth request (1-based); 0 = never
    stall_s: float = 3600.0
    slow_first_byte_s: float = 2.0
    long_line_bytes: int = 12 << 20  # the `long_line` fault's line
    spec_accept_length: float | None = None  # expose vLLM spec-decode counters with this realised AL
    metrics_prefix: str = "vllm:"
    record_served: bool = True
    metrics_delay_s: float = 0.0  # `/metrics` answers this late (a federation over several workers, a busy engine)
    api_key: str | None = None  # as `vllm serve --api-key`: /v1/* answer 401 without `Authorization: Bearer <key>`
    chat_only: bool = False  # no /v1/completions route (a 404 there), as a chat-only gateway


@dataclass
class Served:
    """What the server actually did for one request (times are unix seconds)."""

    received_at: float
    chunk_sent_at: list[float] = field(default_factory=list)
    tokens: int = 0
    fault: str | None = None
    key: str | None = None  # the request body's `test_key`, so a test can pair client records with what was served


class _App:
    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.count = 0
        self.running = 0
        self.prompt_total = 0
        self.generation_total = 0
        self.cached_total = 0
        self.served: list[Served] = []

    def make(self) -> web.Application:
        app = web.Application(client_max_size=2**30)  # agentic prompts reach megabytes
        app.router.add_post("/v1/chat/completions", self.handle)
        if not self.cfg.chat_only:
            app.router.add_post("/v1/completions", self.handle)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/served", self.served_json)
        app.router.add_get("/health", self.health)
        if self.cfg.api_key is not None:  # otherwise no model list, as before (any --model is served)
            app.router.add_get("/v1/models", self.models)
        return app

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        """vLLM's answer to a /v1 request without the key it was started with."""
        key = self.cfg.api_key
        if key is None or request.headers.get("Authorization") == f"Bearer {key}":
            return None
        return web.json_response({"error": "Unauthorized"}, status=401)

    async def models(self, request: web.Request) -> web.Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def served_json(self, request: web.Request) -> web.Response:
        return web.json_response([asdict(s) for s in self.served])

    async def metrics(self, request: web.Request) -> web.Response:
        if self.cfg.metrics_delay_s:
            await asyncio.sleep(self.cfg.metrics_delay_s)
        p = self.cfg.metrics_prefix
        lines = [
            f"# TYPE {p}num_requests_running gauge",
            f'{p}num_requests_running{{model_name="m"}} {self.running}',
            f"# TYPE {p}num_requests_waiting gauge",
            f'{p}num_requests_waiting{{model_name="m"}} 0',
            f"# TYPE {p}prompt_tokens counter",
            f'{p}prompt_tokens_total{{model_name="m"}} {self.prompt_total}',
            f"# TYPE {p}generation_tokens counter",
            f'{p}generation_tokens_total{{model_name="m"}} {self.generation_total}',
            f"# TYPE {p}prefix_cache_queries counter",
            f'{p}prefix_cache_queries_total{{model_name="m"}} {self.prompt_total}',
            f"# TYPE {p}prefix_cache_hits counter",
            f'{p}prefix_cache_hits_total{{model_name="m"}} {self.cached_total}',
        ]
        if self.cfg.spec_accept_length is not None:
            # verify steps = generated / AL; accepted = generated - steps  =>  1 + accepted/steps = AL
            steps = int(self.generation_total / self.cfg.spec_accept_length)
            accepted = self.generation_total - steps
            lines += [
                f"# TYPE {p}spec_decode_num_drafts counter",
                f'{p}spec_decode_num_drafts_total{{model_name="m"}} {steps}',
                f"# TYPE {p}spec_decode_num_accepted_tokens counter",
                f'{p}spec_decode_num_accepted_tokens_total{{model_name="m"}} {accepted}',
                f"# TYPE {p}spec_decode_num_draft_tokens counter",
                f'{p}spec_decode_num_draft_tokens_total{{model_name="m"}} {steps * 3}',
            ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    def _fault_for(self, body: dict[str, Any]) -> str | None:
        if body.get("test_fault"):
            return str(body["test_fault"])
        if self.cfg.fault and self.cfg.fault_every and self.count % self.cfg.fault_every == 0:
            return self.cfg.fault
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        cfg = self.cfg
        if (denied := self._unauthorized(request)) is not None:
            return denied
        self.count += 1
        body = await request.json()
        if cfg.strict_fields and ({"ignore_eos", "stream_options"} & body.keys()):
            return web.json_response({"detail": "unknown field"}, status=422)
        fault = self._fault_for(body)
        served = Served(received_at=time.time(), fault=fault, key=body.get("test_key"))
        if cfg.record_served:
            self.served.append(served)
        if fault == "http500":
            return web.json_response({"error": {"message": "injected failure"}}, status=500)
        if fault == "http503":
            return web.json_response({"error": {"message": "service unavailable"}}, status=503)
        if fault == "http429":
            return web.json_response({"error": {"message": "rate limit exceeded", "type": "rate_limit"}}, status=429,
                                     headers={"Retry-After": "1"})
        if fault == "slow_first_byte":
            await asyncio.sleep(cfg.slow_first_byte_s)
        if fault == "overflow":
            msg = "This model's maximum context length is 8 tokens. However, you requested 99 tokens."
            return web.json_response({"error": {"message": msg, "type": "BadRequestError"}}, status=400)
        if fault == "stream_overflow":  # a 200 stream whose one event is the error (as vLLM sends a late refusal)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await resp.prepare(request)
            msg = "This model's maximum context length is 8 tokens. However, you requested 99 tokens."
            await resp.write(b"data: " + json.dumps({"error": {"message": msg, "type": "BadRequestError",
                                                                "code": 400}}).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        chat = request.path.endswith("/chat/completions")
        if chat:
            prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        else:
            prompt = body.get("prompt", "")
            prompt_words = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        n = int(body.get("max_tokens") or 16)
        if fault == "ignore_max_tokens":
            n *= 10
        cached = int(prompt_words * cfg.cached_fraction)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        self.running += 1
        try:
            if cfg.ttft_s:
                await asyncio.sleep(cfg.ttft_s)
            sent = 0
            claimed: Any = {"usage_inflated": 1000, "usage_negative": -5, "usage_string": str(n)}.get(fault or "", n)
            usage = {
                "prompt_tokens": prompt_words,
                "completion_tokens": claimed,
                "total_tokens": prompt_words + n,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            while sent < n:
                k = min(cfg.tokens_per_chunk, n - sent)
                sent += k
                last = sent >= n
                text = "tok " * k
                if fault == "empty_content":
                    text = ""
                elif fault == "lone_surrogate" and sent == k:
                    text = "\ud800x"  # json.dumps escapes it: `"\\ud800x"`
                if chat:
                    choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "finish_reason": None}
                else:
                    choice = {"index": 0, "text": text, "finish_reason": None}
                chunk: dict[str, Any] = {"id": "x", "object": "chunk", "choices": [choice]}
                if last:
                    choice["finish_reason"] = "length"
                    if cfg.usage == "final_chunk":
                        chunk["usage"] = usage
                if fault == "no_content":
                    chunk["choices"] = []
                if fault == "invalid_json" and sent > 1:
                    await resp.write(b"data: {not json\n\n")
                    break
                if fault == "stream_error" and sent > 1:
                    await resp.write(b'data: {"error": {"message": "engine died"}}\n\n')
                    break
                if fault in ("truncated", "early_end") and sent > max(1, n // 2):
                    if fault == "truncated":  # half an event, then a clean end of the response
                        await resp.write(b"data: " + json.dumps(chunk).encode()[:25])
                    break
                await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                served.chunk_sent_at.append(time.time())
                served.tokens = sent
                if fault == "reset" and sent >= 2:
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                if fault == "stall":
                    await asyncio.sleep(cfg.stall_s)
                if fault == "long_line" and sent == k:
                    left = cfg.long_line_bytes
                    await resp.write(b"data: ")
                    while left > 0:
                        await resp.write(b"x" * min(left, 1 << 20))
                        left -= 1 << 20
                    await asyncio.sleep(cfg.stall_s)
                if not last and cfg.itl_s:
                    await asyncio.sleep(cfg.itl_s)
            else:
                if cfg.usage == "separate":
                    event = {"id": "x", "choices": [], "usage": usage}
                    await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                if cfg.send_done:
                    await resp.write(b"data: [DONE]\n\n")
            self.prompt_total += prompt_words
            self.generation_total += sent
            self.cached_total += cached
            await resp.write_eof()
        finally:
            self.running -= 1
        return resp


class StreamServer:
    """The test server on 127.0.0.1 in a background thread with its own event loop."""

    def __init__(self, config: ServerConfig | None = None, port: int = 0) -> None:
        self.config = config or ServerConfig()
        self.app = _App(self.config)
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def served(self) -> list[Served]:
        return self.app.served

    def start(self) -> StreamServer:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            runner = web.AppRunner(self.app.make(), access_log=None, handler_cancellation=True)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", self._port, backlog=4096)
            loop.run_until_complete(site.start())
            self._runner = runner
            sock = site._server.sockets[0]  # type: ignore[union-attr]
            self.port = sock.getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=main, name="stream-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> StreamServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_in_subprocess(config: ServerConfig, *, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server in a child process; returns (process, base URL) once it answers /health."""
    import urllib.request

    port = port or free_port()
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "tests.support.stream_server", "--port", str(port),
           "--config", json.dumps(asdict(config))]
    proc = subprocess.Popen(cmd, env=env, cwd=repo)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("test stream server exited at start") from None
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("test stream server did not become ready")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--config", default="{}", help="ServerConfig fields as JSON")
    args = ap.parse_args(argv)
    srv = StreamServer(ServerConfig(**json.loads(args.config)), port=args.port).start()
    sys.stderr.write(f"stream server on {srv.url}\n")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
