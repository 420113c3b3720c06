"""A simulated PD router: the front door of a disaggregated simulator deployment (the analogue of SGLang's
`sglang_router.launch_router --pd-disaggregation`).

For each OpenAI request it picks a prefill and a decode worker (round robin over each pool), has the prefill worker
compute the prompt (one output token, non-streaming), then forwards the client's request to the decode worker with
the number of prompt tokens whose KV is to arrive, which prefill worker holds it (its index: the decode worker
models the transfer over that pair's link) and the number the prefill worker found in its prefix cache
(`sim.roles`: the request's `cached_tokens`, which the decode worker reports), and relays the decode worker's
answer — streamed or whole — byte for byte. `/health` is 200 only while every worker answers its own; `/version`
says what the router is, where it runs and which workers it routes to.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from typing import Any

import aiohttp
from aiohttp import web

from llmsweep.engine_ids import SIM
from llmsweep.sim.http import error_response, json_object, start_app
from llmsweep.sim.roles import (
    KV_CACHED_HEADER,
    KV_SOURCE_HEADER,
    KV_SOURCE_WORKER_HEADER,
    KV_TOKENS_HEADER,
    node_name,
)

log = logging.getLogger(__name__)

_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"})


class PDRouter:
    """Round-robin prefill/decode routing over HTTP; one aiohttp session shared by every request."""

    def __init__(self, prefill: list[str], decode: list[str], *, kv_transfer: str | None = None,
                 health_timeout_s: float = 2.0) -> None:
        if not prefill or not decode:
            raise ValueError("a PD router needs at least one prefill and one decode worker")
        self.prefill = [u.rstrip("/") for u in prefill]
        self.decode = [u.rstrip("/") for u in decode]
        self.kv_transfer = kv_transfer
        self.health_timeout_s = health_timeout_s
        self.node = node_name()
        self._next_prefill = itertools.cycle(range(len(self.prefill)))
        self._next_decode = itertools.cycle(range(len(self.decode)))
        self._session: aiohttp.ClientSession | None = None
        self.routed = 0
        self.app = web.Application(client_max_size=1 << 30)
        self.app.add_routes([
            web.post("/v1/chat/completions", self.route),
            web.post("/v1/completions", self.route),
            web.get("/v1/models", self.models),
            web.get("/health", self.health),
            web.get("/version", self.version),
        ])
        self.app.on_startup.append(self._open)
        self.app.on_cleanup.append(self._close)

    async def _open(self, app: web.Application) -> None:
        # No total timeout: a long generation streams for minutes; trust_env off: a CI proxy must not see the workers.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                                              connector=aiohttp.TCPConnector(limit=0))

    async def _close(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "the router's session opens with the application"
        return self._session

    async def route(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json_object(raw)
        if isinstance(body, web.Response):
            return body
        p = next(self._next_prefill)
        prefill = self.prefill[p]
        decode = self.decode[next(self._next_decode)]
        first = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "max_completion_tokens")}
        first["max_tokens"] = 1
        try:
            async with self.session.post(prefill + request.path, json=first) as resp:
                answer = await resp.read()
                if resp.status != 200:  # the prefill worker's refusal (too long, unknown model) is the client's
                    return web.Response(body=answer, status=resp.status, content_type="application/json")
            doc = json.loads(answer)
            prompt_tokens = int(doc["usage"]["prompt_tokens"])
            cached_tokens = _cached_tokens(doc["usage"])
        except (aiohttp.ClientError, OSError, ValueError, KeyError, TypeError) as exc:
            return error_response(502, f"prefill worker {prefill} failed: {exc}", "BadGatewayError")
        headers = {KV_TOKENS_HEADER: str(prompt_tokens), KV_SOURCE_HEADER: prefill, KV_SOURCE_WORKER_HEADER: str(p),
                   KV_CACHED_HEADER: str(cached_tokens), "Content-Type": "application/json"}
        self.routed += 1
        out: web.StreamResponse | None = None
        try:
            async with self.session.post(decode + request.path, data=raw, headers=headers) as resp:
                out = web.StreamResponse(status=resp.status, headers={
                    k: v for k, v in resp.headers.items() if k.lower() not in _HOP_HEADERS})
                await out.prepare(request)
                async for chunk in resp.content.iter_any():
                    await out.write(chunk)
                await out.write_eof()
                return out
        except (aiohttp.ClientError, OSError) as exc:
            if out is None:
                return error_response(502, f"decode worker {decode} failed: {exc}", "BadGatewayError")
            raise  # mid-stream: the client sees a cut stream, as it would from a real router

    async def _get(self, url: str) -> tuple[int, Any]:
        try:
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=self.health_timeout_s)) as resp:
                text = await resp.text()
                try:
                    return resp.status, json.loads(text) if text else None
                except ValueError:
                    return resp.status, None
        except (TimeoutError, aiohttp.ClientError, OSError):
            return 0, None

    async def health(self, request: web.Request) -> web.Response:
        """200 only while every prefill and decode worker answers its own /health (the router's readiness)."""
        statuses = await asyncio.gather(*(self._get(u + "/health") for u in (*self.prefill, *self.decode)))
        down = [u for u, (status, _) in zip((*self.prefill, *self.decode), statuses, strict=True) if status != 200]
        if down:
            return web.Response(status=503, text="workers not healthy: " + ", ".join(down))
        return web.Response(text="")

    async def models(self, request: web.Request) -> web.Response:
        status, doc = await self._get(self.decode[0] + "/v1/models")
        if status != 200 or doc is None:
            return error_response(502, f"decode worker {self.decode[0]} did not list its models", "BadGatewayError")
        return web.json_response(doc)

    async def version(self, request: web.Request) -> web.Response:
        from llmsweep import __version__

        return web.json_response({"version": __version__, "engine": SIM.id, "role": "router", "node": self.node,
                                  "tp": 0, "prefill": self.prefill, "decode": self.decode,
                                  "kv_transfer": self.kv_transfer, "routed": self.routed})


def _cached_tokens(usage: dict[str, Any]) -> int:
    """The prefill worker's prefix-cache hits from its usage block (`prompt_tokens_details.cached_tokens`; 0 when it
    gives none): what the client is told, as a real PD router reports the prefill side's hits."""
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, dict):
        return 0
    return max(int(details.get("cached_tokens") or 0), 0)


async def start_router(router: PDRouter, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start `router` on (host, port); returns the runner (call `cleanup()` to stop) and the bound port."""
    return await start_app(router.app, host, port)
