"""`keepalive.post_once_more`, the one retry the load client and the PD router share: which failures of a first send
are sent again on the session that pools nothing, and that it is once. Over loopback with both callers' servers:
tests/integration/test_client_keepalive.py and test_pd_router_faults.py."""

from __future__ import annotations

import asyncio
import errno
import time
from typing import Any, cast

import aiohttp
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from llmsweep.engine_ids import KEEPALIVE_RACE_S, POOLED_KEEPALIVE_S, SERVER_IDLE_KEEPALIVE_S
from llmsweep.keepalive import Sending, closed_unanswered, mark_reused, mark_sent, post_once_more

POOLED = cast(aiohttp.ClientSession, object())
FRESH = cast(aiohttp.ClientSession, object())


def _head() -> Any:
    from aiohttp.http_parser import RawResponseMessage
    return RawResponseMessage(version=aiohttp.HttpVersion11, code=200, reason="OK",
                              headers=CIMultiDictProxy(CIMultiDict()), raw_headers=(), should_close=False,
                              compression=None, upgrade=False, chunked=True)


@pytest.mark.parametrize(("exc", "unanswered"), [
    (aiohttp.ServerDisconnectedError(), True),  # a clean close with nothing of a head: its message is the bare text
    (aiohttp.ServerDisconnectedError(_head()), False),  # the status line and headers had come
    (aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer"), True),
    (aiohttp.ClientOSError(errno.EPIPE, "Broken pipe"), True),
    (aiohttp.ClientOSError("Can not write request body"), True),  # aiohttp's write to a closing transport: no errno
    (aiohttp.ClientOSError(errno.ETIMEDOUT, "Connection timed out"), False),
    (aiohttp.ClientConnectorError(aiohttp.client_reqrep.ConnectionKey(  # a failure to connect is no reused connection's
        "h", 1, False, True, None, None, None), OSError(errno.ECONNRESET, "reset")), False),
])
def test_a_close_or_reset_is_unanswered_only_without_a_head_and_never_a_failure_to_connect(
        exc: aiohttp.ClientError, unanswered: bool) -> None:
    assert closed_unanswered(exc) is unanswered


class Sender:
    """A `send` whose sends through each session fail with that session's error (none: answered), recorded."""

    def __init__(self, pooled: BaseException | None, fresh: BaseException | None = None) -> None:
        self.fails = {id(POOLED): pooled, id(FRESH): fresh}
        self.sends: list[tuple[str, str | None]] = []

    def __call__(self, sending: Sending) -> Any:
        async def send(session: aiohttp.ClientSession) -> str:
            which = "pooled" if session is POOLED else "fresh"
            self.sends.append((which, sending.retried))
            if (exc := self.fails[id(session)]) is not None:
                raise exc
            return which
        return send


def _post(sender: Sender, *, reused: bool, fresh: aiohttp.ClientSession | None = FRESH,
          retryable: bool = True, sent_ago: float | None = 0.0) -> tuple[Sending, str | BaseException]:
    sending = Sending(reused=reused, sent=0.0 if sent_ago is None else time.perf_counter() - sent_ago)
    try:
        got: str | BaseException = asyncio.run(post_once_more(sender(sending), POOLED, fresh, sending,
                                                              lambda exc: retryable))
    except Exception as exc:
        got = exc
    return sending, got


def test_a_pooled_connection_closed_unanswered_is_sent_again_once_on_the_fresh_session_with_the_first_words() -> None:
    sender = Sender(aiohttp.ServerDisconnectedError())
    sending, got = _post(sender, reused=True)
    assert got == "fresh"
    assert sending.retried == "ServerDisconnectedError: Server disconnected"
    # the second send is told it is one (the caller's own changes for it hang on that)
    assert sender.sends == [("pooled", None), ("fresh", "ServerDisconnectedError: Server disconnected")]


def test_the_second_sends_failure_is_raised_as_it_is_never_a_third_send() -> None:
    second = aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer")
    sender = Sender(aiohttp.ServerDisconnectedError(), second)
    _, got = _post(sender, reused=True)
    assert got is second
    assert [which for which, _ in sender.sends] == ["pooled", "fresh"]


@pytest.mark.parametrize("case", ["new connection", "not retryable", "no fresh session", "sent again already"])
def test_a_failure_is_raised_unsent_again_unless_a_pooled_connection_closed_unanswered(case: str) -> None:
    first = aiohttp.ServerDisconnectedError()
    sender = Sender(first)
    if case == "sent again already":
        sending = Sending(reused=True, retried="ServerDisconnectedError: Server disconnected")
        with pytest.raises(aiohttp.ServerDisconnectedError):
            asyncio.run(post_once_more(sender(sending), POOLED, FRESH, sending, lambda exc: True))
    else:
        sending, got = _post(sender, reused=case != "new connection", retryable=case != "not retryable",
                             fresh=None if case == "no fresh session" else FRESH)
        assert got is first
        assert sending.retried is None
    assert [which for which, _ in sender.sends] == ["pooled"]


def test_other_failures_pass_through_whatever_the_caller_would_retry() -> None:
    timeout = aiohttp.ServerTimeoutError("read timed out")
    sender = Sender(timeout)
    _, got = _post(sender, reused=True)
    assert got is timeout
    assert [which for which, _ in sender.sends] == ["pooled"]


def test_a_request_on_a_reused_connection_is_marked_by_the_trace_hook_and_only_a_sending_is() -> None:
    from types import SimpleNamespace

    sending = Sending()
    asyncio.run(mark_reused(POOLED, SimpleNamespace(trace_request_ctx=sending), None))  # type: ignore[arg-type]
    assert sending.reused is True
    other = SimpleNamespace(reused=False)
    asyncio.run(mark_reused(POOLED, SimpleNamespace(trace_request_ctx=other), None))  # type: ignore[arg-type]
    assert other.reused is False


def test_the_race_window_is_half_the_slack_between_the_servers_idle_timeout_and_the_clients() -> None:
    # one home: derived from the two idle timeouts (engine_ids), shorter than a worker that read the request and
    # died working on it 2 s later (tests/integration: test_client_keepalive, test_pd_router_faults)
    assert KEEPALIVE_RACE_S == (SERVER_IDLE_KEEPALIVE_S - POOLED_KEEPALIVE_S) / 2 == 1.5


@pytest.mark.parametrize("first", [aiohttp.ServerDisconnectedError(),
                                   aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer")])
def test_a_close_later_than_the_race_window_after_the_send_is_the_servers_and_never_sent_again(
        first: aiohttp.ClientError) -> None:
    """The keep-alive race happens at the send: a pooled connection closed or reset unanswered 2 s after the request
    was written is a server that read it and dropped the connection working on it; a second send would run it twice.
    It used to be sent again whenever it came."""
    sender = Sender(first)
    sending, got = _post(sender, reused=True, sent_ago=KEEPALIVE_RACE_S + 0.5)
    assert got is first
    assert sending.retried is None
    assert [which for which, _ in sender.sends] == ["pooled"]
    # the same failure at the send is the race
    sender = Sender(first)
    _, got = _post(sender, reused=True, sent_ago=0.0)
    assert got == "fresh"


def test_a_failure_to_write_the_request_is_sent_again_however_late() -> None:
    """A request still being written when its pooled connection failed (aiohttp's `Can not write request body`, the
    write's errno or none) was never had whole by the server, however long the write took."""
    for first in (aiohttp.ClientOSError(errno.ECONNRESET, "Can not write request body for http://h/v1/completions"),
                  aiohttp.ClientOSError("Can not write request body")):
        sender = Sender(first)
        sending, got = _post(sender, reused=True, sent_ago=KEEPALIVE_RACE_S + 5.0)
        assert got == "fresh", first
        assert sending.retried is not None


def test_a_send_never_stamped_cannot_be_timed_and_is_not_sent_again() -> None:
    """A caller without the `mark_sent` hook leaves the send untimed: whether its failure came at the send is
    unknown, so it is raised rather than risk running the request twice."""
    first = aiohttp.ServerDisconnectedError()
    sender = Sender(first)
    sending, got = _post(sender, reused=True, sent_ago=None)
    assert got is first and sending.retried is None


def test_the_send_is_stamped_by_its_trace_hook_and_a_second_send_keeps_the_first_ones_stamp() -> None:
    from types import SimpleNamespace

    sending = Sending()
    before = time.perf_counter()
    asyncio.run(mark_sent(POOLED, SimpleNamespace(trace_request_ctx=sending), None))
    assert before <= sending.sent <= time.perf_counter()
    stamped, sending.retried = sending.sent, "ServerDisconnectedError: Server disconnected"
    asyncio.run(mark_sent(FRESH, SimpleNamespace(trace_request_ctx=sending), None))
    assert sending.sent == stamped
