"""The raw request record: one line of `records.jsonl`, shared by the client and the simulator's predictor.

Every metric is recomputed from these fields, so they hold raw facts only (absolute unix times, server usage, the
error class) and never derived statistics. The writer appends one line per finished request with a single
`os.write` on an O_APPEND descriptor: several worker processes may share the file, and a SIGKILL loses nothing that
already finished.

A line is encoded by :func:`record_line`, whoever wrote the record (the client, aiperf's conversion, the predictor in
virtual time): `jsonline.dumps_line`'s compact JSON (a record of a thousand chunk times cost ~0.7 ms through
`json.dumps`, ~20x less through orjson). `metrics.accumulate` reads a compact line without decoding its chunk
arrays. A record's floats are clock readings, never NaN.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from llmsweep.jsonline import dumps_line
from llmsweep.metrics.gates import OUTPUT_NOT_WRITTEN

ErrorClass = Literal["http", "timeout", "connection", "protocol", "truncated", "context_overflow", "empty_output",
                     "cancelled"]
"""`truncated`: the stream ended cleanly but incomplete (no terminator the server's dialect promises, or fewer tokens
than asked under `ignore_eos` without `finish_reason: length`; see `transport.judge_stream`). `empty_output`: a
well-formed answer that the model ended at once (`finish_reason: stop`, no output text, no token to time): its
end-of-sequence came first, which `ignore_eos` prevents where the engine takes it; not the server breaking the
protocol."""



class OutputWriteError(OSError):
    """A write of the client's own output failed (`records.jsonl`, `server_metrics.jsonl`: a full disk, a quota, a
    file-size limit, an I/O error). A benchmark that cannot keep its records measures nothing, so the run stops at
    once — in-flight requests cancelled, no more sent — and `run_benchmark` raises this once its workers have ended:
    the OSError as the write raised it (errno, words), named by the file (`os.write` names none). It waited for the
    run's end (every planned request or the whole window sent and lost) before, or for the stall timeout."""

    @classmethod
    def of(cls, exc: OSError, path: Path | str) -> OutputWriteError:
        return cls(exc.errno, exc.strerror or str(exc), str(path))

    @property
    def code(self) -> str:
        """`ENOSPC`, `EFBIG`, …: the errno's name (or its number)."""
        return errno.errorcode.get(self.errno, str(self.errno)) if self.errno is not None else "?"

    def reason(self) -> str:
        """One line: what could not be written and why (the stop reason of the run, a failed job's reason)."""
        return f"{OUTPUT_NOT_WRITTEN} {self.filename}: {self.strerror} ({self.code}); the run stopped at once"

    def wire(self) -> tuple[int | None, str, str]:
        """(errno, words, file): what crosses from a worker or helper process (`from_wire`)."""
        return self.errno, self.strerror or "", str(self.filename)

    @classmethod
    def from_wire(cls, wire: tuple[int | None, str, str]) -> OutputWriteError:
        return cls(*wire)


def write_output(fd: int, data: bytes, path: Path | str) -> None:
    """Append `data` to the client's output file `path` open as `fd`: a write cut short (the disk filled mid-line)
    goes on, and the one that fails raises :class:`OutputWriteError` naming `path`."""
    rest = memoryview(data)
    try:
        while rest:
            rest = rest[os.write(fd, rest):]
    except OSError as exc:
        raise OutputWriteError.of(exc, path) from exc


@dataclass(slots=True)
class RequestRecord:
    """One request as it happened. Times are absolute unix seconds; None when the stage was never reached."""

    id: str
    trace: str = ""
    lane: int = 0
    turn: int = 0
    phase: str = "profiling"
    session: str = ""
    node: str = ""
    request_index: int = 0
    api: str = "chat"
    scheduled_at: float | None = None
    sent_at: float | None = None
    first_byte_at: float | None = None
    first_token_at: float | None = None
    end_at: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    status: int | None = None
    error_class: ErrorClass | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    input_tokens_expected: int | None = None
    theoretical_cached_tokens: int | None = None
    max_tokens: int | None = None
    finish_reason: str | None = None
    worker: int = 0
    retried: bool = False
    """Sent twice: the first send went out on a pooled keep-alive connection the server closed before any byte of an
    answer (its idle timeout crossed the request), the second on a new connection (`client.transport.exchange`).
    `sent_at` is the first send's, so TTFT and E2EL hold the failed attempt; `error` of a second send that failed
    names both."""
    usage_over_max_tokens: int | None = None
    """The server's usage count of output tokens where it exceeded `max_tokens` (a server that ignored the limit, or
    miscounts): not taken as `completion_tokens`, which is then None, so the chunks count the output; the summary
    counts such a request in `requests.long_outputs` (`client.sse.parse_stream`)."""

    @property
    def ok(self) -> bool:
        return self.error_class is None

    @property
    def output_tokens(self) -> int:
        """The output's size as the summary counts it: the usage count, else the chunks' tokens."""
        return self.completion_tokens if self.completion_tokens is not None else sum(self.chunk_tokens)

    def to_dict(self) -> dict[str, Any]:
        # not dataclasses.asdict: its deep copy of every chunk time cost more than the rest of writing a record
        out = {name: getattr(self, name) for name in _FIELDS}
        out["chunk_times"] = list(self.chunk_times)
        out["chunk_tokens"] = list(self.chunk_tokens)
        return out

    def to_line(self) -> bytes:
        return record_line(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        return cls(**data)


_FIELDS = tuple(f.name for f in fields(RequestRecord))


def record_line(record: Mapping[str, Any]) -> bytes:
    """One line of `records.jsonl` (newline included) for a record's fields (`RequestRecord.to_dict`'s shape)."""
    return dumps_line(record)


class RecordWriter:
    """Appends records to `records.jsonl`, one unbuffered write per line, so finished requests survive a SIGKILL."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.count = 0

    def write(self, record: RequestRecord) -> None:
        """Append one record; a failed write raises `OutputWriteError` (naming this file)."""
        write_output(self._fd, record.to_line(), self.path)
        self.count += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
