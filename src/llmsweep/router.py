"""llmsweep's prefill/decode router: the front door of a disaggregated deployment, whatever engine its workers run.

For each OpenAI request (`/v1/completions`, `/v1/chat/completions`) it picks a prefill and a decode worker (round
robin over each pool), has the prefill worker compute the prompt (one output token, not streamed), hands the decode
worker what the prefill worker says about the prompt's KV, and relays the decode worker's answer — streamed or whole —
with its status and headers (a streamed request still waiting for its answer after :data:`HEADERS_AFTER_S` gets status
200 and SSE headers then, as an engine answers a streamed request it queued; every failure names the worker that
failed; a request that says its client's limits, `engine_ids.TIMEOUT_HEADER` and `STALL_HEADER`, gets a 504 naming
the worker it waited on just before the client would give up on it itself). `/health` is 200 only while every worker
answers its own; `/v1/models` is the first decode worker's; `/version` says what the router is, which workers it
routes to and what it counted.

What the two legs carry is the *protocol* (:class:`PDProtocol`), one per kind of worker; the routing, the relay,
health and models are this module's, once for all of them. A protocol is chosen by name (:data:`PROTOCOLS`):

- ``sim``: the simulator's roles (`llmsweep.sim.router`), which learn the prompt's KV from llmsweep's own headers;
- ``vllm-nixl``: vLLM's P/D protocol (:class:`VllmNixl`), as its NIXL connector's workers speak it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from llmsweep import keepalive
from llmsweep.engine_ids import POOLED_KEEPALIVE_S, STALL_HEADER, TIMEOUT_HEADER, VLLM
from llmsweep.http_app import error_response, json_object, node_name, start_app

log = logging.getLogger(__name__)

PD_ROUTER_READY_LINE = "llmsweep PD router on http://"
"""What `llmsweep router --protocol vllm-nixl` logs once it listens (followed by `host:port`): its launch's readiness
marker, so that its readiness is its own process's, never a /health answered by whatever else holds its port."""

HEADERS_AFTER_S = 1.0
"""A streamed request's answer begins (status and headers) when the decode worker's does, or after this long, with
status 200 and SSE headers, whichever comes first: an engine answers a streamed request it accepts at once, then sends
its tokens once its prefill is done, and a client waits for a body with no deadline but its request timeout once the
headers came (llmsweep's does: only the request timeout bounds a request queued for its prefill). Behind the router the
headers waited for the prefill leg and the decode worker's, so a request whose prefill took longer than the client's
stall timeout (60 s by default) failed through the router where the same load served by one engine did not. A refusal
within it (a worker's validation: too long, unknown model) keeps its HTTP status; after it, every failure is an error
event of the stream, naming the worker."""
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}

STALLED_AFTER_S = 5.0
"""A worker that began its answer and has sent nothing more for this long when the client goes away is counted as
stalled (`abandoned`, as one that never began): longer than a healthy engine's gaps between tokens (a decode worker of
a disaggregated deployment computes no prompt between them), shorter than a client's stall timeout (llmsweep's: 60 s
by default). A client that goes away while the worker's tokens still flow (a run's end cancelling what is in flight)
is no worker's fault, and is not counted."""

GIVE_UP_LEAD_S = 1.0
"""How much sooner than the client (at most a tenth of its limit) the router gives up on a worker, where the request
says the client's limits (:data:`engine_ids.TIMEOUT_HEADER`, :data:`engine_ids.STALL_HEADER`): its 504 then reaches the
client, naming the worker, before the client's own timeout ends the request with nothing said of which worker hung."""

ROUTER_POLICY = "round_robin"
"""How the router picks each request's workers: the next of each pool in turn, whatever the load. Its `/version` says
it (`policy`), and a run records what the router said as the deployment's `router_policy`."""


_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"})


@dataclass(frozen=True)
class DecodeLeg:
    """What the decode worker is sent for one request, and how its answer is relayed."""

    data: bytes
    headers: dict[str, str]
    relay: Relay | None = None
    """How the decode worker's 200 answer is changed on its way to the client (None: relayed byte for byte)."""


class SentAgainFailed(aiohttp.ClientConnectionError):
    """A leg sent again on a new connection (:meth:`PDRouter.post`) failed before its head came too: its words are the
    second send's failure, then the first's (the pooled connection closed unanswered), as the load client words its
    own (`client.transport`), so the 502 says both."""


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

    policy = ROUTER_POLICY

    def __init__(self, prefill: list[str], decode: list[str], *, protocol: PDProtocol, kv_transfer: str | None = None,
                 health_timeout_s: float = 2.0, headers_after_s: float | None = None,
                 stalled_after_s: float = STALLED_AFTER_S) -> None:
        if not prefill or not decode:
            raise ValueError("a PD router needs at least one prefill and one decode worker")
        self.prefill = [u.rstrip("/") for u in prefill]
        self.decode = [u.rstrip("/") for u in decode]
        self.protocol = protocol
        self.kv_transfer = kv_transfer
        self.health_timeout_s = health_timeout_s
        self.headers_after_s = HEADERS_AFTER_S if headers_after_s is None else headers_after_s
        """How long a streamed request waits for its answer to begin before its status (200) and SSE headers are sent
        (:class:`_Answer`)."""
        self.stalled_after_s = stalled_after_s
        """How long a worker that began its answer must have sent nothing for a client going away to count against it
        (:data:`STALLED_AFTER_S`)."""
        self.node = node_name()
        self._next_prefill = itertools.cycle(range(len(self.prefill)))
        self._next_decode = itertools.cycle(range(len(self.decode)))
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        self.routed = 0
        """Requests sent on to a decode worker."""
        self.refused_no_handle = 0
        """Prefill answers (200) refused because they handed over no KV (:class:`NoKVHandle`)."""
        self.abandoned: dict[str, dict[str, int]] = {}
        """Requests whose client went away (or that the router gave up on just before the client's limit, answering
        504) while the router waited on a worker that had sent nothing of its answer, or that began it and then sent
        nothing for `stalled_after_s` or the client's stall timeout (a worker that hung or stalled mid-stream, or was
        too slow for the client's timeout), by pool (`prefill`, `decode`) and worker URL: each one dropped at that
        worker (:meth:`route`). A stall mid-stream used to go uncounted: the client's record said it timed out and
        nothing said which worker stopped."""
        self.retried: dict[str, dict[str, int]] = {}
        """Legs sent again on a new connection because the pooled one they went out on was closed or reset before any
        of the worker's answer came (its keep-alive timeout crossing the request: :meth:`post`), by pool (`prefill`,
        `decode`) and worker URL: each one the worker had not read, so a lost request saved, but a worker whose count
        climbs closes connections the router still holds (its idle timeout below `POOLED_KEEPALIVE_S`)."""
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
        # Pooled connections are kept below the workers' idle timeout (POOLED_KEEPALIVE_S); `post`'s one retry goes
        # on a connection of its own (the fresh session pools none).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        reuse = aiohttp.TraceConfig()
        reuse.on_connection_reuseconn.append(keepalive.mark_reused)
        reuse.on_request_headers_sent.append(keepalive.mark_sent)
        reuse.on_request_chunk_sent.append(keepalive.mark_sent)
        self._session = aiohttp.ClientSession(
            timeout=timeout, trace_configs=[reuse],
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=POOLED_KEEPALIVE_S))
        self._fresh = aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0, force_close=True))

    async def _close(self, app: web.Application) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()

    @contextlib.asynccontextmanager
    async def post(self, pool: str, worker: str, path: str, **kwargs: Any) -> AsyncIterator[aiohttp.ClientResponse]:
        """POST one leg to a worker of `pool` (`prefill`, `decode`) at `worker` + `path`: its response, once its status
        and headers came.

        A pooled connection the worker closed or reset before any of its answer's head was parsed, while the leg was
        being written or within `engine_ids.KEEPALIVE_RACE_S` of it, is a keep-alive connection the worker was closing
        as the request arrived: it is sent again, once, on a new connection (`keepalive.post_once_more`,
        `keepalive.closed_unanswered`). Nothing else is retried: not a new connection's failure (a worker that is down
        stays a 502 naming it), not a close or reset later than that (a worker that read the leg and dropped the
        connection working on it: sent again, it would run twice), not a close that came with a status line or
        headers (the worker had the request), not any failure once the head came (the body's are the relay's). The
        router does not see the bytes a connection read: a status line cut short before the close or reset is taken
        for nothing (uvicorn writes a head in one piece, so only a worker that died inside that write, within the
        window, is sent the leg again). Each leg sent again is counted against its worker (`retried`, in
        `/version`); a second send that fails before its head raises :class:`SentAgainFailed`, naming both sends'
        failures."""
        sending = keepalive.Sending()

        def send(session: aiohttp.ClientSession) -> Awaitable[aiohttp.ClientResponse]:
            if sending.retried is not None:
                by_url = self.retried.setdefault(pool, {})
                by_url[worker] = by_url.get(worker, 0) + 1
                log.info("%s worker %s closed a pooled connection as a request arrived on it (%s: its keep-alive "
                         "timeout): sent again on a new connection (%d so far to this worker)", pool, worker,
                         sending.retried, by_url[worker])
            return session.post(worker + path, trace_request_ctx=sending, **kwargs)

        try:
            resp = await keepalive.post_once_more(send, self.session, self._fresh, sending,
                                                  keepalive.closed_unanswered)
        except (aiohttp.ClientError, OSError) as exc:
            if sending.retried is None:
                raise
            raise SentAgainFailed(f"{exc} (its second send, on a new connection; the first went out on a pooled "
                                  f"connection the worker closed unanswered: {sending.retried})") from exc
        async with resp:
            yield resp

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "the router's session opens with the application"
        return self._session

    async def route(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json_object(raw)
        if isinstance(body, web.Response):
            return body
        answer = _Answer(request, self.headers_after_s if _streamed(body) else None)
        waiting = _Waiting(_Limits.of(request))
        try:
            async with asyncio.timeout_at(waiting.limits.deadline) as scope:
                waiting.scope = scope
                return await self._route(request, raw, body, answer, waiting)
        except TimeoutError:
            if not scope.expired():
                raise
            # the client's request timeout is about to end the request: the router ends it first, naming the worker
            # it waits on (a stream it relays gives up on its own: `_relay_stream`)
            message = waiting.gave_up()
            log.warning("%s (the client is answered 504)", message)
            self._dropped(waiting, message)
            return await answer.finish(error_response(504, message, "GatewayTimeoutError"))
        except asyncio.CancelledError:
            # the client went away (its handler is cancelled: `http_app.start_app`); leaving drops the worker's
            # request, and a worker that had not begun its answer is counted and named
            self._client_gone(waiting)
            raise
        finally:
            answer.close()

    def _client_gone(self, waiting: _Waiting) -> None:
        self._dropped(waiting, None)

    def _dropped(self, waiting: _Waiting, gave_up: str | None) -> None:
        """Count the request dropped at the worker `waiting` names, if it hung or stalled (`abandoned`): its client went
        away (`gave_up` None), or the router gave up on it before the client's limit (`gave_up`: the client's 504)."""
        if waiting.pool is None or waiting.url is None:
            return
        silent = waiting.silent()
        if waiting.answering and not waiting.stalled and silent < self.stalled_after_s:
            return  # its answer was flowing: not the worker's doing
        by_url = self.abandoned.setdefault(waiting.pool, {})
        by_url[waiting.url] = by_url.get(waiting.url, 0) + 1
        if gave_up is not None:  # said as the client's 504 (and logged with it)
            log.info("counted against %s (%d so far from this worker)", waiting.worker(), by_url[waiting.url])
            return
        said = (f"which had sent nothing more of its answer for {silent:.1f} s (stalled mid-stream)"
                if waiting.answering else "which had sent nothing of its answer")
        log.warning("a client went away after %.1f s waiting on %s worker %s, %s: its request there is dropped (%d so "
                    "far from this worker)", waiting.seconds(), waiting.pool, waiting.url, said, by_url[waiting.url])

    async def _route(self, request: web.Request, raw: bytes, body: dict[str, Any],
                     answer: _Answer, waiting: _Waiting) -> web.StreamResponse:
        p = next(self._next_prefill)
        prefill = self.prefill[p]
        decode = self.decode[next(self._next_decode)]
        headers = self.protocol.request_headers(request)
        try:
            waiting.on("prefill", prefill)
            async with self.post("prefill", prefill, request.path, json=self.protocol.prefill_body(body),
                                 headers=headers) as resp:
                got = await resp.read()
                waiting.heard()
                if resp.status != 200:  # the prefill worker's refusal (too long, unknown model) is the client's
                    return await answer.finish(worker_error(f"prefill worker {prefill}", resp.status, got))
            doc = json.loads(got)
            if not isinstance(doc, dict):
                raise TypeError("the answer is not a JSON object")
            leg = self.protocol.decode_leg(raw, body, doc, headers, p, prefill)
        except NoKVHandle as exc:
            self.refused_no_handle += 1
            log.warning("refused a prefill answer of %s: %s", prefill, exc)
            return await answer.finish(error_response(502, f"prefill worker {prefill} handed over no KV: {exc}",
                                                      "BadGatewayError"))
        except (aiohttp.ClientError, OSError, ValueError, KeyError, TypeError) as exc:
            return await answer.finish(error_response(502, f"prefill worker {prefill} failed: {exc}",
                                                      "BadGatewayError"))
        self.routed += 1
        try:
            waiting.on("decode", decode)
            async with self.post("decode", decode, request.path, data=leg.data, headers=leg.headers) as resp:
                if resp.status != 200:
                    return await answer.finish(worker_error(f"decode worker {decode}", resp.status,
                                                            await resp.read()))
                relayed = {k: v for k, v in resp.headers.items() if k.lower() not in _HOP_HEADERS}
                if resp.content_type != "text/event-stream":
                    # a whole answer is read whole before the client gets any of it: a worker that dies inside it
                    # is a 502 that names it, never a cut body under a 200
                    whole = await resp.read()
                    waiting.heard()
                    return await answer.finish(web.Response(
                        body=leg.relay.whole(whole) if leg.relay is not None else whole, headers=relayed))
                out = await answer.open(relayed)
                # from here on the client has its answer's status: a worker failing is said in the stream, a
                # client that went away ends it (its write error is not the worker's, so it is not caught below)
                if waiting.scope is not None:
                    waiting.scope.reschedule(None)  # the relay keeps the client's limits itself, between events
                with contextlib.suppress(aiohttp.ClientError, OSError):  # leaving drops the decode request
                    gave_up = await _relay_stream(request, resp, out, leg.relay, f"decode worker {decode}", waiting)
                    if gave_up is not None:
                        self._dropped(waiting, gave_up)
                return out
        except (aiohttp.ClientError, OSError) as exc:  # before the answer began (mid-stream: `_relay_stream`)
            return await answer.finish(error_response(502, f"decode worker {decode} failed: {exc}",
                                                      "BadGatewayError"))

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
        """The protocol's `/version` document, with what the router is and counts whatever the protocol: its
        `policy` (:data:`ROUTER_POLICY`); `abandoned`, the requests a client gave up on while a worker had not
        begun its answer or had stalled in it, and `retried`, the legs sent again on a new connection after a pooled
        one closed unanswered, each by pool and worker URL."""
        return web.json_response({**await self.protocol.version(self), "policy": self.policy,
                                  "abandoned": self.abandoned, "retried": self.retried})


_UPSTREAM_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


class _Waiting:
    """Which worker a request's handler waits on, since when, whether its answer has begun (a byte of a streamed
    body, or a whole answer read) and when its last bytes came: what :meth:`PDRouter.route` counts when the client
    goes away."""

    def __init__(self, limits: _Limits) -> None:
        self.limits = limits
        self.scope: asyncio.Timeout | None = None
        """The request's deadline while the router waits for a worker's answer to begin (:meth:`PDRouter.route`)."""
        self.pool: str | None = None
        self.url: str | None = None
        self.since = 0.0
        self.last = 0.0
        self.answering = False
        self.stalled = False
        """The router gave up on the worker for the client's stall timeout (:meth:`gave_up`)."""

    def on(self, pool: str, url: str) -> None:
        self.pool, self.url, self.answering, self.stalled = pool, url, False, False
        self.since = self.last = asyncio.get_running_loop().time()

    def heard(self) -> None:
        """Bytes of the worker's answer came (now)."""
        self.answering = True
        self.last = asyncio.get_running_loop().time()

    def seconds(self) -> float:
        return asyncio.get_running_loop().time() - self.since

    def silent(self) -> float:
        """Seconds since the worker last sent anything (since the leg went out, when it sent nothing)."""
        return asyncio.get_running_loop().time() - self.last

    def worker(self) -> str:
        return f"{self.pool} worker {self.url}"

    def gave_up(self, stalled: bool = False) -> str:
        """The words of the router giving up on the worker it waits on, before the client's limit (`stalled`: its
        stall timeout, mid-stream; else its request timeout)."""
        limits = self.limits
        self.stalled = stalled
        if stalled:
            return (f"{self.worker()} stalled mid-stream: it sent nothing for {self.silent():.1f} s, and the router "
                    f"gave up on it before the client's {limits.said_stall:g} s stall timeout ({STALL_HEADER})")
        doing = (f"was still answering ({self.silent():.1f} s since its last bytes)" if self.answering
                 else f"sent nothing of its answer in {self.seconds():.1f} s")
        return (f"{self.worker()} {doing}, and the router gave up on it before the client's "
                f"{limits.said_timeout:g} s request timeout ({TIMEOUT_HEADER})")


@dataclass(frozen=True)
class _Limits:
    """The client's limits as its request says them (:data:`engine_ids.TIMEOUT_HEADER`, `STALL_HEADER`; None: not
    said), and when the router gives up on the worker, :data:`GIVE_UP_LEAD_S` before the client would."""

    said_timeout: float | None = None
    said_stall: float | None = None
    deadline: float | None = None
    """The loop time the router gives up at, whatever the worker is doing."""
    stall: float | None = None
    """Seconds without a byte of a streamed answer once it began after which the router gives up."""

    @classmethod
    def of(cls, request: web.Request) -> _Limits:
        timeout, stall = (_seconds(request.headers.get(name)) for name in (TIMEOUT_HEADER, STALL_HEADER))
        now = asyncio.get_running_loop().time()
        return cls(said_timeout=timeout, said_stall=stall,
                   deadline=None if timeout is None else now + timeout - min(GIVE_UP_LEAD_S, timeout / 10),
                   stall=None if stall is None else stall - min(GIVE_UP_LEAD_S, stall / 10))


def _seconds(value: str | None) -> float | None:
    """A limit a request header says (seconds > 0); None when absent or not a number of seconds (it is a hint: a
    request with a malformed one is served as one without it)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 < seconds < float("inf") else None


async def _relay_stream(request: web.Request, resp: aiohttp.ClientResponse, out: web.StreamResponse,
                        relay: Relay | None, worker: str, waiting: _Waiting) -> str | None:
    """Relay a streamed (SSE) answer to the prepared `out` as it arrives: byte for byte (`relay` None), or its
    complete lines through `relay` (only a line's unfinished tail waits for the rest of it: an SSE event is read by
    its lines, so a client could read nothing of it earlier).

    A worker that fails mid-stream (it died, its connection was cut) is the client's failure, naming `worker`: where
    the stream stands between two events, one more event says so (`data: {"error": ...}`, then `data: [DONE]`, as
    vLLM ends a stream that failed), which a client records as the request's error; inside an event, nothing can be
    added that a client would read, so the client's connection is cut, as the worker's was. It used to be cut always,
    and the client's record said only that its connection was lost, never which worker failed. A client that goes
    away is not a worker's failure: its write error (or the handler's cancellation) ends the relay.

    Where the request says the client's limits (:class:`_Limits`), the relay gives up on the worker before the client
    would — nothing for the client's stall timeout once the body began, or its request timeout passed — and ends the
    stream as for a failure, with a 504 error event naming the worker (`_stream_failed`); returns those words then
    (None otherwise). One timer per request watches both (:class:`_Watch`): an `asyncio.timeout` around each read
    added about 38 us per read in a micro-benchmark (2026-12-07, a shared 2-core host), a timer set and cancelled for
    every relayed chunk."""
    tail = b""
    sent = b"\n\n"  # the last bytes the client was sent (none yet: at an event boundary)
    reader = resp.content
    watch = _Watch(reader, waiting)
    try:
        while True:
            try:
                chunk = await reader.readany()
            except _GaveUp as gave_up:
                message = waiting.gave_up(stalled=gave_up.stalled)
                await _stream_failed(request, out, message, at_boundary=not tail and _ends_event(sent), code=504,
                                     kind="GatewayTimeoutError")
                return message
            except _UPSTREAM_ERRORS as exc:
                await _stream_failed(request, out, f"{worker} failed mid-stream: {type(exc).__name__}: {exc}",
                                     at_boundary=not tail and _ends_event(sent))
                return None
            if not chunk:
                break
            waiting.heard()
            if not watch.stalls:
                watch.began()
            if relay is None:
                data = chunk
            else:
                tail += chunk
                cut = tail.rfind(b"\n") + 1
                if not cut:
                    continue
                data, tail = relay.stream(tail[:cut]), tail[cut:]
            if data:
                await out.write(data)
                sent = (sent + data)[-4:]
    finally:
        watch.cancel()
    if tail:
        await out.write(relay.stream(tail) if relay is not None else tail)
    await out.write_eof()
    return None


class _GaveUp(Exception):
    """The relay's read, woken by :class:`_Watch`: the client's limit is about to pass (`stalled`: its stall
    timeout; else its request timeout)."""

    def __init__(self, stalled: bool) -> None:
        super().__init__("the router gave up on the worker before the client's limit")
        self.stalled = stalled


class _Watch:
    """One timer over a streamed answer's relay that fails its pending read (:class:`_GaveUp`) when the client's
    limits (:class:`_Limits`) are about to pass: the request's deadline, or — once the worker's answer began
    (:meth:`began`) — its stall time since the worker's last bytes (`_Waiting.last`). It wakes at the earlier of the
    two and sets itself again while bytes keep coming, so a relayed chunk costs a clock read (`_Waiting.heard`), not
    a timer."""

    def __init__(self, reader: aiohttp.StreamReader, waiting: _Waiting) -> None:
        self.reader, self.waiting = reader, waiting
        self.loop = asyncio.get_running_loop()
        self.handle: asyncio.TimerHandle | None = None
        self.received, self.moved = reader.total_bytes, 0.0
        """The worker's bytes the reader had when the timer last looked, and when it saw them grow: bytes that came
        while the relay waited on the client (its write) are no stall of the worker's."""
        self.stalls = False
        """Whether the stall limit applies: the answer began (a client waits for its first bytes with no stall
        limit once the headers came)."""
        self._arm()

    def _stall_due(self) -> float | None:
        stall = self.waiting.limits.stall
        return max(self.waiting.last, self.moved) + stall if self.stalls and stall is not None else None

    def _arm(self) -> None:
        dues = [d for d in (self.waiting.limits.deadline, self._stall_due()) if d is not None]
        self.handle = self.loop.call_at(min(dues), self._fire) if dues else None

    def _fire(self) -> None:
        now = self.loop.time()
        if self.reader.total_bytes != self.received:
            self.received, self.moved = self.reader.total_bytes, now
        deadline, stall_due = self.waiting.limits.deadline, self._stall_due()
        if deadline is not None and now >= deadline:
            self.reader.set_exception(_GaveUp(stalled=False))
        elif stall_due is not None and now >= stall_due:
            self.reader.set_exception(_GaveUp(stalled=True))
        else:
            self._arm()  # bytes came since it was set

    def began(self) -> None:
        """The worker's answer began: its stall limit applies from now on."""
        self.stalls = True
        if self.waiting.limits.stall is not None:
            self.cancel()
            self._arm()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


def _ends_event(sent: bytes) -> bool:
    return sent.endswith((b"\n\n", b"\r\n\r\n", b"\r\r"))


async def _stream_failed(request: web.Request, out: web.StreamResponse, message: str, *, at_boundary: bool,
                         code: int = 502, kind: str = "BadGatewayError") -> None:
    log.warning("%s (%s)", message, "the client is sent an error event" if at_boundary
                else "the client's stream is cut: it stopped inside an event")
    if at_boundary:
        event = json.dumps({"error": {"message": message, "type": kind, "code": code}})
        await out.write(f"data: {event}\n\ndata: [DONE]\n\n".encode())
        await out.write_eof()
    elif request.transport is not None:
        request.transport.abort()  # the client reads a connection lost before its body ended


def worker_error(worker: str, status: int, body: bytes) -> web.Response:
    """A worker's non-200 answer as the client gets it: its status, with `worker` named in its error message.

    The error body vLLM and SGLang send (`error.message`, and the top-level `message` of SGLang's and older vLLM's)
    keeps its shape, its message prefixed with the worker (the words a client matches, e.g. a context overflow's,
    stay); any other body (plain text, a proxy's page, FastAPI's `detail`) becomes the OpenAI error body quoting it.
    It was relayed as it came, so a client's record of a refusal or a 5xx never said which worker answered it."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict):
        named = False
        error = doc.get("error")
        for holder in (error, doc):
            if isinstance(holder, dict) and isinstance(holder.get("message"), str):
                holder["message"] = f"{worker}: {holder['message']}"
                named = True
        if named:
            return web.json_response(doc, status=status)
    text = body.decode("utf-8", errors="replace").strip()
    kind = "NotFoundError" if status == 404 else "BadRequestError" if status < 500 else "InternalServerError"
    return error_response(status, f"{worker} answered HTTP {status}" + (f": {text[:2000]}" if text else ""), kind)


def _streamed(body: dict[str, Any]) -> bool:
    """Whether the client asked for a streamed answer (`stream` as an engine reads it: true, 1, "true", "yes", ...; a
    value no engine reads as a boolean is not, and the worker refuses it with its status)."""
    flag = body.get("stream")
    if isinstance(flag, bool):
        return flag
    if isinstance(flag, int | float):
        return flag == 1
    return isinstance(flag, str) and flag.strip().lower() in ("1", "true", "t", "yes", "y", "on")


class _Answer:
    """The client's answer to one request, whose status and headers the router sends once: the decode worker's, when
    its answer begins (or a failure's, as a whole response), or, for a streamed request still waiting after
    `headers_after_s` (:data:`HEADERS_AFTER_S`), status 200 with SSE headers; after that a failure is the stream's
    error event (`data: {"error": ...}`, then `data: [DONE]`) and a whole answer is written into it as it came."""

    def __init__(self, request: web.Request, headers_after_s: float | None) -> None:
        self.request = request
        self.out: web.StreamResponse | None = None
        self._lock = asyncio.Lock()
        self._settled = False
        self._task: asyncio.Task[None] | None = None
        self._timer = (asyncio.get_running_loop().call_later(headers_after_s, self._fire)
                       if headers_after_s is not None else None)

    def _fire(self) -> None:
        self._task = asyncio.ensure_future(self._commit())

    async def _commit(self) -> None:
        with contextlib.suppress(aiohttp.ClientError, OSError):  # a client gone meanwhile: the handler ends it
            async with self._lock:
                if self.out is None and not self._settled:
                    out = web.StreamResponse(status=200, headers=_SSE_HEADERS)
                    await out.prepare(self.request)
                    self.out = out

    def _settle(self) -> None:
        """The handler knows its answer: the timer no longer opens the stream."""
        self._settled = True
        if self._timer is not None:
            self._timer.cancel()

    async def open(self, headers: Mapping[str, str]) -> web.StreamResponse:
        """The stream the decode worker's streamed answer is relayed into: opened with its headers, or the one the
        timer opened."""
        self._settle()
        async with self._lock:
            if self.out is None:
                out = web.StreamResponse(status=200, headers=headers)
                await out.prepare(self.request)
                self.out = out
            return self.out

    async def finish(self, response: web.Response) -> web.StreamResponse:
        """`response` (a failure, or a whole answer) as the client gets it: itself while nothing was sent, else said
        in the open stream (a failure as its error event; a 200's body as it came)."""
        self._settle()
        async with self._lock:
            out = self.out
        if out is None:
            return response
        body = response.body if isinstance(response.body, bytes) else b""
        with contextlib.suppress(aiohttp.ClientError, OSError):
            if response.status == 200:
                await out.write(body)
            else:
                log.warning("a failure after the stream's headers went out, sent as its error event: %s",
                            body[:300].decode("utf-8", errors="replace"))
                await out.write(b"data: " + _one_line(body) + b"\n\ndata: [DONE]\n\n")
            await out.write_eof()
        return out

    def close(self) -> None:
        self._settle()
        if self._task is not None and not self._task.done():
            self._task.cancel()


def _one_line(body: bytes) -> bytes:
    """An error body as one SSE data line (a JSON document written again compact, else quoted as the message)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        doc = {"error": {"message": body.decode("utf-8", errors="replace"), "type": "BadGatewayError", "code": 502}}
    return json.dumps(doc, ensure_ascii=False).encode()


async def start_router(router: PDRouter, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start `router` on (host, port); returns the runner (call `cleanup()` to stop) and the bound port."""
    return await start_app(router.app, host, port)


class VllmNixl(PDProtocol):
    """vLLM's P/D protocol, as the workers of its NIXL connector (`--kv-transfer-config` NixlConnector) speak it and
    vLLM's own NIXL test proxy drives them.

    - Both legs carry one `X-Request-Id` (the client's, else a new one) and the client's `Authorization`.
    - Prefill leg: the client's body asking for a remote decode (`kv_transfer_params` with `do_remote_decode` true and
      no remote blocks yet), one output token (`max_tokens`, and `max_completion_tokens` when the client set it), not
      streamed, without what a prefill-only request does not take (`stream_options`, `min_tokens`,
      `min_completion_tokens`).
    - The prefill worker's answer carries the KV handle, its top-level `kv_transfer_params` (the remote engine id,
      block ids, host, port, ...). An answer without one, or with no blocks in it, is refused with a 502 and counted:
      handed no KV, the decode worker would compute the prompt again itself, and the result would be an aggregated
      run measured under a disaggregated label.
    - Decode leg: the client's body as it came, with the handle as its `kv_transfer_params`; its answer is relayed
      with its status and content type, streamed or whole, byte for byte but for one number (:class:`_CachedTokens`).
    """

    name = "vllm-nixl"
    ready_line = PD_ROUTER_READY_LINE
    _DROPPED = ("stream_options", "min_tokens", "min_completion_tokens")

    def __init__(self) -> None:
        self.kv_handles = 0
        """KV handles passed from a prefill worker's answer to a decode worker."""
        self.prefill_engines: dict[str, int] = {}
        """Handles passed, by the prefill engine that gave them (`remote_engine_id`)."""

    def request_headers(self, request: web.Request) -> dict[str, str]:
        headers = {"X-Request-Id": request.headers.get("X-Request-Id") or str(uuid.uuid4())}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        return headers

    def prefill_body(self, body: dict[str, Any]) -> dict[str, Any]:
        first = {k: v for k, v in body.items() if k not in self._DROPPED}
        first["kv_transfer_params"] = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                                       "remote_block_ids": None, "remote_host": None, "remote_port": None}
        first["stream"] = False
        first["max_tokens"] = 1
        if "max_completion_tokens" in first:
            first["max_completion_tokens"] = 1
        return first

    def decode_leg(self, raw: bytes, body: dict[str, Any], answer: dict[str, Any], headers: dict[str, str],
                   worker: int, url: str) -> DecodeLeg:
        params = answer.get("kv_transfer_params")
        if not isinstance(params, dict) or not params:
            raise NoKVHandle("its answer has no kv_transfer_params (does it run with --kv-transfer-config "
                             "'{\"kv_connector\":\"NixlConnector\",...}'?); the decode worker would compute the "
                             "prompt again")
        if not _has_blocks(params.get("remote_block_ids")):
            raise NoKVHandle(f"its kv_transfer_params name no KV blocks (remote_block_ids "
                             f"{params.get('remote_block_ids')!r}); the decode worker would compute the prompt again")
        self.kv_handles += 1
        engine = str(params.get("remote_engine_id"))
        self.prefill_engines[engine] = self.prefill_engines.get(engine, 0) + 1
        return DecodeLeg(json.dumps({**body, "kv_transfer_params": params}).encode(),
                         {**headers, "Content-Type": "application/json"}, _CachedTokens(prompt_cached_tokens(answer)))

    async def version(self, router: PDRouter) -> dict[str, Any]:
        from llmsweep import __version__

        # "version" is the engine's, as the first decode worker says it (None when it does not): what a run records
        # as the engine version its front door reported. The router's own is "router_version".
        _, engine = await router.get(router.decode[0] + "/version")
        return {"version": engine.get("version") if isinstance(engine, dict) else None, "engine": VLLM.id,
                "router": "llmsweep", "router_version": __version__, "protocol": self.name, "role": "router",
                "node": router.node, "tp": 0, "prefill": router.prefill, "decode": router.decode,
                "kv_transfer": router.kv_transfer, "routed": router.routed, "kv_handles": self.kv_handles,
                "refused_no_handle": router.refused_no_handle, "prefill_engines": self.prefill_engines}


def _has_blocks(block_ids: Any) -> bool:
    """Whether a handle's `remote_block_ids` name at least one block (a list of ids, or one list per KV-cache group)."""
    if not isinstance(block_ids, list) or not block_ids:
        return False
    return any(group for group in block_ids) if all(isinstance(g, list) for g in block_ids) else True


def prompt_cached_tokens(answer: dict[str, Any]) -> int:
    """The prefill worker's prefix-cache hits for the prompt (`usage.prompt_tokens_details.cached_tokens`).

    Absent (vLLM reports the details only with `--enable-prompt-tokens-details`) or null, it is 0: the decode
    worker's own count is never the right one (vLLM's decode counts the KV that arrived by transfer as cached), and
    a prefill worker that says nothing of its cache is counted as having found nothing in it."""
    usage = answer.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and cached > 0 else 0


_CACHED_TOKENS_KEY = b'"cached_tokens"'
_CACHED_TOKENS_VALUE = re.compile(rb'"cached_tokens"\s*:\s*(-?\d+|null)')


class _CachedTokens(Relay):
    """The decode worker's answer with the prompt's cached tokens the prefill worker's.

    vLLM's decode worker reports the prompt tokens whose KV arrived from the prefill worker as cached
    (`usage.prompt_tokens_details.cached_tokens`); a transfer is not a cache hit, so the client is told the prefill
    worker's prefix-cache hits instead. Only that number changes: every other byte (of a streamed answer, every
    other line: the usage chunk is the only one with the field) is relayed as the decode worker sent it."""

    def __init__(self, cached_tokens: int) -> None:
        self.cached_tokens = cached_tokens

    def stream(self, lines: bytes) -> bytes:
        if _CACHED_TOKENS_KEY not in lines:  # every chunk but the usage chunk: as it came
            return lines
        out = []
        for line in lines.splitlines(keepends=True):
            if line.startswith(b"data:") and _CACHED_TOKENS_KEY in line:
                end = len(line.rstrip(b"\r\n"))
                line = b"data:" + self.whole(line[5:end]) + line[end:]
            out.append(line)
        return b"".join(out)

    def whole(self, body: bytes) -> bytes:
        """`body`, one JSON document, with `usage.prompt_tokens_details.cached_tokens` set; as it came when it has
        no such field. The number is replaced where it stands; only if that cannot be done unambiguously is the
        document written again (compact, as vLLM writes it)."""
        if _CACHED_TOKENS_KEY not in body:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        usage = doc.get("usage") if isinstance(doc, dict) else None
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        if not isinstance(details, dict) or "cached_tokens" not in details or details["cached_tokens"] == \
                self.cached_tokens:
            return body
        details["cached_tokens"] = self.cached_tokens
        for match in _CACHED_TOKENS_VALUE.finditer(body):
            edited = body[:match.start(1)] + str(self.cached_tokens).encode() + body[match.end(1):]
            if json.loads(edited) == doc:
                return edited
        lead = body[:len(body) - len(body.lstrip())]
        return lead + json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def _sim_protocol() -> PDProtocol:
    from llmsweep.sim.router import SimProtocol  # the simulator's own room

    return SimProtocol()


PROTOCOLS: Mapping[str, Callable[[], PDProtocol]] = {"vllm-nixl": VllmNixl, "sim": _sim_protocol}
"""The protocols `llmsweep router --protocol` takes, by name."""


def protocol_named(name: str) -> PDProtocol:
    """The protocol called `name` (a ValueError naming the known ones otherwise)."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown PD router protocol {name!r}; known: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]()
