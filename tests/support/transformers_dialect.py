"""A stand-in that speaks exactly `transformers serve`'s (5.17.0) OpenAI dialect, for tests without torch.

What the real server does, and this one copies (measured on the H200 and on the CPU; cli/serving/*.py):
- request fields outside the OpenAI schema (`ignore_eos`, `test_fault`, ...) → HTTP 422 `Unexpected fields`;
  `stream_options` and `max_completion_tokens` are accepted and ignored (the length then defaults to 1024 tokens);
- a `model` other than the pinned one → HTTP 400; `/v1/completions` with a non-string prompt → HTTP 400;
- the stream opens with a role-only chunk, content chunks follow (several SSE events may share one write, as the
  server drains its token queue in batches), the last chunk carries `finish_reason` **and** `usage`, and there is
  **no `data: [DONE]`**; decoded text may contain U+FFFD where a token splits a UTF-8 sequence;
- `/health` answers 200, `/metrics` and `/version` 404, `/v1/models` 500 (no hub cache).

In-process: `with DialectServer(model="m", ttft_s=0.03, itl_s=0.005) as srv: srv.url`. As a fake `transformers`
executable for `llmsweep run`: :func:`fake_transformers_package` writes a `transformers.cli.transformers` module
whose `serve MODEL ... --port P` runs this server and prints uvicorn's readiness line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

CHAT_FIELDS = frozenset({
    "messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs",
    "top_p", "user", "verbosity", "web_search_options", "stream", "generation_config", "chat_template_kwargs",
})
"""openai's CompletionCreateParamsStreaming keys plus transformers' own additions."""
COMPLETION_FIELDS = frozenset({
    "model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n",
    "presence_penalty", "seed", "stop", "stream", "stream_options", "suffix", "temperature", "top_p", "user",
    "generation_config",
})
DEFAULT_MAX_NEW_TOKENS = 1024
READY_LINE = "INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)"
"""uvicorn's line after the bind, which `transformers serve` is ready at (its `Application startup complete.` comes
before the bind)."""
WORDS = ("ka", "lo", "mi", "ne", "su", "ra", "to", "vi", "\ufffd", "bei")


@dataclass
class Seen:
    """What one request asked for and got (for assertions)."""

    path: str
    status: int
    fields: list[str]
    max_tokens: int | None = None
    tokens: int = 0


@dataclass
class DialectState:
    model: str
    ttft_s: float = 0.0
    itl_s: float = 0.0
    batch: int = 3
    requests: list[Seen] = field(default_factory=list)
    gets: dict[str, int] = field(default_factory=dict)


def _count(text: str) -> int:
    return max(1, len(text.split()))


def make_app(state: DialectState) -> web.Application:
    app = web.Application(client_max_size=2**30)

    async def get(request: web.Request) -> web.Response:
        state.gets[request.path] = state.gets.get(request.path, 0) + 1
        if request.path == "/health":
            return web.json_response({"status": "ok"})
        if request.path == "/v1/models":
            return web.Response(status=500, text="Internal Server Error")
        return web.json_response({"detail": "Not Found"}, status=404)

    async def post(request: web.Request) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")
        body: dict[str, Any] = await request.json()
        seen = Seen(request.path, 200, sorted(body))
        state.requests.append(seen)
        unexpected = set(body) - (CHAT_FIELDS if chat else COMPLETION_FIELDS)
        if unexpected:
            seen.status = 422
            return web.json_response({"detail": f"Unexpected fields in the request: {unexpected}"}, status=422)
        if body.get("model") not in (None, state.model):
            seen.status = 400
            return web.json_response(
                {"detail": f"Server is pinned to '{state.model}'; requested '{body.get('model')}'."}, status=400)
        if not chat and not isinstance(body.get("prompt", ""), str):
            seen.status = 400
            return web.json_response({"detail": "prompt must be a string."}, status=400)
        n = int(body["max_tokens"]) if body.get("max_tokens") is not None else DEFAULT_MAX_NEW_TOKENS
        seen.max_tokens = n
        if chat:
            prompt = sum(_count(str(m.get("content") or "")) for m in body.get("messages") or [])
        else:
            prompt = _count(body.get("prompt") or "")
        rid, created, name = str(uuid.uuid4()), int(time.time()), f"{state.model}@main"
        obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choice: dict[str, Any], usage: dict[str, int] | None = None) -> bytes:
            doc: dict[str, Any] = {"id": rid, "choices": [choice], "created": created, "model": name, "object": obj,
                                   **({"system_fingerprint": ""} if chat else {})}
            if usage is not None:
                doc["usage"] = usage
            return f"data: {json.dumps(doc, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()

        resp = web.StreamResponse(headers={"content-type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        if chat:
            await resp.write(chunk({"delta": {"role": "assistant"}, "index": 0}))
        await asyncio.sleep(state.ttft_s)
        sent = 0
        while sent < n:
            parts = []
            for _ in range(min(state.batch if sent else 1, n - sent)):
                word = " " + WORDS[(sent * 7 + len(rid)) % len(WORDS)]
                parts.append(chunk({"delta": {"content": word}, "index": 0} if chat else {"index": 0, "text": word}))
                sent += 1
            await resp.write(b"".join(parts))  # several events per write, as the real server drains its queue
            if sent < n:
                await asyncio.sleep(state.itl_s * len(parts))
        seen.tokens = sent
        usage = {"completion_tokens": sent, "prompt_tokens": prompt, "total_tokens": prompt + sent}
        last = {"delta": {}, "index": 0, "finish_reason": "length"} if chat else \
            {"finish_reason": "length", "index": 0, "text": ""}
        await resp.write(chunk(last, usage))  # usage with finish_reason on the last chunk, and no [DONE]
        await resp.write_eof()
        return resp

    app.router.add_post("/v1/chat/completions", post)
    app.router.add_post("/v1/completions", post)
    for path in ("/health", "/metrics", "/version", "/v1/models"):
        app.router.add_get(path, get)
    return app


class DialectServer:
    """The dialect server on 127.0.0.1 in a thread with its own event loop."""

    def __init__(self, model: str, *, ttft_s: float = 0.0, itl_s: float = 0.0, batch: int = 3) -> None:
        self.state = DialectState(model=model, ttft_s=ttft_s, itl_s=itl_s, batch=batch)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DialectServer:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(make_app(self.state), access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=main, name="transformers-dialect", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


def serve_main(argv: list[str]) -> None:
    """`transformers serve MODEL [--continuous-batching] [--host H] [--port P] ...` as the adapter renders it."""
    if argv[:1] != ["serve"]:
        raise SystemExit(f"fake transformers: only `serve` is implemented, got {argv}")
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--host", default="localhost")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--device", default="auto")
    for switch in ("--continuous-batching", "--cb-use-cuda-graph", "--no-cb-use-cuda-graph"):
        ap.add_argument(switch, action="store_true")
    args, _unknown = ap.parse_known_args(argv[1:])
    state = DialectState(model=args.model, ttft_s=0.005, itl_s=0.002)
    stats = Path(args.model) / "dialect-requests.jsonl"

    async def run() -> None:
        app = make_app(state)

        async def log_request(request: web.Request, response: web.StreamResponse) -> None:
            with open(stats, "a") as fh:
                fh.write(json.dumps({"method": request.method, "path": request.path, "status": response.status,
                                     "fields": state.requests[-1].fields if request.method == "POST" else None})
                         + "\n")

        runner = web.AppRunner(app, access_log=None)
        app.on_response_prepare.append(log_request)
        await runner.setup()
        await web.TCPSite(runner, args.host, args.port).start()
        print(READY_LINE.format(host=args.host, port=args.port), flush=True)
        await asyncio.Event().wait()

    print(f"[transformers] Loading {args.model}@main (dialect stand-in)", flush=True)
    asyncio.run(run())


FAKE_MODULE = """import sys
sys.path.insert(0, {support!r})
from transformers_dialect import serve_main
serve_main(sys.argv[1:])
"""


def fake_transformers_package(root: Path) -> Path:
    """Write `root/transformers/cli/transformers.py` (runs :func:`serve_main`); put `root` on PYTHONPATH."""
    pkg = root / "transformers" / "cli"
    pkg.mkdir(parents=True, exist_ok=True)
    (root / "transformers" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "transformers.py").write_text(FAKE_MODULE.format(support=str(Path(__file__).resolve().parent)))
    return root


if __name__ == "__main__":
    serve_main(sys.argv[1:])
