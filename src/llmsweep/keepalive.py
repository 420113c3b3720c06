"""The one retry of a POST sent on a pooled keep-alive connection the server was closing as it arrived.

An engine's HTTP server closes a keep-alive connection idle for its timeout (uvicorn's `timeout_keep_alive`;
`engine_ids.SERVER_IDLE_KEEPALIVE_S`). llmsweep's clients of an engine keep idle connections for less
(`engine_ids.POOLED_KEEPALIVE_S`), and a server whose timeout is shorter still is covered here: a request that went
out on a pooled connection just as the server closed it fails before any byte of an answer, either as a clean close
(`Server disconnected`) or as a reset (the server's kernel resets a connection closed with the request unread, and
answers a request that reaches a closed socket with a reset). The server never read it, so it is sent again, once, on
a connection of its own (aiohttp retries only idempotent methods, and a POST is not). The race happens at the send:
its failure comes while the request is being written or within `engine_ids.KEEPALIVE_RACE_S` of it (`Sending.sent`,
stamped by :func:`mark_sent`); a close or reset later than that is a server that had the request and dropped the
connection working on it, and sending it again would run it twice. Nothing else is sent again: not a new
connection's failure (a server that is down stays the failure it is), not a request sent once more already.

What counts as "nothing of an answer came" is the caller's (`retryable`): the load client knows of every byte its
connection read (`client.transport`), the PD router only what aiohttp parsed of the response head (`router`). Both
use :func:`post_once_more` with a session whose trace hooks include :func:`mark_reused` and :func:`mark_sent` (on
`on_request_headers_sent` and `on_request_chunk_sent`) and a second session that pools nothing (`force_close`).
"""

from __future__ import annotations

import errno
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from llmsweep.engine_ids import KEEPALIVE_RACE_S

T = TypeVar("T")


@dataclass(slots=True, eq=False, kw_only=True)
class Sending:
    """One request's sends, as the trace hooks and :func:`post_once_more` see them: pass it as the request's
    `trace_request_ctx`."""

    reused: bool = False
    """The request went out on a pooled keep-alive connection (:func:`mark_reused`)."""
    sent: float = 0.0
    """`time.perf_counter()` when the first send last handed a piece of the request (its headers, a chunk of its
    body) to its connection (:func:`mark_sent`; 0.0: none yet). A second send keeps the first one's stamp."""
    retried: str | None = None
    """Sent again on a new connection: the words of the first send's failure (:func:`post_once_more`)."""


async def mark_reused(session: aiohttp.ClientSession, ctx: Any, params: aiohttp.TraceConnectionReuseconnParams) -> None:
    """aiohttp trace hook (`on_connection_reuseconn`: a pooled connection was taken for the request): the request may
    be sent again if that connection turns out closed (:func:`post_once_more`)."""
    sending = ctx.trace_request_ctx
    if isinstance(sending, Sending):
        sending.reused = True


async def mark_sent(session: aiohttp.ClientSession, ctx: Any, params: Any) -> None:
    """aiohttp trace hook (`on_request_headers_sent`, then `on_request_chunk_sent`: a piece of the request goes to the
    connection): stamp `Sending.sent`, from which :func:`post_once_more` times a failure (and the load client its
    request's latencies). aiohttp buffers the headers and writes them with the body from a separate task, so on a busy
    loop the real write can trail `session.post` by milliseconds; that delay shows as the client's schedule lag, not
    as TTFT. A second send (`retried`) keeps the first one's stamp."""
    sending = ctx.trace_request_ctx
    if isinstance(sending, Sending) and sending.retried is None:
        sending.sent = time.perf_counter()


UNANSWERED_RESETS = frozenset({errno.ECONNRESET, errno.EPIPE, None})
"""The resets of the race: a reset read or written, and aiohttp's failed write of the request to a transport already
closing (`Can not write request body`, no errno)."""


WRITE_FAILED = "Can not write request body"
"""How aiohttp words a failure to write the request (a `ClientOSError`, with the errno of the write where there is one):
the request was still being written, so the server cannot have had it whole."""


def writing(exc: aiohttp.ClientError) -> bool:
    """Whether `exc` is aiohttp's failure to write the request (:data:`WRITE_FAILED`)."""
    return isinstance(exc, aiohttp.ClientOSError) and WRITE_FAILED in str(exc)


def closed_unanswered(exc: aiohttp.ClientError) -> bool:
    """Whether `exc`, raised while a request waited for its response head, is a close or a reset with no parsed part
    of a head: a clean close whose message is the bare text (else it carries the status line or headers that came), or
    a reset of reading or writing the connection (never a failure to connect)."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return isinstance(exc.message, str)
    return (isinstance(exc, aiohttp.ClientOSError) and not isinstance(exc, aiohttp.ClientConnectorError)
            and exc.errno in UNANSWERED_RESETS)


async def post_once_more(send: Callable[[aiohttp.ClientSession], Awaitable[T]], session: aiohttp.ClientSession,
                         fresh: aiohttp.ClientSession | None, sending: Sending,
                         retryable: Callable[[aiohttp.ClientError], bool]) -> T:
    """`send(session)`, and, where it failed as a pooled connection closed unanswered, `send(fresh)` once.

    `send` sends the request through the session it is given with `sending` as its `trace_request_ctx` (on the second
    call `sending.retried` is set: what the caller changes for a second send goes there). A failure is sent again
    only where the request went out on a pooled connection (`sending.reused`), was not sent again already, `fresh` is
    given, `retryable(exc)` says nothing of an answer came, and it came at the send: while the request was being
    written (:func:`writing`) or within `engine_ids.KEEPALIVE_RACE_S` of `sending.sent` (a later close is a server
    that had the request and dropped it working on it: the keep-alive race happens only at the send; a send never
    stamped by :func:`mark_sent` cannot be timed, and is not sent again); otherwise it is raised. The second send's
    failure is raised as it is."""
    try:
        return await send(session)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        if fresh is None or not sending.reused or sending.retried is not None or not retryable(exc):
            raise
        if not writing(exc) and not (sending.sent and time.perf_counter() - sending.sent <= KEEPALIVE_RACE_S):
            raise
        sending.retried = f"{type(exc).__name__}: {exc}"
    return await send(fresh)
