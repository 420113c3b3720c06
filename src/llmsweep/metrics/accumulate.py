"""One streaming pass over `records.jsonl`: the per-record accumulator that `summary` turns into a Summary.

Only successful profiling records feed latency, token and throughput columns; warmup and failed records are counted.
Memory is bounded by per-request scalars: the inter-chunk gaps (hundreds per request) go into a `SketchColumn`
(exact while small, a 0.05 %-wide log histogram beyond). Time is linear in the bytes read, and most of those bytes
are `chunk_times` arrays, so a line is not decoded whole: the arrays are cut out of it, the rest is decoded with a
few hundred other lines in one `json` call, and the times of many records are parsed together by `_decimal_times`
(numpy over the bytes, correctly rounded like `float()`), 5-7x cheaper than a Python float per chunk. A big file is
split into byte ranges parsed by parallel processes and merged in file order, so the result is the one of a
sequential pass (up to the summation order of the ITL mean and std once the sketch is a histogram).
"""

from __future__ import annotations

import json
import json.scanner
import math
import multiprocessing as mp
import signal
from collections import Counter
from collections.abc import Iterable, Iterator
from multiprocessing.context import BaseContext
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any, cast

import numpy as np

from llmsweep.client.sse import STEP_OVERSHOOT_TOKENS
from llmsweep.errors import ResultError
from llmsweep.host import INTERRUPT_SIGNAL_NAMES, interrupt_signals, usable_cpus
from llmsweep.metrics.stats import Column, SketchColumn

_GAP_BATCH = 200_000
"""Chunk times (Python floats, from dict records) gathered before their gaps are folded into the ITL sketch."""
_TEXT_BATCH = 2 * 2**20
"""Bytes of `chunk_times` text parsed together (small enough for the numpy temporaries to stay in cache)."""
_ITL_EXACT_MAX = 2_000_000
"""Inter-chunk gaps held exactly (8 MB of float32); beyond, the ITL column is a histogram (percentiles to 0.025 %)."""
_LINE_BATCH = 256
"""Compact lines whose heads are decoded together."""
_CHUNK_TIMES = b'"chunk_times":['
_CHUNK_TOKENS = b'"chunk_tokens":['
_PART_BYTES = 64 * 2**20
"""Files above this size are parsed by several processes (JSON decoding dominates the cost)."""
_MAX_PARTS = 8
_UNANSWERED = frozenset({"timeout", "connection", "cancelled"})
"""Error classes where the server's last word is the last streamed chunk, not the record's end."""


_scan = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))  # typeshed types the context as a scanner


def _loads(line: bytes) -> Any:
    """`json.loads` of one whole line without its Python-level wrappers."""
    try:
        text = line.decode()
        value, end = _scan(text, 0)
        if end == len(text) or text[end:].isspace():
            return value
    except (StopIteration, ValueError):
        pass
    return json.loads(line)  # anything unusual (a BOM, leading space, trailing data, not JSON): json.loads decides


def _loads_many(lines: list[bytes]) -> list[Any]:
    """Each line decoded as `json.loads` would, None where it is not JSON. The lines (each "{...}") are decoded as
    one array, which costs half as much as a call per line; if that array is not exactly one value per line, each
    line is decoded on its own."""
    try:
        text = (b"[" + b",".join(lines) + b"]").decode()
        values, end = _scan(text, 0)
        if end == len(text) and len(values) == len(lines):
            return list(values)
    except (StopIteration, ValueError):
        pass
    out: list[Any] = []
    for line in lines:
        try:
            out.append(_loads(line))
        except ValueError:
            out.append(None)
    return out


def iter_records(source: Iterable[dict[str, Any]] | Path | str) -> Iterator[dict[str, Any]]:
    """Records from a `records.jsonl` path (a torn last line is skipped) or any iterable of dicts/records."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise ResultError(f"summarise: {path} does not exist", fix="point at a run directory's records.jsonl")
        with path.open("rb") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
        return
    for rec in source:
        yield rec if isinstance(rec, dict) else rec.to_dict()


_ASCII_ZEROS = np.uint64(0x3030303030303030)
_HIGH_NIBBLES = np.uint64(0xF0F0F0F0F0F0F0F0)
_SIXES = np.uint64(0x0606060606060606)
_THREES = np.uint64(0x3333333333333333)
_PAIR_MASK = np.uint64(0x000000FF000000FF)
_MUL_HUNDRED = np.uint64(100 + (1_000_000 << 32))
_MUL_ONE = np.uint64(1 + (10_000 << 32))
_LEADING_BYTES = np.array([(1 << (8 * min(k, 8))) - 1 for k in range(10)], dtype=np.uint64)
"""The low k bytes of a word (all of them from 8): a fraction's digits in its first eight-byte word."""


def _eight_digits(words: np.ndarray) -> tuple[np.ndarray, bool]:
    """The values of little-endian words of eight ASCII digits (first digit in the lowest byte), and whether every
    byte was a digit (the SWAR steps of Lemire's `parse_eight_digits_unrolled`)."""
    ok = bool((((words & _HIGH_NIBBLES) | (((words + _SIXES) & _HIGH_NIBBLES) >> np.uint64(4))) == _THREES).all())
    v = words - _ASCII_ZEROS
    v = v * np.uint64(10) + (v >> np.uint64(8))
    v = ((v & _PAIR_MASK) * _MUL_HUNDRED + ((v >> np.uint64(16)) & _PAIR_MASK) * _MUL_ONE) >> np.uint64(32)
    return (v & np.uint64(0xFFFFFFFF)).astype(np.int64), ok


def _decimal_times(text: bytes, count: int) -> np.ndarray:
    """`count` comma-separated JSON numbers as float64, each the double `float()` would give.

    The fast path takes what the client writes for unix times: ten integer digits, a point and 1-9 fraction digits.
    Each number is read as two eight-digit words (SWAR) and three single digits, with no Python call per number, and
    its fraction (in 1e-9 units) rounded to the double's grid, so the value is the correctly rounded one. Anything
    else (exponents, signs, spaces, small values) goes to `json.loads`."""
    b = np.frombuffer(text, dtype=np.uint8)
    commas = np.flatnonzero(b == 44)
    if count and commas.size == count - 1:
        points = np.empty(count, dtype=np.int64)
        points[0] = 10
        points[1:] = commas + 11
        frac_digits = np.empty(count, dtype=np.int64)
        frac_digits[:-1] = commas - points[:-1] - 1
        frac_digits[-1] = b.size - points[-1] - 1
        if frac_digits.min() >= 1 and frac_digits.max() <= 9 and (b[points] == 46).all():
            padded = np.full(b.size + 24, 48, dtype=np.uint8)
            padded[:b.size] = b
            words = np.ndarray((b.size + 17,), dtype="<u8", buffer=padded, strides=(1,))  # the 8 bytes from each byte
            high, ok_high = _eight_digits(words[points - 8])  # integer digits 3-10
            keep = _LEADING_BYTES[frac_digits]
            frac8, ok_frac = _eight_digits((words[points + 1] & keep) | (_ASCII_ZEROS & ~keep))  # fraction digits 1-8
            lead = padded[points - 10] - np.uint8(48)
            second = padded[points - 9] - np.uint8(48)
            ninth = np.where(frac_digits == 9, padded[points + 9], 48) - np.uint8(48)
            if (ok_high and ok_frac and int(lead.min()) >= 1  # ten digits, no leading zero: whole >= 1e9 > 2**20
                    and max(int(lead.max()), int(second.max()), int(ninth.max())) <= 9):
                whole = ((lead.astype(np.int64) * 10 + second) * 100_000_000 + high).astype(np.float64)  # exact
                frac = (frac8 * 10 + ninth).astype(np.float64)  # in 1e-9 units, < 1e9: exact
                # The double's grid is 2**-shift (shift <= 23 as whole >= 1e9). frac * 2**shift / 1e9 is a multiple
                # of 1/5**9, never within 2.5e-7 of a half, and the float product errs by < 2e-9: rint is exact.
                shift = 53 - np.frexp(whole)[1]
                steps = np.rint(frac * np.ldexp(1e-9, shift))
                return np.asarray(whole + np.ldexp(steps, -shift))
    try:
        values = np.asarray(json.loads(b"[" + text + b"]"), dtype=np.float64)
    except ValueError:
        values = np.zeros(0)
    if values.shape != (count,):
        raise ResultError("summarise: a chunk_times array holds something other than numbers",
                          fix="check the records file; chunk_times is a list of unix times")
    return values


class Accumulator:
    """Everything summarise needs, gathered in one pass."""

    def __init__(self) -> None:
        self.total = 0
        self.successful = 0
        self.failed = 0
        self.warmup = 0
        self.warmup_failed = 0
        self.warmup_cancelled = 0
        self.cancelled = 0
        self.context_overflow = 0
        self.categories: Counter[str] = Counter()
        self.ttft = Column()
        self.e2el = Column()
        self.tpot = Column()
        self.e2e_norm = Column()
        self.isl = Column()
        self.osl = Column()
        self.ends = Column()
        self.lag = Column()
        # Every gap between two chunks of a request as the client saw it, zeros included: chunks that arrived in one
        # read are stamped alike, and dropping those gaps made ITL the gap between reads (up to 2x TPOT).
        self.itl = SketchColumn(exact_max=_ITL_EXACT_MAX, keep_zero=True)
        self.span_start = Column()
        self.span_end = Column()
        self.first_send = float("inf")
        self.last_end = float("-inf")
        self.profile_first_send = float("inf")
        self.input_sum = 0
        self.output_sum = 0
        self.theo_cached = 0
        self.theo_input = 0
        self.cached = 0
        self.cached_prompt = 0
        self.osl_mismatch = 0
        self.short_outputs = 0
        self.long_outputs = 0
        """Successful records with more output than their max_tokens: by their chunks, or by a usage count the client
        did not take for that reason (`usage_over_max_tokens`)."""
        self.unreadable = 0
        """Whole lines of the records file that are not a JSON record (`add_line`)."""
        self.implausible = 0
        """Profiling records whose times cannot be (`_implausible`): left out of every figure, and counted."""
        self.workers: set[int] = set()
        self._ct: list[float] = []
        self._ct_starts: list[int] = []
        self._text: list[bytes] = []
        self._text_counts: list[int] = []
        self._text_bytes = 0
        self._lines: list[tuple[bytes, bytes, bytes, int, float | None]] = []

    def add(self, r: dict[str, Any]) -> None:
        """One record as a dict (`chunk_times` a list of floats)."""
        if self._lines:
            self._flush_lines()  # records keep file order
        chunks = r.get("chunk_times") or []
        if self._add(r, chunks[-1] if chunks else None) and len(chunks) > 1:
            if self._text:
                self._flush_text()  # gaps keep file order
            self._ct_starts.append(len(self._ct))
            self._ct.extend(chunks)
            if len(self._ct) >= _GAP_BATCH:
                self._flush_gaps()

    def add_line(self, line: bytes) -> None:
        """One line of `records.jsonl`; a line that is not a whole JSON record is skipped: uncounted when it has no
        line end (the torn last line of a killed run), else counted in `unreadable` (the file was damaged).

        A compact line (the client's writer) has its `chunk_times` and `chunk_tokens` arrays cut out, and the rest
        is decoded with the next few hundred such lines in one `json` call; the times are parsed later, many records
        at once, and the tokens only when the record has no `completion_tokens`. Any other line is decoded whole."""
        i = line.find(_CHUNK_TIMES)
        if i < 0 or line[:1] != b"{" or not line.endswith((b"}\n", b"}", b"}\r\n")):
            try:
                r = json.loads(line)
            except ValueError:
                self._unreadable(line)
                return
            if not isinstance(r, dict):
                self._unreadable(line)
                return
            self.add(r)
            return
        a = i + len(_CHUNK_TIMES)
        j = line.find(b"]", a)
        if j < 0:
            self._unreadable(line)
            return
        times = line[a:j]
        k = line.find(_CHUNK_TOKENS, j)
        tokens = b""
        if k >= 0:
            b = k + len(_CHUNK_TOKENS)
            m = line.find(b"]", b)
            if m < 0:
                self._unreadable(line)
                return
            tokens = line[b:m]
            head = line[:a] + line[j:b] + line[m:]
        else:
            head = line[:a] + line[j:]
        n = times.count(b",") + 1 if times.strip() else 0
        try:
            last = float(times[times.rfind(b",") + 1:]) if n else None
        except ValueError:
            self._unreadable(line)
            return
        self._lines.append((head, times, tokens, n, last))
        if len(self._lines) >= _LINE_BATCH:
            self._flush_lines()

    def _unreadable(self, line: bytes) -> None:
        if line.endswith(b"\n"):  # a whole line the client wrote, damaged since (a torn last line has no end)
            self.unreadable += 1

    def _flush_lines(self) -> None:
        """Decode the pending lines' heads (one `json` call for all of them) and add their records."""
        if not self._lines:
            return
        records = _loads_many([line[0] for line in self._lines])
        for (head, times, tokens, n, last), r in zip(self._lines, records, strict=True):
            if not isinstance(r, dict):
                self._unreadable(head)
                continue
            if tokens.strip() and r.get("completion_tokens") is None:
                try:
                    r["chunk_tokens"] = json.loads(b"[" + tokens + b"]")
                except ValueError:
                    self._unreadable(head)
                    continue
            if self._add(r, last) and n > 1:
                if self._ct:
                    self._flush_gaps()  # gaps keep file order
                self._text.append(times)
                self._text_counts.append(n)
                self._text_bytes += len(times)
                if self._text_bytes >= _TEXT_BATCH:
                    self._flush_text()
        self._lines.clear()

    def _add(self, r: dict[str, Any], last_chunk: float | None) -> bool:
        """Everything but the gaps between chunks; True when the record's gaps belong to the ITL column."""
        self.total += 1
        err = r.get("error_class")
        sent = r.get("sent_at")
        if r.get("phase") == "warmup":
            self.warmup += 1
            if err == "cancelled":  # cut by a stop (a signal, the run's end): neither answered nor failed
                self.warmup_cancelled += 1
            elif err is not None:
                self.warmup_failed += 1
            return False
        if _implausible(sent, r.get("first_token_at"), r.get("end_at"), last_chunk):
            self.implausible += 1
            return False
        self.workers.add(int(r.get("worker") or 0))
        if sent is not None:
            self.profile_first_send = min(self.profile_first_send, sent)
            self._span(r, sent, err, last_chunk)
            sched = r.get("scheduled_at")
            if sched is not None and err != "cancelled":
                self.lag.append(max(sent - sched, 0.0))
        if err is not None:
            if err == "cancelled":
                self.cancelled += 1
                self.categories["cancelled"] += 1
                return False
            self.failed += 1
            self.categories[err] += 1
            if err == "context_overflow":
                self.context_overflow += 1
            return False
        self.successful += 1
        end = r.get("end_at")
        first = r.get("first_token_at")
        osl = r.get("completion_tokens")
        if osl is None:
            osl = sum(r.get("chunk_tokens") or ())
        isl = r.get("prompt_tokens")
        if isl is None:
            isl = r.get("input_tokens_expected") or 0
        self.isl.append(isl)
        self.osl.append(osl)
        self.input_sum += isl
        self.output_sum += osl
        if sent is not None:
            self.first_send = min(self.first_send, sent)
        if end is not None:
            self.last_end = max(self.last_end, end)
            self.ends.append(end)
        if last_chunk is None:
            last_chunk = end
        if sent is not None and first is not None:
            ttft = first - sent
            self.ttft.append(ttft)
            if last_chunk is not None:
                e2el = last_chunk - sent
                self.e2el.append(e2el)
                if osl >= 2:
                    self.tpot.append((e2el - ttft) / (osl - 1))
                if osl > 0 and e2el > 0:
                    self.e2e_norm.append(e2el / osl)
        theo = r.get("theoretical_cached_tokens")
        if theo is not None:
            self.theo_cached += theo
            self.theo_input += r.get("input_tokens_expected") or isl
        cached = r.get("cached_tokens")
        if cached is not None and r.get("prompt_tokens"):
            self.cached += cached
            self.cached_prompt += r["prompt_tokens"]
        max_tokens = r.get("max_tokens")
        if max_tokens is not None:
            if osl > max_tokens + STEP_OVERSHOOT_TOKENS or r.get("usage_over_max_tokens") is not None:
                self.osl_mismatch += 1
                self.long_outputs += 1
            elif osl > max_tokens:  # a speculative step's overshoot: a mismatch, not an output it did not serve
                self.osl_mismatch += 1
            elif osl < max_tokens:
                self.osl_mismatch += 1
                self.short_outputs += 1
        return True

    def _span(self, r: dict[str, Any], sent: float, err: str | None, last_chunk: float | None) -> None:
        """In flight from the send to the last thing the server sent: its end when it answered, its last chunk (or
        the send) when it timed out, lost the connection or was cancelled — a stalled server leaves a gap."""
        end = None if err in _UNANSWERED else r.get("end_at")
        last: float = end if end is not None else last_chunk if last_chunk is not None else sent
        self.span_start.append(sent)
        self.span_end.append(max(last, sent))

    def _flush_gaps(self) -> None:
        if not self._ct:
            return
        times = np.fromiter(self._ct, dtype=np.float64, count=len(self._ct))  # (as np.asarray, a quarter cheaper)
        gaps = np.diff(times)
        starts = np.asarray(self._ct_starts[1:], dtype=np.int64)
        keep = np.ones(gaps.size, dtype=bool)
        keep[starts - 1] = False  # the gap across two records is not a gap
        self.itl.extend(gaps[keep])
        self._ct.clear()
        self._ct_starts.clear()

    def _flush_text(self) -> None:
        if not self._text:
            return
        counts = np.asarray(self._text_counts, dtype=np.int64)
        times = _decimal_times(b",".join(self._text), int(counts.sum()))
        gaps = np.diff(times)
        keep = np.ones(gaps.size, dtype=bool)
        keep[np.cumsum(counts)[:-1] - 1] = False  # the gap across two records is not a gap
        self.itl.extend(gaps[keep])
        self._text.clear()
        self._text_counts.clear()
        self._text_bytes = 0

    def finish(self) -> None:
        self._flush_lines()
        self._flush_gaps()
        self._flush_text()

    def merge(self, other: Accumulator) -> None:
        """Append `other` (the accumulator of the following part of the file): columns keep file order, so the
        merged result is identical to one sequential pass."""
        for name in ("total", "successful", "failed", "warmup", "warmup_failed", "warmup_cancelled", "cancelled",
                     "context_overflow",
                     "input_sum", "output_sum", "theo_cached", "theo_input", "cached", "cached_prompt",
                     "osl_mismatch", "short_outputs", "long_outputs", "unreadable", "implausible"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.categories.update(other.categories)
        for name in ("ttft", "e2el", "tpot", "e2e_norm", "isl", "osl", "ends", "lag", "span_start", "span_end"):
            getattr(self, name).concat(getattr(other, name))
        self.itl.merge(other.itl)
        self.first_send = min(self.first_send, other.first_send)
        self.profile_first_send = min(self.profile_first_send, other.profile_first_send)
        self.last_end = max(self.last_end, other.last_end)
        self.workers |= other.workers


ORDER_SLACK_S = 1e-3
"""Out of order by more than this is implausible (`_implausible`): times rebuilt from another client's offsets (an
aiperf import adds its TTFT in ms to its start in ns) may cross by a rounding error, and that is not a clock going
backwards."""
_INF = float("inf")
_NEG_INF = float("-inf")


def _implausible(sent: Any, first: Any, end: Any, last_chunk: float | None) -> bool:
    """Whether a record's times cannot be those of a request: a time that is not a finite number (NaN or Infinity,
    which `json` reads from a damaged or hand-made file; the client never writes them), or an order no request has
    — its first token, last chunk or end before its send, its end before its first token, by more than
    `ORDER_SLACK_S` (a clock that went backwards). Such a record would feed some figures and not others (its tokens
    into throughput, its negative latencies dropped), or stop the summary (an infinite end). The client's clock is
    monotonic within a process."""
    slack = ORDER_SLACK_S
    if type(sent) is float and type(first) is float and type(end) is float and type(last_chunk) is float:
        # a streamed answer (the hot path): one chain of comparisons, each False on a NaN
        return not (_NEG_INF < sent <= first + slack and first <= end + slack and end < _INF
                    and sent <= last_chunk + slack and last_chunk < _INF)
    times = [t for t in (sent, first, end, last_chunk) if t is not None]
    for t in times:
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
            return True
    if sent is not None and any(t + slack < sent for t in times):
        return True
    return first is not None and end is not None and end + slack < first


implausible_times = _implausible
"""Public name of `_implausible`: the compare's per-request samples (`results.samples`) leave out what it leaves out."""


def _parse_worker_signals() -> None:
    """A forked parse worker takes the default signal dispositions back: it inherits the CLI's (SIGTERM, SIGHUP and
    the other interrupt signals raise `execute.signals.Interrupted`, `signals.install`), so the pool's own terminate
    at its end reached the workers as an exception in whatever they were doing (a traceback each, and once in a full
    test run a worker that never exited, the pool's join waiting on it). Ctrl-C (and Ctrl-\\) is the parent's to
    handle."""
    for sig in _WORKER_DEFAULT:
        signal.signal(sig, signal.SIG_DFL)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _WORKER_DEFAULT)  # blocked since the fork (`_parse_pool`)


_WORKER_DEFAULT = interrupt_signals(n for n in INTERRUPT_SIGNAL_NAMES if n not in ("SIGINT", "SIGQUIT"))
"""The signals a parse worker dies of quietly (the pool's terminate sends SIGTERM): every interrupt signal but
Ctrl-C's and Ctrl-\\'s."""


def _parse_pool(ctx: BaseContext, parts: int) -> Pool:
    """`parts` forked parse workers, started with SIGTERM, SIGHUP and the like blocked until their initializer has put
    the default dispositions back: a worker the pool terminated while it was still starting (its work all done by the
    others, on a loaded machine) had run the CLI's inherited handler and printed an `Interrupted` traceback. A signal
    to this process meanwhile waits the moment the pool takes to fork, and is handled then."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _WORKER_DEFAULT)
    try:
        return ctx.Pool(parts, initializer=_parse_worker_signals)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _accumulate_range(path: str, start: int, end: int) -> Accumulator:
    """Accumulate the lines that start in bytes [start, end) of a records file."""
    acc = Accumulator()
    with open(path, "rb") as fh:
        pos = start
        if start > 0:
            fh.seek(start - 1)
            pos = start - 1 + len(fh.readline())
        add = acc.add_line
        while pos < end:
            line = fh.readline()
            if not line:
                break
            pos += len(line)
            if line.strip():
                add(line)  # a torn last line after a SIGKILL is skipped
    acc.finish()
    return acc


def accumulate(records: Iterable[dict[str, Any]] | Path | str) -> Accumulator:
    """One pass over the records; a big file is split into byte ranges parsed by parallel processes."""
    if isinstance(records, (str, Path)):
        path = Path(records)
        if not path.exists():
            raise ResultError(f"summarise: {path} does not exist", fix="point at a run directory's records.jsonl")
        size = path.stat().st_size
        parts = min(usable_cpus(), _MAX_PARTS, max(size // _PART_BYTES, 1))
        if parts <= 1 or "fork" not in mp.get_all_start_methods():
            return _accumulate_range(str(path), 0, size)
        bounds = [size * k // parts for k in range(parts + 1)]
        ctx = mp.get_context("fork")  # no re-import of the caller's __main__, no start-up cost
        with _parse_pool(ctx, parts) as pool:
            accs = pool.starmap(_accumulate_range, [(str(path), bounds[k], bounds[k + 1]) for k in range(parts)])
        acc = accs[0]
        for other in accs[1:]:
            acc.merge(other)
        return acc
    acc = Accumulator()
    for rec in iter_records(records):
        acc.add(rec)
    acc.finish()
    return acc


