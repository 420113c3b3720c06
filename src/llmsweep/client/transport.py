"""Streaming HTTP transport: send one request, stamp times, keep the raw bytes.

Every network read is stamped with the moment its bytes reached this machine: on Linux, for plain TCP, the kernel's
receive time of the read (SO_TIMESTAMPNS: taken as the packet arrived, whatever the event loop or the scheduler were
doing then; until a response's body begins, one read per SSE event, so a first token keeps its own packet's time);
elsewhere, or where the kernel gives none, the moment of the read inside the connection's protocol
callback (`data_received`), right after the socket read and before any parsing or task switch. `StampingConnector`
hooks each connection it hands out to the request being sent, and the hook takes the response body bytes that read
delivered. The request's task does not wake per chunk (it waits for the end of the body), so a busy event loop
neither delays a stamp by a task switch nor spends time on per-chunk wake-ups. SSE parsing and token counting happen
after the response ended (`to_record`). Times are taken on the monotonic clock (kernel times are converted to it as
they are read) and converted to unix seconds with one anchor per process, so a wall-clock step during a run cannot
bend latencies.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import re
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ClientRequest
from aiohttp.connector import Connection
from aiohttp.streams import StreamReader
from aiohttp.tracing import Trace

from llmsweep import keepalive
from llmsweep.client.clock import to_unix
from llmsweep.client.config import Endpoint
from llmsweep.client.records import ErrorClass, RequestRecord
from llmsweep.client.sse import ParsedStream, error_words, parse_stream
from llmsweep.words import count_of
from llmsweep.workload.base import RequestSpec


def build_body(spec: RequestSpec, endpoint: Endpoint) -> bytes:
    """The JSON body of one streamed request; optional fields follow the endpoint's switches."""
    body: dict[str, Any] = {"model": endpoint.model, "stream": True, "max_tokens": spec.max_tokens}
    if spec.api == "chat":
        body["messages"] = list(spec.messages or ())
    else:
        prompt = spec.prompt
        body["prompt"] = list(prompt) if isinstance(prompt, tuple) else (prompt or "")
    if endpoint.send_stream_options:
        body["stream_options"] = {"include_usage": True}
    if endpoint.send_ignore_eos and spec.ignore_eos:
        body["ignore_eos"] = True
    body.update(spec.extra_body)
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass(slots=True, eq=False)  # compared and hashed by identity: the interpreter keeps the in-flight ones in a set
class RawExchange(keepalive.Sending):
    """What the hot loop saw: perf_counter stamps, status and raw reads; and, as a `keepalive.Sending`, when the
    request was written (`sent`), whether it went out on a pooled connection and was sent again on a new one
    (`retried`: the first send's failure)."""

    scheduled: float
    first_byte: float | None = None
    end: float | None = None
    status: int | None = None
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    error_class: str | None = None
    error: str | None = None
    stamper: _ReadStamper | None = None  # the hook of the connection this exchange uses, while it uses it
    marks: list[tuple[float, int]] = field(default_factory=list)  # (read time, body bytes received after it)
    pieces: list[bytes] = field(default_factory=list)  # body bytes moved out of aiohttp's buffer so far
    drained: int = 0
    body: bytes | None = None  # the whole body, until `to_record` cuts it into `reads` at the marks
    last_read: float | None = None
    lost: BaseException | None = None  # the error the connection was lost with before the body ended (a reset)
    line_from: int = 0  # the body's byte after its last line end, as of the last drain (`MAX_LINE_BYTES`)




# The exchange whose request is being sent from the current task: how `StampingConnector.connect` finds it.
_SENDING: ContextVar[RawExchange | None] = ContextVar("llmsweep_sending", default=None)


# A response body larger than this is moved out of aiohttp's buffer as it arrives, so aiohttp's flow control (which
# pauses reading when its buffer is full) never engages while the request's task waits for the end of the body.
_DRAIN_BYTES = 1 << 20
# aiohttp pauses reading past `read_bufsize` * 2 bytes or `read_bufsize` / 16 chunks buffered; with this size the
# drain above keeps both limits out of reach.
READ_BUFSIZE = 1 << 22

MAX_LINE_BYTES = 8 << 20
"""The longest line of an event stream the client reads (8 MiB); a longer one fails its request as `protocol` as
soon as it is seen (within `_DRAIN_BYTES` of the limit: lines are looked at when the body is drained, so a read
costs nothing more). No event of a streamed answer comes near it: a chunk holds a few tokens, and one holding a whole
128k-token answer of escaped CJK text (`\\uXXXX`, 6 bytes a token) is 0.8 MB. A server that sent 64 MiB without a
line end (a bug, a proxy's error page without newlines, a hostile peer) held the client at 0.6-1.1 GB for 6 requests and
ended each at the request timeout."""


_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35) if sys.platform.startswith("linux") else None
_TIMESPEC = struct.Struct("qq")
_ANCILLARY = 64  # room for one struct timespec control message

AWAITING_FIRST: set[int] = set()
"""Socket descriptors of this process's requests that have not received their first body byte (see
`read_first_tokens_first`)."""

READS_STAMPED = {"kernel": 0, "loop": 0}
"""Reads of this process stamped with the kernel's receive time, and with the time of the read (see `_KernelReader`):
a run says which clock its latencies came from."""


class _KernelReader:
    """Replaces a plain TCP transport's read step (asyncio's `_read_ready__data_received`, same error handling) with
    `recvmsg`, and hands the kernel's receive time of the read to the connection's stamper before the protocol sees
    the bytes. The kernel stamps each packet as it arrives (SO_TIMESTAMPNS); a read reports the time of the last
    packet it took.

    With `first_events` (`RunOptions.split_first_events`), until a response's body has begun the queued bytes are
    peeked and each complete SSE event is received on its own (`_EVENT_END`), so it carries the receive time of the
    packet that completed it, and the response head is acknowledged as soon as it is read (`_ack_now`). Read whole, a
    first token that waited in its socket while the server's next chunk arrived takes that chunk's arrival time: on a
    busy loop (hundreds of streams sharing one server step) that was most of the TTFT error. The kernel keeps a
    packet apart from the next one in the socket's queue while the sender has not seen it acknowledged; the head is
    acknowledged at once so that the first token is the only unacknowledged packet and the sender has no reason to
    probe for it (a probe's duplicate is acknowledged at once, after which the next chunk joins the first). On a real
    network the kernel may merge queued packets anyway; the stamp is then the later packet's, as before. Costs a few
    system calls per request, none per later chunk."""

    __slots__ = ("acked", "first_events", "stamper", "transport")

    def __init__(self, transport: Any, stamper: _ReadStamper, first_events: bool) -> None:
        self.transport = transport
        self.stamper = stamper
        self.first_events = first_events
        self.acked: RawExchange | None = None  # the exchange whose response head this connection acknowledged

    def __call__(self) -> None:
        tr = self.transport
        if tr._conn_lost:
            return
        raw = self.stamper.raw
        first = self.first_events and raw is not None and not raw.marks and raw.end is None
        try:
            if not (first and self._event_by_event()):
                data, ancillary, _, _ = tr._sock.recvmsg(tr.max_size, _ANCILLARY)
                if not data:
                    tr._read_ready__on_eof()
                    return
                self._deliver(data, ancillary)
            if (first and raw is not None and raw.first_byte is not None and not raw.marks and self.acked is not raw
                    and not tr._conn_lost and not tr._closing):
                self.acked = raw
                _ack_now(tr._sock)
        except (BlockingIOError, InterruptedError):
            return
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            tr._fatal_error(exc, "Fatal read error on socket transport")

    def arm(self) -> None:
        """A request goes out on this connection: have its response acknowledged late (delayed-ack mode, which a new
        connection starts without), so that its first token stays apart from the next packet until it is read."""
        if self.first_events:
            _delay_acks(self.transport._sock)

    def _event_by_event(self) -> bool:
        """Receive the queued bytes up to each complete SSE event's end as a read of its own; True when that took all
        the bytes peeked (else the caller reads the rest whole). Raises what `recvmsg` raises."""
        tr = self.transport
        sock = tr._sock
        peeked, _, _, _ = sock.recvmsg(tr.max_size, 0, socket.MSG_PEEK)
        ends = [m.end() for m in itertools.islice(_EVENT_END.finditer(peeked), _MAX_SPLITS)]
        if not ends:
            return False
        start = 0
        for end in ends:
            data, ancillary, _, _ = sock.recvmsg(end - start, _ANCILLARY)
            if not data:
                tr._read_ready__on_eof()
                return True
            start += len(data)
            self._deliver(data, ancillary)
            if tr._conn_lost or tr._closing or start != end:
                return True  # anything left is read on the next call
        return start == len(peeked)

    def _deliver(self, data: bytes, ancillary: list[tuple[int, int, bytes]]) -> None:
        self.stamper.rx = _receive_time(ancillary)
        try:
            self.transport._protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self.transport._fatal_error(exc, "Fatal error: protocol.data_received() call failed.")


# The end of an SSE event (a blank line: JSON data lines cannot hold one), and at most how many events one read is
# split into before the body begins (the rest is read whole).
_EVENT_END = re.compile(rb"\r?\n\r?\n")
_MAX_SPLITS = 16
_TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", 12)


def _ack_now(sock: socket.socket) -> None:
    """Acknowledge what this socket received now, then go on delaying acknowledgements (TCP_QUICKACK 2 sends a
    pending acknowledgement without leaving delayed-ack mode; 0 restores that mode where none was pending)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 2)
    _delay_acks(sock)


def _delay_acks(sock: socket.socket | None) -> None:
    """Delayed-ack mode (TCP_QUICKACK 0): received packets are acknowledged after a while or when read, not at once."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 0)


def _receive_time(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """The kernel's receive time of a read on the perf_counter clock; None when there is none or it is implausible
    (later than now, or more than a minute old)."""
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(payload)
            now = time.perf_counter()
            rx = sec + nsec * 1e-9 - (time.time() - now)  # CLOCK_REALTIME to perf_counter, at this moment
            return rx if now - 60.0 < rx <= now else None
    return None


class KernelStampsOn:
    """Holds one socket with receive time-stamps on for as long as a run lasts. The kernel turns its packet
    time-stamping on when the first socket asks for it and off when the last one closes, both deferred to its work
    queue: a connection that asks while no other socket holds it open gets its first packets unstamped (on an idle
    loop, the response head and often the first token; measured on loopback: 11-19 of 20 fresh connections). Open
    before the first request, it keeps every connection's reads stamped; it returns once a byte sent over a loopback
    TCP pair of its own comes back stamped (at most `wait_s`: microseconds to milliseconds, longer on a loaded host).
    The probe is TCP because a datagram socket is never told the switch is still off: a datagram that arrived
    unstamped is stamped when it is read, while TCP leaves such a read without a stamp, as the run's reads would be."""

    def __init__(self, wait_s: float = 0.5) -> None:
        self._sock: socket.socket | None = None
        if _SO_TIMESTAMPNS is None:
            return
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError:
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        except OSError:
            sock.close()
            return
        self._sock = sock
        with contextlib.suppress(OSError):  # no loopback: stamping still goes on as soon as the kernel has switched
            _await_kernel_stamps(wait_s)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _await_kernel_stamps(wait_s: float) -> bool:
    """Send one byte at a time over a fresh loopback TCP connection until a read of it carries the kernel's receive
    time, for at most `wait_s`; True when one did. Raises OSError when loopback cannot be used."""
    deadline = time.monotonic() + wait_s
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            socket.create_connection(listener.getsockname(), timeout=wait_s) as reader:
        reader.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS or 0, 1)
        sender, _ = listener.accept()
        with sender:
            while True:
                sender.sendall(b"x")
                _, ancillary, _, _ = reader.recvmsg(16, _ANCILLARY)
                if _receive_time(ancillary) is not None:
                    return True
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.0005)


def _stamp_in_kernel(proto: ResponseHandler, stamper: _ReadStamper, *, first_events: bool = True) -> bool:
    """Have the kernel stamp the reads of `proto`'s connection, when it is a plain TCP socket transport on Linux
    (`first_events`: see `_KernelReader`)."""
    transport: Any = proto.transport
    if _SO_TIMESTAMPNS is None or transport is None:
        return False
    sock = getattr(transport, "_sock", None)
    if (not isinstance(sock, socket.socket) or getattr(transport, "_read_ready_cb", None) is None
            or not hasattr(transport, "_read_ready__on_eof") or not hasattr(sock, "recvmsg")):
        return False  # TLS, or a transport this hook does not know: the read callback stamps, as elsewhere
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    transport._read_ready_cb = _KernelReader(transport, stamper, first_events)
    return True


class MalformedResponse(aiohttp.ClientPayloadError):
    """Bytes of a response body that are not HTTP (a bad chunk size): a `protocol` failure."""


class _ReadStamper:
    """Replaces one connection protocol's `data_received`: stamp the read, let aiohttp parse it, then note how many
    body bytes the response had after it. Nothing else happens per read: the body is cut into reads by those marks
    once it ended (`RawExchange.reads`), so the request's task never wakes per chunk. The stamp is the kernel's
    receive time when `_KernelReader` left one in `rx`, else the time of this call."""

    __slots__ = ("fd", "orig", "orig_lost", "proto", "raw", "rx", "stale")

    def __init__(self, proto: ResponseHandler) -> None:
        self.proto = proto
        self.orig = proto.data_received
        self.orig_lost = proto.connection_lost
        self.raw: RawExchange | None = None
        self.stale: StreamReader | None = None  # the previous response's body on a reused connection
        self.rx: float | None = None  # the kernel's receive time of the read being handled (perf_counter seconds)
        sock = proto.transport.get_extra_info("socket") if proto.transport is not None else None
        self.fd: int | None = sock.fileno() if sock is not None else None

    def attach(self, raw: RawExchange) -> None:
        self.raw = raw
        self.stale = self.proto._payload
        raw.stamper = self
        if self.fd is not None:
            AWAITING_FIRST.add(self.fd)

    def detach(self) -> None:
        self.raw = None
        if self.fd is not None:
            AWAITING_FIRST.discard(self.fd)

    def __call__(self, data: bytes) -> None:
        t = self.rx
        self.rx = None
        if t is None:
            t = time.perf_counter()
            if data:
                READS_STAMPED["loop"] += 1
        else:
            READS_STAMPED["kernel"] += 1
        self.orig(data)
        raw = self.raw
        if raw is None or not data:
            return  # b"" is aiohttp resuming its own parser (from inside `read_nowait`)
        if self.proto._exception is not None:
            self._fail_body()
        if raw.last_read is not None and t < raw.last_read:
            t = raw.last_read  # a read before it the kernel did not stamp (timestamps still being switched on)
        raw.last_read = t
        if raw.first_byte is None:
            raw.first_byte = t
        payload: StreamReader | None = self.proto._payload
        if payload is None or payload is self.stale:
            return
        total = payload.total_bytes
        marks = raw.marks
        if total != (marks[-1][1] if marks else 0):
            if not marks and self.fd is not None:
                AWAITING_FIRST.discard(self.fd)
            marks.append((t, total))
        if payload.is_eof():
            if raw.end is None:
                raw.end = t  # the read that completed the body, not the later wake-up of the request's task
        elif total - raw.drained > _DRAIN_BYTES:
            try:
                piece = payload.read_nowait()
            except Exception:
                return
            raw.pieces.append(piece)
            end = piece.rfind(b"\n")
            if end >= 0:
                raw.line_from = raw.drained + end + 1
            raw.drained = total
            if total - raw.line_from > MAX_LINE_BYTES:
                payload.set_exception(MalformedResponse(_overlong(total - raw.line_from)))

    def connection_lost(self, exc: BaseException | None) -> None:
        """Replaces the protocol's `connection_lost`: note an error (a reset) that cut a body not yet ended. A body
        that runs to the connection's close (no length, no chunks) is ended by aiohttp at the close whatever its
        cause, so a stream reset after three tokens read as a clean end (`truncated`, or a success when the tokens
        that came looked whole), not as the `connection` failure it is."""
        raw = self.raw
        payload: StreamReader | None = self.proto._payload
        if (exc is not None and raw is not None and payload is not None and payload is not self.stale
                and not payload.is_eof()):
            raw.lost = exc
        self.orig_lost(exc)

    def _fail_body(self) -> None:
        """aiohttp's parser refused bytes of a body already begun (a chunk size that is not hex, say): it closes the
        connection and fails the response's head queue, but its C parser leaves the body open, neither failed nor
        ended, so the request waited for the whole-request timeout (600 s by default) and was recorded as a timeout.
        Fail the body with the parser's words."""
        payload: StreamReader | None = self.proto._payload
        if payload is None or payload is self.stale or payload.is_eof() or payload.exception() is not None:
            return
        words = " ".join(str(self.proto._exception).split())  # aiohttp's words span lines (the bytes, a caret)
        payload.set_exception(MalformedResponse(f"malformed response body: {words}"))

    @staticmethod
    def cut(raw: RawExchange, body: bytes) -> None:
        """Split the whole body into `raw.reads` at the byte marks the reads left (stamped at the end when a read
        was not marked)."""
        prev = 0
        reads = raw.reads
        size = len(body)
        for t, mark in raw.marks:
            n = min(mark, size)
            if n > prev:
                reads.append((t, body[prev:n]))
                prev = n
        if prev < len(body):  # bytes no mark covers (should not happen): stamped at the end of the exchange
            reads.append((raw.end if raw.end is not None else time.perf_counter(), body[prev:]))


def _overlong(length: int) -> str:
    return (f"an event-stream line ran past {MAX_LINE_BYTES >> 20} MiB without a line end ({length:,} bytes): no "
            "event of a streamed answer is that long, so the response was not read further")


def _line_length(reads: list[tuple[float, bytes]], fresh: int, before: int) -> int:
    """The bytes after the last line end of a body read into `reads`, whose last `fresh` bytes are new since a look
    that found `before` such bytes."""
    n = 0
    for _, data in reversed(reads):
        end = data.rfind(b"\n")
        if end >= 0:
            return n + len(data) - end - 1
        n += len(data)
        if n >= fresh:
            return before + n
    return n


def first_tokens_first(loop: asyncio.AbstractEventLoop) -> Callable[[], None] | None:
    """Have each iteration of `loop` handle the sockets still waiting for their first body byte before the others;
    returns how to undo it (None where the loop has no selector to order).

    A closed loop's streams share the server's step clock, so a busy iteration reads hundreds of sockets; a first token
    read after the server's next chunk arrived may have been merged with it by the kernel (see `_KernelReader`) and
    then takes that chunk's time. Reading those sockets first keeps that rare; the order costs one set lookup per
    ready socket."""
    selector = getattr(loop, "_selector", None)
    if selector is None or "select" in vars(selector):
        return None
    select = selector.select

    def ordered(timeout: float | None = None) -> list[Any]:
        events: list[Any] = select(timeout)
        if len(events) > 1 and AWAITING_FIRST:
            events.sort(key=lambda event: event[0].fd not in AWAITING_FIRST)
        return events

    selector.select = ordered

    def undo() -> None:
        vars(selector).pop("select", None)

    return undo


def stalled(raw: RawExchange, now: float, stall_s: float) -> bool:
    """End `raw` as a read timeout when nothing arrived for `stall_s` (hooked connections only; returns whether it
    did). Hooked exchanges leave aiohttp's per-read timer off: re-arming it on every read cost more than the rest of
    handling the read, and a watchdog polling every in-flight request a few times a second does the same job."""
    stamper = raw.stamper
    if stamper is None or stamper.raw is not raw:
        return False
    if raw.first_byte is not None and not raw.marks:
        # The server answered (headers) and has not started the body: a queued request waiting for its prefill.
        # Under load that wait can legitimately exceed the stall limit; only the request timeout bounds it.
        return False
    last = raw.last_read if raw.last_read is not None else raw.sent
    if now - last < stall_s:
        return False
    proto = stamper.proto
    exc = aiohttp.SocketTimeoutError(f"no byte from the server for {stall_s:g} s (the stall timeout)")
    proto.set_exception(exc)  # wakes a request still waiting for its response headers
    payload = proto._payload
    if payload is not None and payload is not stamper.stale:
        payload.set_exception(exc)  # wakes one waiting for the end of its body
    return True


def _rest_of(content: StreamReader) -> bytes:
    """What is left in a finished body's buffer, in one join (`read_nowait` goes chunk by chunk, re-entering the
    protocol for each one)."""
    buffer = getattr(content, "_buffer", None)
    if isinstance(buffer, collections.deque) and not getattr(content, "_buffer_offset", 0):
        return b"".join(buffer)  # the body ended and nothing else reads it; the response is released next
    return content.read_nowait()


class StampingConnector(aiohttp.TCPConnector):
    """A TCP connector that hooks every connection it hands out to the exchange being sent (see `_ReadStamper`), and
    with `kernel_stamps` has the kernel time-stamp its reads where it can (see `_KernelReader`; `first_events`: its
    first reads of each response event by event)."""

    kernel_stamps = True
    first_events = True

    async def connect(self, req: ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout) -> Connection:
        conn = await super().connect(req, traces, timeout)
        raw = _SENDING.get()
        proto = conn.protocol
        if raw is not None and proto is not None:
            stamper = proto.__dict__.get("data_received")
            if not isinstance(stamper, _ReadStamper):
                stamper = _ReadStamper(proto)
                proto.data_received = stamper  # type: ignore[method-assign]
                proto.connection_lost = stamper.connection_lost  # type: ignore[method-assign]
                if self.kernel_stamps:
                    _stamp_in_kernel(proto, stamper, first_events=self.first_events)
            stamper.attach(raw)
            reader = getattr(proto.transport, "_read_ready_cb", None)
            if isinstance(reader, _KernelReader):
                reader.arm()
        return conn


async def exchange(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    raw: RawExchange,
    timeout: aiohttp.ClientTimeout,
    *,
    stamp_in_protocol: bool = True,
    turn: Callable[[], Awaitable[None]] | None = None,
    fresh: aiohttp.ClientSession | None = None,
) -> RawExchange:
    """Send and stream one request into `raw`. Never raises except CancelledError (after marking `raw`).

    With `stamp_in_protocol` (and a `StampingConnector` session) reads are stamped in the connection's protocol;
    otherwise, or when the connection could not be hooked, when this task resumes after each read (the old path).
    `turn`, when given, is awaited as soon as the body ended, before anything else happens: streams that end on the
    same server tick wake their tasks together, and the work that follows each (releasing the response, the lane's
    next request) is then spread over loop iterations instead of holding one.

    `fresh`, a session that pools no connection (`force_close`), with the same trace hooks as `session`
    (`keepalive.mark_reused` among them): a request whose pooled connection the server closed or reset before any
    byte of an answer is sent again once through it (`keepalive.post_once_more`; what may be: `_nothing_came`). Its
    `sent` stays the first send's, so its TTFT and E2EL hold the failed attempt, as the user waited through it."""
    perf = time.perf_counter
    raw.sent = perf()  # replaced by the moment the request was written (`keepalive.mark_sent`), when it was
    # aiohttp holds its whole-request timer over its own reads only: the body awaited whole below (`wait_eof`, the
    # stamped path) ran past `timeout.total` unchecked, a 3.6-s stream succeeding under a 1-s timeout
    deadline = None if timeout.total is None else asyncio.get_running_loop().time() + timeout.total
    token: Token[RawExchange | None] | None = _SENDING.set(raw if stamp_in_protocol else None)
    content: StreamReader | None = None
    try:
        send = _send(url, body, headers, raw, timeout, deadline, READ_BUFSIZE if stamp_in_protocol else None)
        resp = await keepalive.post_once_more(send, session, fresh, raw, lambda exc: _nothing_came(raw, exc))
        async with resp:
            if token is not None:
                _SENDING.reset(token)
                token = None
            if raw.first_byte is None:
                raw.first_byte = perf()
            raw.status = resp.status
            reads = raw.reads
            content = resp.content
            if raw.stamper is not None:
                if (exc := content.exception()) is not None:
                    raise exc
                limit = asyncio.timeout_at(deadline)
                try:
                    async with limit:
                        await content.wait_eof()
                except TimeoutError:
                    if not limit.expired():  # the stall watcher's, with its own words
                        raise
                    raise TimeoutError(f"the whole-request timeout of {timeout.total:g} s passed while the body was "
                                       "streaming") from None
                if turn is not None:
                    await turn()
                if (exc := content.exception()) is not None:
                    raise exc
                raw.pieces.append(_rest_of(content))
                raw.body = b"".join(raw.pieces)  # cut into reads later, off the path from here to the next send
                raw.pieces.clear()
                if raw.lost is not None and not raw.body.rstrip().endswith(b"[DONE]"):  # cut (what came is kept)
                    raw.error_class = "connection"
                    raw.error = (f"the connection was lost before the body ended ({type(raw.lost).__name__}: "
                                 f"{raw.lost})")
            elif resp.status != 200:
                reads.append((perf(), await resp.read()))
            else:
                readany = content.readany
                unlooked = line = 0  # bytes read since the last look for a line end; those after it, as of that look
                while True:
                    data = await readany()
                    if not data:
                        break
                    reads.append((perf(), data))
                    unlooked += len(data)
                    if unlooked > _DRAIN_BYTES:  # as the stamped path's drain: a look per MiB, not per read
                        line, unlooked = _line_length(reads, unlooked, line), 0
                        if line > MAX_LINE_BYTES:
                            raise MalformedResponse(_overlong(line))
            if resp.status != 200:
                raw.error_class = "http"
                raw.error = f"HTTP {resp.status}"
                if 300 <= resp.status < 400:
                    # followed, a 301 or 302 turned the POST into a GET without its body, and any hop counted in TTFT
                    raw.error += (f" (a redirect to {resp.headers.get('Location', '?')}: requests are not redirected; "
                                  "point the URL at where it leads)")
            elif (coding := resp.headers.get("Content-Encoding", "identity").strip().lower()) != "identity":
                raw.error_class = "protocol"
                raw.error = (f"the server compressed the stream (Content-Encoding: {coding}) though the request asked "
                             "for none (Accept-Encoding: identity): its tokens cannot be read or timed as they arrive")
    except asyncio.CancelledError:
        # the hook sets `end` at the read that completed the body: a request whose body had ended (its task was
        # waiting for a turn) is finished, whatever aiohttp did to the response on the way out
        complete = raw.stamper is not None and raw.status == 200 and raw.end is not None
        if not complete:
            raw.error_class, raw.error = "cancelled", "cancelled at the end of the drain grace period"
            raw.end = perf()
        raise
    except aiohttp.ConnectionTimeoutError as exc:
        raw.error_class = "timeout"
        raw.error = f"timed out: no connection within {timeout.sock_connect:g} s (the stall timeout): {exc}"
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        # aiohttp's whole-request timer raises a bare TimeoutError: its str is empty ("timed out: ")
        words = str(exc) or (f"the whole-request timeout of {timeout.total:g} s passed" if timeout.total is not None
                             else type(exc).__name__)
        raw.error_class, raw.error = "timeout", f"timed out: {words}"
    except (aiohttp.ClientResponseError, MalformedResponse) as exc:
        raw.error_class, raw.error = "protocol", f"{type(exc).__name__}: {exc}"
    except (aiohttp.ClientError, OSError) as exc:
        raw.error_class, raw.error = "connection", f"{type(exc).__name__}: {exc}"
    finally:
        if token is not None:
            _SENDING.reset(token)
        if raw.stamper is not None:
            if raw.stamper.raw is raw:  # the pool may already have handed the connection to the next request
                raw.stamper.detach()
            raw.stamper = None
            if raw.body is None:  # the body did not end: keep what arrived (a stalled stream's chunks count)
                if raw.drained - raw.line_from > MAX_LINE_BYTES:  # up to the line too long: the rest is not parsed
                    raw.body = b"".join(raw.pieces)[:raw.line_from]
                else:
                    if content is not None:
                        with contextlib.suppress(Exception):
                            raw.pieces.append(_rest_of(content))
                    raw.body = b"".join(raw.pieces)
                raw.pieces.clear()
    if raw.retried is not None and raw.status is None and raw.error is not None and raw.error_class != "cancelled":
        raw.error += (f" (its second send, on a new connection; the first went out on a pooled connection the server "
                      f"closed unanswered: {raw.retried})")
    if raw.end is None or raw.error_class is not None:
        raw.end = perf()
    return raw


def _send(url: str, body: bytes, headers: dict[str, str], raw: RawExchange, timeout: aiohttp.ClientTimeout,
          deadline: float | None, read_bufsize: int | None
          ) -> Callable[[aiohttp.ClientSession], Awaitable[aiohttp.ClientResponse]]:
    """The request's POST through a session, for `keepalive.post_once_more`: its response, once its status and
    headers came. A second send (`raw.retried` set) lets the closed connection's hook go (the new connection's takes
    the exchange) and keeps the whole-request timeout running from the first send."""
    def send(session: aiohttp.ClientSession) -> Awaitable[aiohttp.ClientResponse]:
        t = timeout
        if raw.retried is not None:
            stamper = raw.stamper
            if stamper is not None:
                if stamper.raw is raw:
                    stamper.detach()
                raw.stamper = None
            if deadline is not None:
                left = max(deadline - asyncio.get_running_loop().time(), 1e-3)
                t = aiohttp.ClientTimeout(total=left, connect=timeout.connect, sock_read=timeout.sock_read,
                                          sock_connect=timeout.sock_connect, ceil_threshold=timeout.ceil_threshold)
        return session.post(url, data=body, headers=headers, timeout=t, trace_request_ctx=raw, allow_redirects=False,
                            read_bufsize=read_bufsize)
    return send


def _nothing_came(raw: RawExchange, exc: aiohttp.ClientError) -> bool:
    """What the client may send again (`keepalive.post_once_more`): a close or reset before any byte of an answer came,
    as the connection's hook saw (`first_byte` is stamped at the first byte read). Nothing where the connection is not
    hooked (`raw.stamper`, which sees every byte read: `stamp_in_protocol` off), since aiohttp keeps no word of the
    bytes that came before a reset or of a status line cut short."""
    return (raw.stamper is not None and raw.status is None and raw.first_byte is None
            and keepalive.closed_unanswered(exc))


GATEWAY_TIMEOUT = 504
"""A gateway's timeout (status 504, or an error event whose `code` is 504): the request's record is a `timeout`, with
the gateway's words. llmsweep's PD router answers it a little before the client's own timeout would end the request
(`engine_ids.TIMEOUT_HEADER`), naming the worker that hung, where the client's timeout could name none."""


def to_record(raw: RawExchange, spec: RequestSpec, **kw: Any) -> tuple[RequestRecord, str]:
    """Parse the raw exchange into a record (and the output text the lane program may want); never raises.

    A response the parser cannot read (a fault it was not written for) is that request's `protocol` failure, with
    the exception's words: one raise used to end the whole run (in the event loop) or the record helper process, and
    with it every later record of the run (see `_to_record` for the keywords)."""
    try:
        return _to_record(raw, spec, **kw)
    except Exception as exc:  # whatever the server sent, the request gets its one record
        raw.reads, raw.body = [], None
        raw.error_class = "protocol"
        raw.error = _utf8(f"the client could not read this response ({type(exc).__name__}: {exc})"[:800])
        return _to_record(raw, spec, **kw)


def _to_record(
    raw: RawExchange,
    spec: RequestSpec,
    *,
    rid: str,
    worker: int,
    phase: str,
    overflow_patterns: tuple[str, ...],
    ignore_eos: bool = False,
    sends_done: bool | None = None,
) -> tuple[RequestRecord, str]:
    """Parse the raw exchange into a record (and the output text the lane program may want).

    `ignore_eos`: the request was sent with `ignore_eos` (the server owes `max_tokens` tokens); `sends_done`: the
    server's dialect ends every stream with `[DONE]` (`Endpoint.sends_done`). Both feed `judge_stream`."""
    if raw.body is not None:
        _ReadStamper.cut(raw, raw.body)
        raw.body = None
    ident = spec.identity
    rec = RequestRecord(
        id=rid,
        trace=ident.trace,
        lane=ident.lane,
        turn=ident.turn,
        phase=phase,
        session=ident.session,
        node=ident.node,
        request_index=ident.request_index,
        api=spec.api,
        scheduled_at=to_unix(raw.scheduled),
        sent_at=to_unix(raw.sent) if raw.sent else None,
        first_byte_at=to_unix(raw.first_byte) if raw.first_byte is not None else None,
        end_at=to_unix(raw.end) if raw.end is not None else None,
        status=raw.status,
        error_class=raw.error_class,  # type: ignore[arg-type]
        error=raw.error,
        input_tokens_expected=spec.input_tokens,
        theoretical_cached_tokens=spec.theoretical_cached_tokens,
        max_tokens=spec.max_tokens,
        worker=worker,
        retried=raw.retried is not None,
    )
    text = ""
    if raw.error_class == "http":
        body = b"".join(d for _, d in raw.reads).decode("utf-8", "replace")
        rec.error = f"{raw.error or f'HTTP {raw.status}'}: {body[:500]}" if body else raw.error or f"HTTP {raw.status}"
        if _is_overflow(body, overflow_patterns):
            rec.error_class = "context_overflow"
        elif raw.status == GATEWAY_TIMEOUT:
            rec.error_class = "timeout"
        return rec, text
    if raw.reads:
        parsed = parse_stream(raw.reads, keep_text=True, max_tokens=spec.max_tokens)
        rec.chunk_times = [to_unix(t) for t in parsed.chunk_times]
        rec.chunk_tokens = parsed.chunk_tokens
        rec.first_token_at = rec.chunk_times[0] if rec.chunk_times else None
        rec.prompt_tokens = parsed.prompt_tokens
        rec.completion_tokens = parsed.completion_tokens
        rec.usage_over_max_tokens = parsed.usage_over_max_tokens
        rec.cached_tokens = parsed.cached_tokens
        rec.finish_reason = parsed.finish_reason
        text = parsed.output_text
        if rec.error_class is None:
            if parsed.stream_error is not None:
                overflow = _is_overflow(parsed.stream_error, overflow_patterns)
                rec.error_class = ("context_overflow" if overflow else
                                   "timeout" if parsed.stream_error_code == GATEWAY_TIMEOUT else "http")
                rec.error = f"error event in stream: {parsed.stream_error[:500]}"
            elif parsed.protocol_error is not None:
                if parsed.cut:
                    rec.error_class, rec.error = "truncated", f"stream ended inside an event ({parsed.protocol_error})"
                else:
                    rec.error_class, rec.error = "protocol", parsed.protocol_error
            elif not parsed.data_events:
                rec.error_class, rec.error = _not_a_stream(b"".join(d for _, d in raw.reads), overflow_patterns)
            elif not rec.chunk_times:
                # no token to time: whatever its usage says, the request measured nothing (a server whose every
                # chunk was `choices: []` or empty text, usage 8, was a success with no latency at all)
                rec.error_class = "empty_output" if _ended_at_once(parsed) else "protocol"
                rec.error = _no_content(parsed)
            elif (why := judge_stream(parsed, max_tokens=spec.max_tokens, ignore_eos=ignore_eos,
                                      sends_done=sends_done)) is not None:
                rec.error_class, rec.error = "truncated", why
    elif rec.error_class is None:
        rec.error_class, rec.error = "protocol", "empty response body"
    if rec.error is not None and not rec.error.isascii():
        rec.error = _utf8(rec.error)
    if rec.finish_reason is not None and not rec.finish_reason.isascii():
        rec.finish_reason = _utf8(rec.finish_reason)
    return rec, text


def _utf8(text: str) -> str:
    """`text` with any lone surrogate (a server's JSON may escape one: `"\\ud800"`) replaced: the record's encoder
    refuses them, and one in a stream's error message or finish_reason crashed the whole run."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _ended_at_once(parsed: ParsedStream) -> bool:
    """Whether a stream without content is a model's immediate end-of-sequence: choices came, and the last said
    `finish_reason: stop`, with no output token counted beyond the end token itself (a usage above one is a server
    that counted tokens it never sent: the protocol's breach)."""
    claimed = parsed.completion_tokens if parsed.completion_tokens is not None else parsed.usage_over_max_tokens
    return bool(parsed.choice_events) and parsed.finish_reason == "stop" and (claimed is None or claimed <= 1)


def _no_content(parsed: ParsedStream) -> str:
    """The error of a stream that brought no content chunk (no event whose choices hold output text), saying what
    came: its events (`[DONE]` included), those with choices, the finish reason and the usage count."""
    choices = parsed.choice_events or 0
    said = f"stream ended without any content chunk: {count_of(parsed.data_events, 'event')}"
    said += ", none with a choice" if not choices else f", {choices} with choices whose text is empty"
    if parsed.finish_reason is not None:
        said += f" (finish_reason {parsed.finish_reason!r})"
    claimed = parsed.completion_tokens if parsed.completion_tokens is not None else parsed.usage_over_max_tokens
    if claimed is not None:
        said += f"; usage said {count_of(claimed, 'completion token')}"
    said += "; then [DONE]" if parsed.done else ""
    if _ended_at_once(parsed):
        said += (": the model's end-of-sequence came first (a run that sends ignore_eos, where the engine takes it, "
                 "keeps it from ending an answer)")
    return said


def _not_a_stream(body: bytes, overflow_patterns: tuple[str, ...]) -> tuple[ErrorClass, str]:
    """The error of a 200 answer whose body holds no SSE `data:` event: a whole JSON answer (a server or gateway that
    ignored `stream: true`), a JSON error sent with status 200, or something else; each said with the body's start."""
    text = body.decode("utf-8", "replace")
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: JSON nested past the parser's depth
        obj = None
    if isinstance(obj, dict) and obj.get("error"):
        words = error_words(obj["error"])
        overflow = _is_overflow(words, overflow_patterns)
        return ("context_overflow" if overflow else "http"), f"HTTP 200 with an error and no stream: {words[:500]}"
    if isinstance(obj, dict) and "choices" in obj:
        return "protocol", ("the server answered with one JSON object, not an event stream (stream ignored?): "
                            f"{text[:300]}")
    return "protocol", f"the response body holds no SSE `data:` event: {text[:300]!r}"


def judge_stream(parsed: ParsedStream, *, max_tokens: int | None, ignore_eos: bool,
                 sends_done: bool | None) -> str | None:
    """Why a stream that ended cleanly is incomplete (a `truncated` failure), or None when it is whole.

    Incomplete: a dialect that promises `[DONE]` did not send it; a stream with neither `[DONE]` nor a
    `finish_reason` (every OpenAI-compatible server sends one or the other at the end); the server says it aborted
    the request or ended it on an error (`finish_reason` 'abort', 'error'); or, under `ignore_eos`, fewer completion
    tokens (usage, else counted chunks) than `max_tokens` without `finish_reason: length`. A stream that stops
    early on its own (`finish_reason: stop` without `ignore_eos`) is whole: a short output, which the summary counts
    and a gate bounds. Runs once per request."""
    reason = parsed.finish_reason
    if sends_done and not parsed.done:
        return f"stream ended without the `data: [DONE]` the server sends (finish_reason {reason!r})"
    if not parsed.done and reason is None:
        return "stream ended without `data: [DONE]` or a finish_reason"
    if reason == "abort":
        return "the server aborted the request (finish_reason 'abort')"
    if reason == "error":  # vLLM's request-level internal error (FinishReason.ERROR): the output stopped there
        return "the server ended the request on an error (finish_reason 'error')"
    if ignore_eos and max_tokens and reason != "length":
        got = parsed.completion_tokens if parsed.completion_tokens is not None else sum(parsed.chunk_tokens)
        if got < max_tokens:
            return f"{got} of {max_tokens} tokens under ignore_eos, finish_reason {reason!r}"
    return None


def _is_overflow(text: str, patterns: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(p.lower() in low for p in patterns)
