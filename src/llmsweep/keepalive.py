"""The one retry of a POST sent on a pooled keep-alive connection the server was closing as it arrived.

An engine's HTTP server closes a keep-alive connection idle for its timeout (uvicorn's `timeout_keep_alive`;
`engine_ids.SERVER_IDLE_KEEPALIVE_S`). llmsweep's clients of an engine keep idle connections for less
(`engine_ids.POOLED_KEEPALIVE_S`), and a server whose timeout is shorter still is covered here: a request that went
out on a pooled connection just as the server closed it fails before any byte of an answer, either as a clean close
(`Server disconnected`) or as a reset (the server's kernel resets a connection closed with the request unread, and
answers a request that reaches a closed socket with a reset). The server never read it, so it is sent again, once, on
a connection of its own (aiohttp retries only idempotent methods, and a POST is not). Nothing else is sent again: not
a new connection's failure (a server that is down stays the failure it is), not a request sent once more already.

What counts as "nothing of an answer came" is the caller's (`retryable`): the load client knows of every byte its
connection read (`client.transport`), the PD router only what aiohttp parsed of the response head (`router`). Both
use :func:`post_once_more` with a session whose trace hooks include :func:`mark_reused` and a second session that pools
nothing (`force_close`).
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

T = TypeVar("T")


@dataclass(slots=True, eq=False, kw_only=True)
class Sending:
    """One request's sends, as the trace hooks and :func:`post_once_more` see them: pass it as the request's
    `trace_request_ctx`."""

    reused: bool = False
    """The request went out on a pooled keep-alive connection (:func:`mark_reused`)."""
    retried: str | None = None
    """Sent again on a new connection: the words of the first send's failure (:func:`post_once_more`)."""


async def mark_reused(session: aiohttp.ClientSession, ctx: Any, params: aiohttp.TraceConnectionReuseconnParams) -> None:
    """aiohttp trace hook (`on_connection_reuseconn`: a pooled connection was taken for the request): the request may
    be sent again if that connection turns out closed (:func:`post_once_more`)."""
    sending = ctx.trace_request_ctx
    if isinstance(sending, Sending):
        sending.reused = True


UNANSWERED_RESETS = frozenset({errno.ECONNRESET, errno.EPIPE, None})
"""The resets of the race: a reset read or written, and aiohttp's failed write of the request to a transport already
closing (`Can not write request body`, no errno)."""


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
    given and `retryable(exc)` says nothing of an answer came; otherwise it is raised. The second send's failure is
    raised as it is."""
    try:
        return await send(session)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        if fresh is None or not sending.reused or sending.retried is not None or not retryable(exc):
            raise
        sending.retried = f"{type(exc).__name__}: {exc}"
    return await send(fresh)
