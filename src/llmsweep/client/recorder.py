"""Records off the timing path: a helper process parses finished streams and writes their records.

The event loop that stamps network reads should do little else. At high concurrency, parsing every finished stream
(SSE split, JSON decode, token counts) and writing its record took about a third of the loop's CPU, and while it ran
the first tokens of other requests waited unread in their sockets: that wait is billed to their TTFT. With a
`RecordHelper`, the loop hands each complete stream (its stamps and raw bytes, one batch per loop iteration, through a
non-blocking pipe) to a helper process that runs the same `transport.to_record` and `RecordWriter`, and sends back one
tally per record (phase, error class, output tokens) so the worker's counters, progress and failure-ratio stop work
as before. Streams that failed, and runs whose programs read the output, are still parsed in the loop (the program is
waiting for the outcome).

The helper is a fresh interpreter (`python -m llmsweep.client._record_helper`), so nothing of the calling script runs
in it again. It lives exactly as long as its pipe: it exits once the loop closes it, or the worker dies (the kernel
closes the pipe), after writing what it was already given; signals to the process group do not cut it short.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from llmsweep.client.records import OutputWriteError, RecordWriter
from llmsweep.client.transport import RawExchange, to_record
from llmsweep.host import interrupts_held, stopped_by_parent_only
from llmsweep.workload.base import RequestIdentity, RequestSpec

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!i")  # multiprocessing.Connection's frame header: `recv_bytes` on the other end reads ours
_MAX_FRAME = 0x7FFFFFFF

Tally = tuple[str, str | None, int | None, str | None]
"""What the worker learns of a record the helper wrote: (phase, error class, output tokens, error message). The
message comes with the first record of its class only: the worker keeps no other (`WorkerStats.first_errors`)."""


_RAW_FIELDS = ("scheduled", "sent", "first_byte", "end", "status", "error_class", "error", "marks", "body",
               "retried")
_ID_FIELDS = tuple(f.name for f in fields(RequestIdentity))


def to_wire(raw: RawExchange, spec: RequestSpec) -> tuple[Any, ...]:
    """What the helper needs of a finished exchange, as plain tuples (pickling the dataclasses cost three times as
    much): the exchange's stamps and bytes, and the parts of its request a record is made from (no prompt: an agentic
    history can be megabytes)."""
    ident = spec.identity
    return (tuple(getattr(raw, f) for f in _RAW_FIELDS), spec.api, spec.max_tokens, spec.input_tokens,
            spec.theoretical_cached_tokens, tuple(getattr(ident, f) for f in _ID_FIELDS))


def from_wire(wire: tuple[Any, ...]) -> tuple[RawExchange, RequestSpec]:
    raw_fields, api, max_tokens, input_tokens, cached, ident = wire
    raw = RawExchange(**dict(zip(_RAW_FIELDS, raw_fields, strict=True)))
    spec = RequestSpec(api=api, max_tokens=max_tokens, input_tokens=input_tokens, theoretical_cached_tokens=cached,
                       identity=RequestIdentity(**dict(zip(_ID_FIELDS, ident, strict=True))))
    return raw, spec


def helper_main(spec: dict[str, Any]) -> None:
    """The helper process (`_record_helper`): read batches until the worker closes the pipe, write their records."""
    inbox = Connection(spec["inbox"], writable=False)
    outbox = Connection(spec["outbox"], readable=False)
    _serve(inbox, outbox, spec["records"], int(spec["worker"]), tuple(spec["overflow_patterns"]), spec["sends_done"])


def _serve(inbox: Connection, outbox: Connection, records_path: str, worker: int,
           overflow_patterns: tuple[str, ...], sends_done: bool | None) -> None:
    # The worker decides when the run ends and its pipe says so: a Ctrl-C, a SIGTERM or a SIGHUP to the process group
    # must not cut the records of a run that is winding down in order. A dead worker closes the pipe.
    stopped_by_parent_only()
    writer = RecordWriter(Path(records_path))
    told: set[str] = set()  # error classes whose first message the worker has been sent
    broken = False  # a write failed: the worker was told (it stops the run); the rest is read, not written
    try:
        outbox.send_bytes(pickle.dumps([]))  # ready: the worker sends no request while this process boots
        while True:
            try:
                batch = pickle.loads(inbox.recv_bytes())
            except EOFError:
                with contextlib.suppress(OSError):  # the client's CPU includes this process's
                    outbox.send_bytes(pickle.dumps({"cpu_s": time.process_time()}))
                return
            tallies: list[Tally] = []
            for wire, rid, phase, ignore_eos in batch:
                if broken:
                    break
                raw, spec = from_wire(wire)
                rec, _ = to_record(raw, spec, rid=rid, worker=worker, phase=phase, overflow_patterns=overflow_patterns,
                                   ignore_eos=ignore_eos, sends_done=sends_done)
                try:
                    writer.write(rec)
                except OutputWriteError as exc:  # said to the worker at once, after the tallies of what was written
                    broken = True
                    with contextlib.suppress(OSError):
                        outbox.send_bytes(pickle.dumps(tallies, protocol=pickle.HIGHEST_PROTOCOL))
                        outbox.send_bytes(pickle.dumps({"write_error": exc.wire()}))
                    tallies = []
                    break
                error = None
                if rec.error_class is not None and rec.error_class not in told:
                    told.add(rec.error_class)
                    error = rec.error
                tallies.append((phase, rec.error_class, rec.output_tokens, error))
            if tallies:
                with contextlib.suppress(OSError):  # the worker is gone: keep writing what it sent
                    outbox.send_bytes(pickle.dumps(tallies, protocol=pickle.HIGHEST_PROTOCOL))
    finally:
        writer.close()
        outbox.close()


class _TallyReader(asyncio.Protocol):
    """Reads the helper's framed tallies on the worker's loop (and a failed write, as it happens)."""

    def __init__(self, on_tallies: Callable[[list[Tally]], None],
                 on_write_error: Callable[[OutputWriteError], None] | None = None) -> None:
        self.on_tallies = on_tallies
        self.on_write_error = on_write_error
        self.buf = bytearray()
        self.cpu_s = 0.0  # the helper's CPU time, reported as it exits
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            (n,) = _HEADER.unpack_from(buf)
            if len(buf) < 4 + n:
                return
            message = pickle.loads(bytes(buf[4 : 4 + n]))
            del buf[: 4 + n]
            if not self.ready.done():
                self.ready.set_result(None)
            if isinstance(message, dict) and "write_error" in message:
                if self.on_write_error is not None:
                    self.on_write_error(OutputWriteError.from_wire(message["write_error"]))
            elif isinstance(message, dict):
                self.cpu_s = float(message.get("cpu_s", 0.0))
            else:
                self.on_tallies(message)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(RuntimeError("the record helper process ended before it was ready"))
        if not self.closed.done():
            self.closed.set_result(None)


class RecordHelper:
    """The worker's side of the helper process: `submit` finished streams, `close` at the end of the run."""

    def __init__(self, records_path: Path, *, worker: int, overflow_patterns: tuple[str, ...],
                 sends_done: bool | None, on_tallies: Callable[[list[Tally]], None],
                 on_write_error: Callable[[OutputWriteError], None] | None = None) -> None:
        self._args = (str(records_path), worker, tuple(overflow_patterns), sends_done)
        self._on_tallies = on_tallies
        self._on_write_error = on_write_error
        self._batch: list[tuple[tuple[Any, ...], str, str, bool]] = []
        self._flush_scheduled = False
        self._proc: Any = None
        self._writer: asyncio.WriteTransport | None = None
        self._reader: _TallyReader | None = None
        self.submitted = 0

    @property
    def cpu_s(self) -> float:
        """CPU seconds the helper process used (known once it exited)."""
        return self._reader.cpu_s if self._reader is not None else 0.0

    async def start(self) -> None:
        """Start the helper (`python -m llmsweep.client._record_helper`: a fresh interpreter that imports nothing of
        the caller's script, unlike a multiprocessing spawn) and wait until it is ready."""
        inbox_r, inbox_w = os.pipe()
        outbox_r, outbox_w = os.pipe()
        path, worker, patterns, sends_done = self._args
        spec = {"inbox": inbox_r, "outbox": outbox_w, "records": path, "worker": worker,
                "overflow_patterns": list(patterns), "sends_done": sends_done}
        package_root = str(Path(__file__).resolve().parents[2])  # where `llmsweep` was imported from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH"))))}
        try:
            with interrupts_held():  # a signal to the group while it boots must not end it: it ignores them after
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "llmsweep.client._record_helper", json.dumps(spec)],
                    pass_fds=(inbox_r, outbox_w), stdin=subprocess.DEVNULL, env=env,
                )
        finally:
            os.close(inbox_r)
            os.close(outbox_w)
        loop = asyncio.get_running_loop()
        self._writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(inbox_w, "wb", buffering=0))
        _, reader = await loop.connect_read_pipe(lambda: _TallyReader(self._on_tallies, self._on_write_error),
                                                 os.fdopen(outbox_r, "rb", buffering=0))
        self._reader = reader
        await reader.ready  # its start-up (an interpreter and imports, ~0.3 s of CPU) stays out of the measurement

    def submit(self, raw: RawExchange, spec: RequestSpec, rid: str, phase: str, ignore_eos: bool) -> None:
        """Queue a complete stream; the batch goes to the helper once this loop iteration is over."""
        self._batch.append((to_wire(raw, spec), rid, phase, ignore_eos))
        self.submitted += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._batch or self._writer is None or self._writer.is_closing():
            return
        payload = pickle.dumps(self._batch, protocol=pickle.HIGHEST_PROTOCOL)
        self._batch = []
        if len(payload) > _MAX_FRAME:  # pragma: no cover - a 2-GiB batch of finished streams
            raise ValueError("a batch of finished streams exceeds 2 GiB")
        self._writer.write(_HEADER.pack(len(payload)) + payload)

    async def close(self) -> None:
        """Send what is queued, let the helper write it, and wait for its last tallies and its exit."""
        self._flush()
        if self._writer is not None:
            self._writer.close()  # after the buffered batches are written: the helper reads them, then EOF
        if self._reader is not None:
            await self._reader.closed
        if self._proc is not None:
            try:
                code = await asyncio.to_thread(self._proc.wait, 30.0)
            except subprocess.TimeoutExpired:  # pragma: no cover - a helper stuck writing records
                log.error("the record helper did not exit; killing it")
                self._proc.kill()
                self._proc.wait()
            else:
                if code:
                    log.error("the record helper exited with %s: records may be missing", code)

    def abandon(self, *, kill: bool = False) -> None:
        """Stop at once (the run was abandoned): records queued here are lost; those sent are written, unless `kill`
        ends the helper too."""
        if self._writer is not None:
            self._writer.abort()
        if kill and self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
