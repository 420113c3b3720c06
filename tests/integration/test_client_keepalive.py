"""A keep-alive connection the server closes as a request arrives on it: the client's race with uvicorn's idle timeout.

vLLM, SGLang and TensorRT-LLM serve through uvicorn, which closes a connection idle for `timeout_keep_alive` seconds
(5 by default; vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE). A request the client sends on a pooled connection the server is
closing at that instant fails before any byte of an answer (`Server disconnected`): a failed request in records.jsonl
though the server never saw it. The client keeps idle connections for less than that
(`engine_ids.POOLED_KEEPALIVE_S`) and sends such a request again, once, on a new connection; nothing else is retried.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.workloads import chat_spec

from llmsweep.client import Endpoint, RunOptions, run_benchmark
from llmsweep.workload.base import LaneProgram, Send, Sleep, Workload


class IdleClosingServer:
    """A streaming chat server (a thread with its own loop) that closes a keep-alive connection idle for
    `idle_close_s` at the worst moment, as uvicorn closes one idle for its `timeout_keep_alive`: just as the next
    request on it arrives, which it then never answers (made deterministic: a request that arrives on a connection
    idle that long is closed unanswered, as if the close had crossed it on the wire). `close_how`: "fin", a clean
    close (what a client sees when the server's close reached it first), or "reset" (a close with the request unread:
    the kernel resets the connection). `unanswered_from`: from that many answered requests on, every request is closed
    unanswered, on any connection (a failing server). `down_after`: once it answered that many requests, the server
    stops listening, and the next request on an open connection is closed unanswered (a server that went down).
    `cut_reused`: a request on a reused connection gets part of an answer, then the connection is closed as
    `close_how` says (an answer that began and was cut): "status", the first bytes of its status line; "token", its
    head and first token. `close_after_s`: how long a request to be closed unanswered waits for its close
    (a slow close, so that a test can tell the two sends' times apart). `dies_working_s`: a request on a reused
    connection is read whole, and that long after, its connection is closed as `close_how` says, unanswered (a server
    that had the request and died working on it)."""

    def __init__(self, idle_close_s: float, *, close_how: str = "fin", unanswered_from: int | None = None,
                 down_after: int | None = None, cut_reused: str | None = None, close_after_s: float = 0.0,
                 dies_working_s: float | None = None) -> None:
        self.idle_close_s, self.close_how, self.close_after_s = idle_close_s, close_how, close_after_s
        self.dies_working_s = dies_working_s
        self.unanswered_from, self.down_after, self.cut_reused = unanswered_from, down_after, cut_reused
        self.connections = 0
        self.requests = 0  # request heads read, answered or not
        self.answered = 0
        self.closed_unanswered = 0
        self.cut = 0
        self.arrived: list[float] = []  # the time.time() each request head was read
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.url = ""

    def __enter__(self) -> IdleClosingServer:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result()
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _close(self, writer: asyncio.StreamWriter, reset: bool) -> None:
        if reset:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        served_here = 0
        reset = False
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests += 1
                self.arrived.append(time.time())
                failing = self.unanswered_from is not None and self.answered >= self.unanswered_from
                down = self.down_after is not None and self.answered >= self.down_after
                if failing or down or (served_here and loop.time() - idle_since >= self.idle_close_s):
                    self.closed_unanswered += 1
                    reset = self.close_how == "reset"
                    await asyncio.sleep(self.close_after_s)
                    return
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
                body = json.loads(await reader.readexactly(length))
                reset = self.close_how == "reset"
                if self.dies_working_s is not None and served_here:
                    self.closed_unanswered += 1
                    await asyncio.sleep(self.dies_working_s)
                    return
                if self.cut_reused == "status" and served_here:
                    writer.write(b"HTTP/1.1 2")
                    await writer.drain()
                    await asyncio.sleep(0.05)  # the client reads it before the close
                    self.cut += 1
                    return
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                tokens = body["max_tokens"]
                for i in range(tokens):
                    last = i == tokens - 1
                    writer.write(_frame({"id": "x", "choices": [{"index": 0, "delta": {"content": "tok "},
                                                                 "finish_reason": "length" if last else None}]}))
                    await writer.drain()
                    if self.cut_reused == "token" and served_here:
                        await asyncio.sleep(0.05)
                        self.cut += 1
                        return
                writer.write(_frame({"id": "x", "choices": [],
                                     "usage": {"prompt_tokens": 15, "completion_tokens": tokens}}))
                writer.write(_frame("[DONE]") + b"0\r\n\r\n")
                await writer.drain()
                self.answered += 1
                served_here += 1
                if self.down_after is not None and self.answered >= self.down_after and self._server is not None:
                    self._server.close()  # no new connection is accepted from now on
                idle_since = loop.time()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self._close(writer, reset)


def _frame(event: dict[str, Any] | str) -> bytes:
    data = b"data: " + (event.encode() if isinstance(event, str) else json.dumps(event).encode()) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


class PausingWorkload(Workload):
    """One lane: `turns` requests of 3 tokens, `think_s` apart (an agentic lane's think time between turns)."""

    name = "pausing"

    def __init__(self, turns: int, think_s: float) -> None:
        self.turns, self.think_s = turns, think_s

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        yield self._program(lane)

    def _program(self, lane: int) -> LaneProgram:
        for i in range(self.turns):
            if i:
                yield Sleep(self.think_s)
            yield Send(chat_spec(lane, i, max_tokens=3))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


def _run(url: str, out: Path, turns: int, think_s: float, **options: Any) -> tuple[list[dict[str, Any]], Any]:
    res = run_benchmark(PausingWorkload(turns, think_s), Endpoint(base_url=url, model="m", metrics_url=""),
                        RunOptions(concurrency=1, max_failure_ratio=1.0, timeout_s=30, stall_timeout_s=5, **options),
                        out)
    recs = sorted((json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()),
                  key=lambda r: r["request_index"])
    return recs, res


@pytest.mark.parametrize("close_how", ["fin", "reset"])
@pytest.mark.parametrize("stamp_reads", ["kernel", "protocol"])
def test_a_pooled_connection_the_server_closes_as_a_request_arrives_is_sent_again_on_a_new_one(
        tmp_path: Path, stamp_reads: str, close_how: str) -> None:
    """The server closes the idle connection just as the lane's next turn goes out on it, unanswered: the request is
    sent again once on a new connection and succeeds, the record says it was retried, and its `sent_at` is the first
    send's (its TTFT holds the failed attempt, as the user waited through it). It used to be a `connection` failure
    (`Server disconnected`, or `Connection reset by peer`) in records.jsonl for a race between two idle timers."""
    with IdleClosingServer(idle_close_s=0.3, close_how=close_how, close_after_s=0.2) as srv:
        recs, res = _run(srv.url, tmp_path, turns=2, think_s=0.5, stamp_reads=stamp_reads)
    assert [r["error_class"] for r in recs] == [None, None], [r["error"] for r in recs]
    assert [r["completion_tokens"] for r in recs] == [3, 3]
    assert [r["retried"] for r in recs] == [False, True]
    # the second turn: its pooled connection closed unanswered, then a new connection answered it
    assert (srv.requests, srv.answered, srv.closed_unanswered, srv.connections) == (3, 2, 1, 2), vars(srv)
    retried = recs[1]
    # sent at the first send, not at the retry (which came after the server's slow close, 0.2 s later)
    assert srv.arrived[2] - srv.arrived[1] >= 0.2
    assert srv.arrived[2] - retried["sent_at"] >= 0.19, (retried, srv.arrived)
    assert retried["first_token_at"] - retried["sent_at"] >= 0.2
    assert res.summary.requests.failed == 0
    assert res.summary.client_health.requests_retried == 1
    assert [w["retried"] for w in res.summary.client_health.workers] == [1]


def test_a_server_that_went_down_is_still_a_failure_with_its_error(tmp_path: Path) -> None:
    """The retry goes to a new connection: a server that stopped listening refuses it, and the request is the
    `connection` failure it is, with the refusal's words (and the first attempt's), never a success."""
    with IdleClosingServer(idle_close_s=60.0, down_after=1) as srv:
        recs, _ = _run(srv.url, tmp_path, turns=2, think_s=0.1)
    assert recs[0]["error_class"] is None
    failed = recs[1]
    assert failed["error_class"] == "connection", failed
    assert "Cannot connect to host" in failed["error"], failed["error"]
    assert "Server disconnected" in failed["error"], failed["error"]
    assert failed["retried"] is True and failed["status"] is None
    assert (srv.requests, srv.closed_unanswered, srv.connections) == (2, 1, 1), vars(srv)


def test_a_server_that_closes_the_new_connection_too_fails_the_request_after_one_retry(tmp_path: Path) -> None:
    """One retry, never a loop: a server that closes every request unanswered fails it after its second send."""
    with IdleClosingServer(idle_close_s=60.0, unanswered_from=1) as srv:
        recs, _ = _run(srv.url, tmp_path, turns=2, think_s=0.1)
    assert recs[0]["error_class"] is None
    assert recs[1]["error_class"] == "connection" and "Server disconnected" in recs[1]["error"], recs[1]
    assert recs[1]["retried"] is True
    assert (srv.requests, srv.closed_unanswered, srv.connections) == (3, 2, 2), vars(srv)


def test_a_new_connection_closed_unanswered_is_not_retried(tmp_path: Path) -> None:
    """A request on a connection of its own that the server closes unanswered is a failing server, not the race: it is
    recorded as the `connection` failure at once, sent once."""
    with IdleClosingServer(idle_close_s=60.0, unanswered_from=0) as srv:
        recs, _ = _run(srv.url, tmp_path, turns=1, think_s=0.0)
    (rec,) = recs
    assert rec["error_class"] == "connection" and "Server disconnected" in rec["error"], rec
    assert rec["retried"] is False
    assert (srv.requests, srv.connections) == (1, 1), vars(srv)


@pytest.mark.parametrize("close_how", ["fin", "reset"])
@pytest.mark.parametrize("cut", ["status", "token"])
def test_a_reused_connection_whose_answer_began_and_was_cut_is_a_failure_not_retried(
        tmp_path: Path, cut: str, close_how: str) -> None:
    """Once any byte of the answer came (the first bytes of a status line; a head and a first token), the server had
    the request: a cut after it, a clean close or a reset, is the request's failure, never sent again."""
    with IdleClosingServer(idle_close_s=60.0, cut_reused=cut, close_how=close_how) as srv:
        recs, _ = _run(srv.url, tmp_path, turns=2, think_s=0.1)
    assert recs[0]["error_class"] is None
    failed = recs[1]
    assert failed["error_class"] is not None, failed
    assert failed["status"] == (200 if cut == "token" else None), failed
    assert failed["retried"] is False
    assert (srv.requests, srv.cut, srv.connections) == (2, 1, 1), vars(srv)


@pytest.mark.parametrize("close_how", ["fin", "reset"])
def test_a_reused_connection_the_server_drops_while_working_on_the_request_is_a_failure_not_sent_again(
        tmp_path: Path, close_how: str) -> None:
    """The server read the request whole, worked on it 2 s and dropped the connection with nothing of an answer: not
    the keep-alive race (which happens at the send, within `KEEPALIVE_RACE_S` of it), so the request is the
    `connection` failure it is, sent once. It used to be sent again, so the server ran it twice and the record said
    `retried`, a keep-alive race saved."""
    with IdleClosingServer(idle_close_s=60.0, dies_working_s=2.0, close_how=close_how) as srv:
        recs, res = _run(srv.url, tmp_path, turns=2, think_s=0.1)
    assert recs[0]["error_class"] is None
    failed = recs[1]
    assert failed["error_class"] == "connection", failed
    assert failed["retried"] is False and failed["status"] is None, failed
    assert (srv.requests, srv.closed_unanswered, srv.connections) == (2, 1, 1), vars(srv)
    assert res.summary.client_health.requests_retried == 0


def test_without_the_connection_hook_nothing_is_sent_again(tmp_path: Path) -> None:
    """Reads stamped by the request's task (`stamp_reads='task'`) leave no word of the bytes that came before a close
    (a status line cut short looks like none): there the client cannot tell that nothing of an answer came, and the
    race stays the `connection` failure it was rather than risk a second send of a request the server had."""
    with IdleClosingServer(idle_close_s=0.3) as srv:
        recs, res = _run(srv.url, tmp_path, turns=2, think_s=0.5, stamp_reads="task")
    assert recs[1]["error_class"] == "connection" and recs[1]["retried"] is False, recs[1]
    assert (srv.requests, srv.closed_unanswered) == (2, 1), vars(srv)
    assert res.summary.client_health.requests_retried == 0


def test_the_client_reuses_no_connection_idle_for_longer_than_its_keep_alive(tmp_path: Path) -> None:
    """The client keeps an idle connection for `POOLED_KEEPALIVE_S`, less than an engine's server keeps one (uvicorn's
    `timeout_keep_alive`, vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE: 5 s): a turn after a longer think goes out on a new
    connection, never on one such a server would be closing. aiohttp's default kept them 15 s."""
    from llmsweep.engine_ids import POOLED_KEEPALIVE_S

    with IdleClosingServer(idle_close_s=POOLED_KEEPALIVE_S + 0.2) as srv:
        recs, _ = _run(srv.url, tmp_path, turns=2, think_s=POOLED_KEEPALIVE_S + 0.4)
    assert [r["error_class"] for r in recs] == [None, None]
    assert [r["retried"] for r in recs] == [False, False]
    assert (srv.requests, srv.closed_unanswered, srv.connections) == (2, 0, 2), vars(srv)
