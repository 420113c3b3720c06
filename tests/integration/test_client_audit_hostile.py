"""Hostile servers written at the byte level (a raw loopback socket per test): each misbehaviour is one failed record
with a clear error class, within the client's timeouts, and the run's summary counts it."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.workloads import SimpleWorkload

from llmsweep.client import Endpoint, RunOptions, run_benchmark
from llmsweep.client.sse import STEP_OVERSHOOT_TOKENS
from llmsweep.metrics.gates import GateConfig

# a handler answers one request on the socket (its head is in `head`) and says whether the connection stays open
Handler = Callable[[socket.socket, bytes], bool]

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"


def content(text: str = "tok", finish: str | None = None, usage: Any = None) -> bytes:
    obj: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def whole_stream(n: int = 8, usage: Any = None) -> bytes:
    """A complete stream of `n` one-token chunks, the last with finish_reason length, then usage and [DONE]."""
    body = b"".join(content(finish="length" if i == n - 1 else None) for i in range(n))
    usage = {"prompt_tokens": 15, "completion_tokens": n} if usage is None else usage
    body += b"data: " + json.dumps({"id": "x", "choices": [], "usage": usage}).encode() + b"\n\n"
    return body + b"data: [DONE]\n\n"


def chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body)


class RawServer:
    """An HTTP/1.1 server on loopback that reads each request's head and body and lets `handler` write the answer,
    byte for byte. Routes other than the completion routes answer 404."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                if b" /v1/chat/completions " not in head.split(b"\r\n", 1)[0]:
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                self.requests.append(head)
                if not self.handler(conn, head):
                    conn.close()
                    return
        except OSError:
            return

    def close(self) -> None:
        self._sock.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        servers.append(RawServer(handler))
        return servers[-1]

    yield start
    for srv in servers:
        srv.close()


def bench(srv: RawServer, out: Path, *, n: int = 2, concurrency: int = 1, gates: GateConfig | None = None,
          **options: Any) -> tuple[Any, list[dict[str, Any]]]:
    opts: dict[str, Any] = {"concurrency": concurrency, "num_requests": n, "stall_timeout_s": 5, "timeout_s": 30,
                            "max_failure_ratio": 1.0}
    opts.update(options)
    res = run_benchmark(SimpleWorkload(max_tokens=8, lanes_hint=concurrency),
                        Endpoint(base_url=srv.url, model="m", metrics_url=""), RunOptions(**opts), out, gates=gates)
    return res, [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def test_a_malformed_chunk_after_the_body_began_fails_at_once_as_protocol(
        tmp_path: Path, serve: Callable[[Handler], RawServer]) -> None:
    """A chunk size that is not hex, sent after the stream's first events: aiohttp's C parser closed the connection
    but left the body neither failed nor ended, so the request waited out the whole-request timeout (600 s by
    default; 30 s here) and was recorded as a `timeout` — the stall watchdog could not wake it either."""

    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(content() + content()))
        time.sleep(0.05)
        conn.sendall(b"ZZZ\r\n")
        return False

    started = time.monotonic()
    res, records = bench(serve(handler), tmp_path)
    assert time.monotonic() - started < 20
    assert [r["error_class"] for r in records] == ["protocol", "protocol"], records
    assert all("malformed response body" in r["error"] and "chunk size" in r["error"] for r in records)
    assert all(r["end_at"] - r["sent_at"] < 5 for r in records)
    assert res.summary.requests.failed == 2 and res.summary.requests.error_categories == {"protocol": 2}


@pytest.mark.parametrize(("usage", "said"), [
    ({"prompt_tokens": "15", "completion_tokens": "8"}, 'usage.prompt_tokens is "15"'),
    ({"prompt_tokens": 15, "completion_tokens": "8"}, 'usage.completion_tokens is "8"'),
    ({"prompt_tokens": 15, "completion_tokens": 8, "prompt_tokens_details": {"cached_tokens": "all"}},
     'usage.prompt_tokens_details.cached_tokens is "all"'),
    ({"prompt_tokens": 15, "completion_tokens": 8.5}, "usage.completion_tokens is 8.5"),
    ({"prompt_tokens": None, "completion_tokens": -5}, "usage.completion_tokens is -5"),
    ({"prompt_tokens": 15, "completion_tokens": 10**30}, f"usage.completion_tokens is {10**30}"),
    ({"prompt_tokens": 15, "completion_tokens": True}, "usage.completion_tokens is true"),
], ids=["string-prompt", "string-completion", "string-cached", "fraction", "negative", "huge", "bool"])
def test_usage_counts_that_are_not_counts_fail_their_request_as_protocol(
        tmp_path: Path, serve: Callable[[Handler], RawServer], usage: dict[str, Any], said: str) -> None:
    """A usage chunk whose counts are strings made the token split compare a str with an int: TypeError out of
    `run_benchmark`, no summary. Then such a count was taken for none and the chunks counted the output: a success.
    A server that reports `-5` or `"8"` tokens is broken, and its chunks (which may carry several tokens each) do not
    say the output's size either: the request is a `protocol` failure naming the count, the run goes on."""

    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(whole_stream(usage=usage))
                     + b"0\r\n\r\n")
        return True

    res, records = bench(serve(handler), tmp_path)
    assert [r["error_class"] for r in records] == ["protocol", "protocol"], records
    assert all(r["error"] == f"{said}, not a token count (an integer in [0, 2^53))" for r in records), records
    assert all(len(r["chunk_times"]) == 8 for r in records)  # the tokens that came are kept
    assert res.summary.requests.error_categories == {"protocol": 2}


def test_null_usage_counts_are_no_counts_and_the_request_stands(
        tmp_path: Path, serve: Callable[[Handler], RawServer]) -> None:
    """A `null` count (a server without the figure) is absent, not broken: the request is a success, the chunks
    count its output where the completion count is null."""
    usage = {"prompt_tokens": None, "completion_tokens": None, "prompt_tokens_details": {"cached_tokens": None}}

    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(whole_stream(usage=usage))
                     + b"0\r\n\r\n")
        return True

    res, records = bench(serve(handler), tmp_path)
    assert [r["error_class"] for r in records] == [None, None], records
    assert all(r["completion_tokens"] is None and r["prompt_tokens"] is None and r["chunk_tokens"] == [1] * 8
               for r in records)
    assert res.summary.tokens.output_total == 16


def _streams(*bodies: bytes) -> Handler:
    """Answer the requests with `bodies` in turn, each a whole event stream."""
    left = iter(bodies)

    def handler(conn: socket.socket, head: bytes) -> bool:
        body = next(left)
        conn.sendall(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return True

    return handler


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_a_lone_surrogate_in_the_output_text_fails_its_request_as_protocol(
        tmp_path: Path, serve: Callable[[Handler], RawServer], record_process: bool) -> None:
    """`"\\ud800x"` in a chunk's content is half a character: no Unicode text, so the server's output cannot be read
    (it was a success). A surrogate pair a server split over two chunks is one character, and whole."""
    lone = content("\ud800x") + whole_stream()
    split = content("\ud83d") + content("\ude00") + whole_stream()
    res, records = bench(serve(_streams(lone, split)), tmp_path, record_process=record_process)
    assert [r["error_class"] for r in records] == ["protocol", None], records
    assert records[0]["error"].startswith("the output text holds a lone surrogate (\\ud800 at character 0)")
    assert len(records[0]["chunk_times"]) == 9 and len(records[1]["chunk_times"]) == 10
    assert (res.summary.requests.successful, res.summary.requests.failed) == (1, 1)


def _no_text(choices: list[Any], n: int = 8) -> bytes:
    """`n` events with these choices (no output text), usage saying `n` tokens, then [DONE]."""
    body = b"".join(b"data: " + json.dumps({"id": "x", "choices": choices}).encode() + b"\n\n" for _ in range(n))
    body += b"data: " + json.dumps({"id": "x", "choices": [], "usage": {"prompt_tokens": 15,
                                                                          "completion_tokens": n}}).encode()
    return body + b"\n\ndata: [DONE]\n\n"


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_a_stream_without_any_content_chunk_fails_whatever_its_usage_says(
        tmp_path: Path, serve: Callable[[Handler], RawServer], record_process: bool) -> None:
    """Every event `choices: []`, or every content "" ending on `finish_reason: length`, with usage 8 and [DONE]:
    no token was streamed, so nothing was timed, yet each was a success (a valid point with TTFT count 0 and
    throughput from usage alone). Each is a `protocol` failure saying what came."""
    empty = [{"index": 0, "delta": {"content": ""}, "finish_reason": None}]
    last = [{"index": 0, "delta": {"content": ""}, "finish_reason": "length"}]
    no_choice = _no_text([])
    empty_text = _no_text(empty, 7).replace(b"data: [DONE]", b"data: " + json.dumps(
        {"id": "x", "choices": last}).encode() + b"\n\ndata: [DONE]")
    res, records = bench(serve(_streams(no_choice, empty_text)), tmp_path, record_process=record_process)
    assert [(r["error_class"], r["error"]) for r in records] == [
        ("protocol", "stream ended without any content chunk: 10 events, none with a choice; usage said 8 "
                     "completion tokens; then [DONE]"),
        ("protocol", "stream ended without any content chunk: 10 events, 8 with choices whose text is empty "
                     "(finish_reason 'length'); usage said 7 completion tokens; then [DONE]")], records
    assert res.summary.requests.successful == 0 and res.summary.tokens.output_total == 0
    assert res.verdict == "invalid"


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_an_answer_the_model_ended_at_once_is_an_empty_output_not_a_broken_server(
        tmp_path: Path, serve: Callable[[Handler], RawServer], record_process: bool) -> None:
    """An engine without `ignore_eos` (or a model whose end token wins) answers `finish_reason: stop` with no text:
    a well-formed answer, counted as the server breaking the protocol. It is an `empty_output` failure, saying the
    model's end-of-sequence came first; an empty stream whose usage claims tokens stays `protocol`."""
    stop = [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}]
    role = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]

    def answer(completion_tokens: int) -> bytes:
        events = [{"id": "x", "choices": role}, {"id": "x", "choices": stop},
                  {"id": "x", "choices": [], "usage": {"prompt_tokens": 15, "completion_tokens": completion_tokens}}]
        return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"

    res, records = bench(serve(_streams(answer(0), answer(1), answer(5))), tmp_path, record_process=record_process, n=3)
    assert [r["error_class"] for r in records] == ["empty_output", "empty_output", "protocol"], records
    assert records[0]["error"] == (
        "stream ended without any content chunk: 4 events, 2 with choices whose text is empty (finish_reason "
        "'stop'); usage said 0 completion tokens; then [DONE]: the model's end-of-sequence came first (a run that "
        "sends ignore_eos, where the engine takes it, keeps it from ending an answer)"), records
    assert "end-of-sequence" not in records[2]["error"]
    assert res.summary.requests.error_categories == {"empty_output": 2, "protocol": 1}
    assert res.verdict == "invalid"


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_a_usage_count_above_max_tokens_is_not_the_outputs_size(
        tmp_path: Path, serve: Callable[[Handler], RawServer], record_process: bool) -> None:
    """8 chunks with usage `completion_tokens: 1000` at max_tokens 8 counted 1000 tokens a request (throughput 100x
    the real one, TPOT 1/125 of it) in a valid point. The count is not taken for the output's size (the chunks count
    it), the record keeps what the server said, and a point of such requests fails the long-output gate; a count of
    max_tokens itself stands."""
    inflated = whole_stream(usage={"prompt_tokens": 15, "completion_tokens": 1000})
    fixed = GateConfig.for_kind("fixed", max_short_output_ratio=0.05)  # the fixed-seq-len profile's tolerance
    res, records = bench(serve(_streams(inflated, inflated)), tmp_path, record_process=record_process, gates=fixed)
    assert [r["error_class"] for r in records] == [None, None], records
    assert all(r["completion_tokens"] is None and r["usage_over_max_tokens"] == 1000 and r["chunk_tokens"] == [1] * 8
               for r in records), records
    assert res.summary.tokens.output_total == 16
    assert res.summary.requests.long_outputs == 2 and res.summary.requests.short_outputs == 0
    assert res.verdict == "invalid"
    assert any(r.startswith("long-output ratio 1.0000 exceeds 0.05 (2/2 successful requests brought more output "
                            "than their max_tokens") for r in res.summary.validity.reasons), res.summary.validity

    res, records = bench(serve(_streams(whole_stream(), whole_stream())), tmp_path / "exact",
                         record_process=record_process)
    assert all(r["completion_tokens"] == 8 and r["usage_over_max_tokens"] is None for r in records), records
    assert res.summary.requests.long_outputs is None and res.summary.requests.output_length_mismatch == 0

    # a speculative step's overshoot (an engine that checks the limit once per MTP/EAGLE step ends a few tokens past
    # it): the count stands, a mismatch but no long output; a count past STEP_OVERSHOOT_TOKENS is not taken (above)
    over = whole_stream(usage={"prompt_tokens": 15, "completion_tokens": 8 + STEP_OVERSHOOT_TOKENS})
    res, records = bench(serve(_streams(over, over)), tmp_path / "overshoot", record_process=record_process,
                         gates=fixed)
    assert all(r["completion_tokens"] == 8 + STEP_OVERSHOOT_TOKENS and r["usage_over_max_tokens"] is None
               for r in records), records
    assert res.summary.requests.long_outputs is None and res.summary.requests.output_length_mismatch == 2
    assert not [r for r in res.summary.validity.reasons if r.startswith("long-output")], res.summary.validity


@pytest.mark.parametrize("stamp_reads", ["kernel", "task"])
def test_an_event_stream_line_past_its_cap_fails_the_request_at_once(
        tmp_path: Path, serve: Callable[[Handler], RawServer], stamp_reads: str) -> None:
    """12 MiB without a line end after a first token, then nothing: the client held it all (64 MiB: 600 MB for 6
    requests) and ended the request at the stall timeout, as a `timeout`. A line past `MAX_LINE_BYTES` is now the
    request's `protocol` failure as soon as it is seen (8 MiB: `transport.MAX_LINE_BYTES`), the token before it
    kept."""

    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(SSE_HEAD + b"Connection: close\r\n\r\n" + content() + b"data: ")
        junk = b"x" * (1 << 20)
        with contextlib.suppress(OSError):
            for _ in range(12):
                conn.sendall(junk)
            time.sleep(10)
        return False

    _, records = bench(serve(handler), tmp_path, stall_timeout_s=4, timeout_s=30, stamp_reads=stamp_reads)
    assert [r["error_class"] for r in records] == ["protocol", "protocol"], records
    assert all("line ran past 8 MiB without a line end" in r["error"] for r in records), records
    assert all(r["end_at"] - r["sent_at"] < 4 for r in records)  # at once, not at the stall timeout
    assert all(len(r["chunk_times"]) == 1 for r in records)


def _gzip_if_asked(always: bool) -> Handler:
    def handler(conn: socket.socket, head: bytes) -> bool:
        body = whole_stream()
        asked = any(line.lower().startswith(b"accept-encoding:") and b"gzip" in line.lower()
                    for line in head.split(b"\r\n"))
        if always or asked:
            body = gzip.compress(body)
            conn.sendall(SSE_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        else:
            conn.sendall(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return True

    return handler


def test_the_client_asks_for_an_uncompressed_stream_and_names_a_compressed_one(
        tmp_path: Path, serve: Callable[[Handler], RawServer]) -> None:
    """aiohttp sent `Accept-Encoding: gzip, deflate` by default while the client reads the body raw: a server (or a
    gateway) that honours it gzipped the stream, and every request failed as "stream ended without any content
    chunk". The client asks for `identity` now, and a server that compresses anyway fails with that said."""
    srv = serve(_gzip_if_asked(always=False))
    res, records = bench(srv, tmp_path / "honours")
    assert [r["error_class"] for r in records] == [None, None], records
    assert res.summary.tokens.output_total == 16
    assert all(b"accept-encoding: identity" in h.lower() for h in srv.requests)

    res, records = bench(serve(_gzip_if_asked(always=True)), tmp_path / "always")
    assert [r["error_class"] for r in records] == ["protocol", "protocol"], records
    assert all("Content-Encoding: gzip" in r["error"] for r in records)
    assert res.summary.requests.error_categories == {"protocol": 2}


def _answer(body: bytes, content_type: bytes = b"application/json") -> Handler:
    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (content_type, len(body))
                     + body)
        return True

    return handler


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_a_200_that_is_no_stream_says_what_came(tmp_path: Path, serve: Callable[[Handler], RawServer],
                                                record_process: bool) -> None:
    """A server that ignores `stream: true` (one JSON answer), a gateway's JSON error sent with status 200, and an
    HTML page were all "stream ended without any content chunk": the server's words and the body were lost, and a
    context overflow said that way was not one. Each now says what came."""
    whole = json.dumps({"id": "x", "object": "chat.completion", "usage": {"completion_tokens": 8},
                        "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}).encode()
    overflow = json.dumps({"error": {"message": "This model's maximum context length is 8 tokens"}}).encode()
    cases = {"whole": (_answer(whole), "protocol", "one JSON object, not an event stream"),
             "error": (_answer(b'{"error": {"message": "upstream busy"}}'), "http", "HTTP 200 with an error and no "
                                                                                   "stream: upstream busy"),
             "overflow": (_answer(overflow), "context_overflow", "maximum context length is 8"),
             "html": (_answer(b"<html>login</html>", b"text/html"), "protocol", "no SSE `data:` event: '<html>")}
    for name, (handler, error_class, words) in cases.items():
        res, records = bench(serve(handler), tmp_path / name, record_process=record_process)
        assert [r["error_class"] for r in records] == [error_class] * 2, (name, records)
        assert all(words in r["error"] for r in records), (name, records)
        assert res.summary.requests.failed == 2


def test_an_sse_error_event_is_a_failure_with_the_servers_words(
        tmp_path: Path, serve: Callable[[Handler], RawServer]) -> None:
    """`event: error` (SSE's own error event) after three tokens was ignored: the request failed as `truncated`
    ("without [DONE] or a finish_reason"), the server's reason lost."""

    def handler(conn: socket.socket, head: bytes) -> bool:
        body = content() * 3 + b'event: error\ndata: {"message": "engine crashed"}\n\n'
        conn.sendall(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return True

    res, records = bench(serve(handler), tmp_path)
    assert [r["error_class"] for r in records] == ["http", "http"], records
    assert all(r["error"] == "error event in stream: engine crashed" for r in records)
    assert all(len(r["chunk_times"]) == 3 for r in records)  # the tokens that came are kept
    assert res.summary.requests.error_categories == {"http": 2}


def test_a_connection_never_completed_ends_at_the_stall_timeout(tmp_path: Path) -> None:
    """A listener whose accept queue is full drops the client's SYNs (as a host gone or overloaded does): the
    connection never completes, nothing is received, and the request waited for the whole-request timeout (600 s by
    default) and was recorded as "timed out: " with no words. It now ends at the stall timeout, saying so."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):  # fill the accept queue: later SYNs are dropped, not refused
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    try:
        started = time.monotonic()
        res = run_benchmark(SimpleWorkload(max_tokens=8), Endpoint(base_url=f"http://127.0.0.1:{port}", model="m",
                                                                   metrics_url=""),
                            RunOptions(concurrency=1, num_requests=1, stall_timeout_s=1, timeout_s=20,
                                       max_failure_ratio=1.0), tmp_path)
        took = time.monotonic() - started
    finally:
        for sock in (*fillers, listener):
            sock.close()
    (record,) = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert record["error_class"] == "timeout" and "no connection within 1 s (the stall timeout)" in record["error"]
    assert took < 10 and record["end_at"] - record["scheduled_at"] < 5, took
    assert res.summary.requests.error_categories == {"timeout": 1}


def test_the_whole_request_timeout_before_any_answer_says_so(
        tmp_path: Path, serve: Callable[[Handler], RawServer]) -> None:
    """A server that takes the request and never answers, with the request timeout below the stall timeout:
    aiohttp's whole-request timer raised a bare TimeoutError and the record said "timed out: " and nothing else."""

    def handler(conn: socket.socket, head: bytes) -> bool:
        time.sleep(3)
        return False

    res, records = bench(serve(handler), tmp_path, n=1, stall_timeout_s=5, timeout_s=0.5)
    assert [(r["error_class"], r["error"]) for r in records] == [
        ("timeout", "timed out: the whole-request timeout of 0.5 s passed")]
    assert res.summary.requests.failed == 1


def _reset_after(body: bytes) -> Handler:
    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(SSE_HEAD + b"Connection: close\r\n\r\n" + body)  # a body that runs to the close
        time.sleep(0.05)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        return False

    return handler


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_a_reset_that_cuts_a_stream_running_to_the_close_is_a_connection_failure(
        tmp_path: Path, serve: Callable[[Handler], RawServer], record_process: bool) -> None:
    """A body without length or chunks ends at the connection's close, and aiohttp ends it there even when the
    close is a reset: three tokens then a reset were a clean end (`truncated`), and had the third carried a
    finish_reason, a success. It is a `connection` failure now, keeping the tokens that came; a reset after a whole
    stream (its `[DONE]` read) takes nothing from it."""
    cut = content() + content() + content(finish="stop")
    res, records = bench(serve(_reset_after(cut)), tmp_path / "cut", record_process=record_process)
    assert [r["error_class"] for r in records] == ["connection", "connection"], records
    assert all("lost before the body ended" in r["error"] and "reset" in r["error"].lower() for r in records)
    assert all(len(r["chunk_times"]) == 3 for r in records)
    assert res.summary.requests.error_categories == {"connection": 2}

    res, records = bench(serve(_reset_after(whole_stream())), tmp_path / "whole", record_process=record_process)
    assert [r["error_class"] for r in records] == [None, None], records
    assert res.summary.tokens.output_total == 16


@pytest.mark.parametrize("code", [301, 307])
def test_a_redirect_is_not_followed_and_says_where_it_leads(
        tmp_path: Path, serve: Callable[[Handler], RawServer], code: int) -> None:
    """aiohttp followed redirects: a 301 (an http-to-https or trailing-slash redirect in front of the server) turned
    the POST into a GET without its body, and a redirect loop ended as "TooManyRedirects: 0, message=''"; a 307's
    hop counted in TTFT. A redirect is now the request's `http` failure, naming where it leads."""
    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 %d Moved\r\nLocation: /v1/chat/completions/\r\nContent-Length: 0\r\n\r\n" % code)
        return True

    srv = serve(handler)
    res, records = bench(srv, tmp_path)
    assert [(r["error_class"], r["status"]) for r in records] == [("http", code)] * 2, records
    assert all("a redirect to /v1/chat/completions/" in r["error"] for r in records)
    assert len(srv.requests) == 2 and all(h.startswith(b"POST ") for h in srv.requests)
    assert res.summary.requests.error_categories == {"http": 2}


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_a_lone_surrogate_in_the_servers_words_does_not_crash_the_run(
        tmp_path: Path, serve: Callable[[Handler], RawServer], record_process: bool) -> None:
    """JSON may escape a lone surrogate (`"\\ud800"`, as Python's json.dumps writes one): in a stream's error message
    or its finish_reason it reached the record, whose encoder refused it — TypeError out of run_benchmark."""
    bodies = iter([content() + b'data: {"error": {"message": "bad \\ud800 input"}}\n\n',
                   whole_stream().replace(b'"finish_reason": "length"', b'"finish_reason": "len\\udc00"')])

    def handler(conn: socket.socket, head: bytes) -> bool:
        body = next(bodies)
        conn.sendall(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return True

    res, records = bench(serve(handler), tmp_path, record_process=record_process)
    assert [(r["error_class"], r["error"]) for r in records] == [("http", "error event in stream: bad ? input"),
                                                                (None, None)], records
    assert records[1]["finish_reason"] == "len?"
    assert (res.summary.requests.successful, res.summary.requests.failed) == (1, 1)


@pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])
def test_json_nested_past_the_parsers_depth_is_a_protocol_failure(
        tmp_path: Path, serve: Callable[[Handler], RawServer], record_process: bool) -> None:
    """An event nested 200,000 arrays deep made json.loads raise RecursionError, which the parser did not catch:
    in the loop, a crash of the whole run; in the record helper, its exit, and every record after it lost (the
    summary counted 0 of the 2 requests sent)."""
    body = content() + b"data: " + b"[" * 200_000 + b"]" * 200_000 + b"\n\n" + whole_stream()

    def handler(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return True

    res, records = bench(serve(handler), tmp_path, record_process=record_process)
    assert [r["error_class"] for r in records] == ["protocol", "protocol"], records
    assert res.summary.requests.total == 2 and res.summary.requests.error_categories == {"protocol": 2}


def test_a_response_the_parser_cannot_read_is_its_requests_failure_not_the_runs(
        tmp_path: Path, serve: Callable[[Handler], RawServer], monkeypatch: pytest.MonkeyPatch) -> None:
    """Three faults above (a usage count that is a string or past 2**63, a lone surrogate, JSON nested too deep)
    each raised out of the record step and ended the whole run, or the record helper and every record after it. A
    fault of a kind not met yet (stood for here by the parser raising on one response's bytes) is now that one
    request's `protocol` failure, and the run goes on."""
    import llmsweep.client.transport as transport

    parse = transport.parse_stream

    def parse_or_fail(reads: list[tuple[float, bytes]], **kw: Any) -> Any:
        if b"unreadable" in b"".join(d for _, d in reads):
            raise KeyError("unreadable")
        return parse(reads, **kw)

    monkeypatch.setattr(transport, "parse_stream", parse_or_fail)
    bodies = iter([whole_stream(), content("unreadable") + whole_stream(), whole_stream()])

    def handler(conn: socket.socket, head: bytes) -> bool:
        body = next(bodies)
        conn.sendall(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return True

    res, records = bench(serve(handler), tmp_path, n=3, record_process=False)
    assert [r["error_class"] for r in records] == [None, "protocol", None], records
    assert records[1]["error"] == "the client could not read this response (KeyError: 'unreadable')"
    assert records[1]["status"] == 200 and records[1]["end_at"] is not None
    assert (res.summary.requests.successful, res.summary.requests.failed) == (2, 1)


def test_a_stream_the_server_ends_with_finish_reason_error_is_a_failure(
        tmp_path: Path, serve: Callable[[Handler], RawServer]) -> None:
    """vLLM ends a request hit by an internal error (a KV transfer that failed, say) with `finish_reason: "error"`
    (FinishReason.ERROR) and [DONE]. Where `ignore_eos` cannot be sent that was a success, a short output."""

    def handler(conn: socket.socket, head: bytes) -> bool:
        body = content() + content() + content(finish="error") + b"data: [DONE]\n\n"
        conn.sendall(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return True

    srv = serve(handler)
    res = run_benchmark(SimpleWorkload(max_tokens=8), Endpoint(base_url=srv.url, model="m", metrics_url="",
                                                               send_ignore_eos=False),
                        RunOptions(concurrency=1, num_requests=2, max_failure_ratio=1.0), tmp_path)
    records = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["error_class"] for r in records] == ["truncated", "truncated"], records
    assert all("finish_reason 'error'" in r["error"] and len(r["chunk_times"]) == 3 for r in records)
    assert res.summary.requests.error_categories == {"truncated": 2}
