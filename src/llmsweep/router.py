"""llmsweep's prefill/decode router: the front door of a disaggregated deployment, whatever engine its workers run.

For each OpenAI request (`/v1/completions`, `/v1/chat/completions`) it picks a prefill and a decode worker (round
robin over each pool), has the prefill worker compute the prompt (one output token, not streamed), hands the decode
worker what the prefill worker says about the prompt's KV, and relays the decode worker's answer — streamed or whole —
with its status and headers. `/health` is 200 only while every worker answers its own; `/v1/models` is the first
decode worker's; `/version` says what the router is, which workers it routes to and what it counted.

What the two legs carry is the *protocol* (:class:`PDProtocol`), one per kind of worker; the routing, the relay,
health and models are this module's, once for all of them. A protocol is chosen by name (:data:`PROTOCOLS`):

- ``sim``: the simulator's roles (`llmsweep.sim.router`), which learn the prompt's KV from llmsweep's own headers;
- ``vllm-nixl``: vLLM's P/D protocol (:class:`VllmNixl`), as its NIXL connector's workers speak it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from llmsweep.sim.http import error_response, json_object, start_app
from llmsweep.sim.roles import node_name

log = logging.getLogger(__name__)

_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"})


@dataclass(frozen=True)
class DecodeLeg:
    """What the decode worker is sent for one request, and how its answer is relayed."""

    data: bytes
    headers: dict[str, str]


class NoKVHandle(Exception):
    """A prefill worker answered 200 but handed over nothing the decode worker could pull the prompt's KV with."""


class PDProtocol(ABC):
    """What a PD router's two legs carry for one kind of worker."""

    name: str
    """The name `llmsweep router --protocol` takes."""
    ready_line: str
    """What the router logs once it listens (its launch's readiness marker), followed by `host:port`."""

    def request_headers(self, request: web.Request) -> dict[str, str]:
        """Headers both legs of this request carry (none by default)."""
        return {}

    @abstractmethod
    def prefill_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """The prefill leg's body, from the client's."""

    @abstractmethod
    def decode_leg(self, raw: bytes, body: dict[str, Any], answer: dict[str, Any], headers: dict[str, str],
                   worker: int, url: str) -> DecodeLeg:
        """The decode leg, from the client's request (`raw`, parsed as `body`), the prefill worker's 200 answer
        (`answer`), the headers both legs carry, and which prefill worker answered (its index and URL).
        Raises KeyError/ValueError/TypeError for an answer it cannot read (a 502), NoKVHandle for one that hands over
        no KV (a 502 the router counts)."""

    def relay(self, leg: DecodeLeg) -> Relay | None:
        """How the decode worker's 200 answer is changed on its way to the client (None: relayed byte for byte)."""
        return None

    @abstractmethod
    async def version(self, router: PDRouter) -> dict[str, Any]:
        """The router's `/version` document."""


class Relay(ABC):
    """Changes a decode worker's 200 answer on its way to the client."""

    @abstractmethod
    def stream(self, lines: bytes) -> bytes:
        """Complete lines of a streamed (SSE) answer, newlines included, as the client is to read them."""

    @abstractmethod
    def whole(self, body: bytes) -> bytes:
        """A whole (not streamed) answer, as the client is to read it."""


class PDRouter:
    """Round-robin prefill/decode routing over HTTP for one protocol; one aiohttp session shared by every request."""

    def __init__(self, prefill: list[str], decode: list[str], *, protocol: PDProtocol, kv_transfer: str | None = None,
                 health_timeout_s: float = 2.0) -> None:
        if not prefill or not decode:
            raise ValueError("a PD router needs at least one prefill and one decode worker")
        self.prefill = [u.rstrip("/") for u in prefill]
        self.decode = [u.rstrip("/") for u in decode]
        self.protocol = protocol
        self.kv_transfer = kv_transfer
        self.health_timeout_s = health_timeout_s
        self.node = node_name()
        self._next_prefill = itertools.cycle(range(len(self.prefill)))
        self._next_decode = itertools.cycle(range(len(self.decode)))
        self._session: aiohttp.ClientSession | None = None
        self.routed = 0
        """Requests sent on to a decode worker."""
        self.refused_no_handle = 0
        """Prefill answers (200) refused because they handed over no KV (:class:`NoKVHandle`)."""
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
        headers = self.protocol.request_headers(request)
        try:
            async with self.session.post(prefill + request.path, json=self.protocol.prefill_body(body),
                                         headers=headers) as resp:
                answer = await resp.read()
                if resp.status != 200:  # the prefill worker's refusal (too long, unknown model) is the client's
                    return web.Response(body=answer, status=resp.status, content_type=resp.content_type)
            doc = json.loads(answer)
            if not isinstance(doc, dict):
                raise TypeError("the answer is not a JSON object")
            leg = self.protocol.decode_leg(raw, body, doc, headers, p, prefill)
        except NoKVHandle as exc:
            self.refused_no_handle += 1
            log.warning("refused a prefill answer of %s: %s", prefill, exc)
            return error_response(502, f"prefill worker {prefill} handed over no KV: {exc}", "BadGatewayError")
        except (aiohttp.ClientError, OSError, ValueError, KeyError, TypeError) as exc:
            return error_response(502, f"prefill worker {prefill} failed: {exc}", "BadGatewayError")
        self.routed += 1
        out: web.StreamResponse | None = None
        try:
            async with self.session.post(decode + request.path, data=leg.data, headers=leg.headers) as resp:
                out = web.StreamResponse(status=resp.status, headers={
                    k: v for k, v in resp.headers.items() if k.lower() not in _HOP_HEADERS})
                await out.prepare(request)
                relay = self.protocol.relay(leg) if resp.status == 200 else None
                if relay is None:
                    async for chunk in resp.content.iter_any():
                        await out.write(chunk)
                elif resp.content_type == "text/event-stream":
                    await _relay_lines(resp, out, relay)
                else:
                    await out.write(relay.whole(await resp.read()))
                await out.write_eof()
                return out
        except (aiohttp.ClientError, OSError) as exc:
            if out is None:
                return error_response(502, f"decode worker {decode} failed: {exc}", "BadGatewayError")
            raise  # mid-stream: the client sees a cut stream, as it would from a real router

    async def get(self, url: str) -> tuple[int, Any]:
        """GET `url` within the health timeout: its status and JSON body (None when not JSON; status 0: no answer)."""
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
        statuses = await asyncio.gather(*(self.get(u + "/health") for u in (*self.prefill, *self.decode)))
        down = [u for u, (status, _) in zip((*self.prefill, *self.decode), statuses, strict=True) if status != 200]
        if down:
            return web.Response(status=503, text="workers not healthy: " + ", ".join(down))
        return web.Response(text="")

    async def models(self, request: web.Request) -> web.Response:
        status, doc = await self.get(self.decode[0] + "/v1/models")
        if status != 200 or doc is None:
            return error_response(502, f"decode worker {self.decode[0]} did not list its models", "BadGatewayError")
        return web.json_response(doc)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response(await self.protocol.version(self))


async def _relay_lines(resp: aiohttp.ClientResponse, out: web.StreamResponse, relay: Relay) -> None:
    """Relay a streamed answer as it arrives, its complete lines through `relay`; only a line's unfinished tail waits
    for the rest of it (an SSE event is read by its lines, so a client could read nothing of it earlier)."""
    tail = b""
    async for chunk in resp.content.iter_any():
        tail += chunk
        cut = tail.rfind(b"\n") + 1
        if cut:
            lines, tail = tail[:cut], tail[cut:]
            await out.write(relay.stream(lines))
    if tail:
        await out.write(relay.stream(tail))


async def start_router(router: PDRouter, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start `router` on (host, port); returns the runner (call `cleanup()` to stop) and the bound port."""
    return await start_app(router.app, host, port)


def _sim_protocol() -> PDProtocol:
    from llmsweep.sim.router import SimProtocol  # the simulator's own room

    return SimProtocol()


PROTOCOLS: Mapping[str, Callable[[], PDProtocol]] = {"sim": _sim_protocol}
"""The protocols `llmsweep router --protocol` takes, by name."""


def protocol_named(name: str) -> PDProtocol:
    """The protocol called `name` (a ValueError naming the known ones otherwise)."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown PD router protocol {name!r}; known: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]()
