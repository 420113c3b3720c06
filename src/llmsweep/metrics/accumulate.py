"""One streaming pass over `records.jsonl`: the per-record accumulator that `summary` turns into a Summary.

Only successful profiling records feed latency, token and throughput columns; warmup and failed records are counted.
A big file is split into byte ranges parsed by parallel processes and merged in file order, so the result is
identical to one sequential pass.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.errors import ResultError
from llmsweep.metrics.stats import Column

_GAP_BATCH = 200_000
_PART_BYTES = 64 * 2**20
"""Files above this size are parsed by several processes (JSON decoding dominates the cost)."""
_MAX_PARTS = 8
_UNANSWERED = frozenset({"timeout", "connection", "cancelled"})
"""Error classes where the server's last word is the last streamed chunk, not the record's end."""


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
        yield rec if isinstance(rec, dict) else rec.to_dict()  # type: ignore[attr-defined]


class Accumulator:
    """Everything summarise needs, gathered in one pass."""

    def __init__(self) -> None:
        self.total = 0
        self.successful = 0
        self.failed = 0
        self.warmup = 0
        self.warmup_failed = 0
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
        self.itl = Column("f")
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
        self.workers: set[int] = set()
        self._ct: list[float] = []
        self._ct_starts: list[int] = []

    def add(self, r: dict[str, Any]) -> None:
        self.total += 1
        err = r.get("error_class")
        sent = r.get("sent_at")
        if r.get("phase") == "warmup":
            self.warmup += 1
            if err is not None:
                self.warmup_failed += 1
            return
        self.workers.add(int(r.get("worker") or 0))
        if sent is not None:
            self.profile_first_send = min(self.profile_first_send, sent)
            self._span(r, sent, err)
            sched = r.get("scheduled_at")
            if sched is not None and err != "cancelled":
                self.lag.append(max(sent - sched, 0.0))
        if err is not None:
            if err == "cancelled":
                self.cancelled += 1
                self.categories["cancelled"] += 1
                return
            self.failed += 1
            self.categories[err] += 1
            if err == "context_overflow":
                self.context_overflow += 1
            return
        self.successful += 1
        chunks = r.get("chunk_times") or []
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
        last_chunk = chunks[-1] if chunks else end
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
        if len(chunks) > 1:
            self._ct_starts.append(len(self._ct))
            self._ct.extend(chunks)
            if len(self._ct) >= _GAP_BATCH:
                self._flush_gaps()
        theo = r.get("theoretical_cached_tokens")
        if theo is not None:
            self.theo_cached += theo
            self.theo_input += r.get("input_tokens_expected") or isl
        cached = r.get("cached_tokens")
        if cached is not None and r.get("prompt_tokens"):
            self.cached += cached
            self.cached_prompt += r["prompt_tokens"]
        max_tokens = r.get("max_tokens")
        if max_tokens is not None and osl != max_tokens:
            self.osl_mismatch += 1

    def _span(self, r: dict[str, Any], sent: float, err: str | None) -> None:
        """In flight from the send to the last thing the server sent: its end when it answered, its last chunk (or
        the send) when it timed out, lost the connection or was cancelled — a stalled server leaves a gap."""
        if err in _UNANSWERED:
            chunks = r.get("chunk_times")
            last = chunks[-1] if chunks else sent
        else:
            last = r.get("end_at")
            if last is None:
                chunks = r.get("chunk_times")
                last = chunks[-1] if chunks else sent
        self.span_start.append(sent)
        self.span_end.append(max(last, sent))

    def _flush_gaps(self) -> None:
        if not self._ct:
            return
        times = np.asarray(self._ct, dtype=np.float64)
        gaps = np.diff(times)
        starts = np.asarray(self._ct_starts[1:], dtype=np.int64)
        keep = np.ones(gaps.size, dtype=bool)
        keep[starts - 1] = False  # the gap across two records is not a gap
        self.itl.extend(gaps[keep].astype(np.float32))
        self._ct.clear()
        self._ct_starts.clear()

    def finish(self) -> None:
        self._flush_gaps()

    def merge(self, other: Accumulator) -> None:
        """Append `other` (the accumulator of the following part of the file): columns keep file order, so the
        merged result is identical to one sequential pass."""
        for name in ("total", "successful", "failed", "warmup", "warmup_failed", "cancelled", "context_overflow",
                     "input_sum", "output_sum", "theo_cached", "theo_input", "cached", "cached_prompt",
                     "osl_mismatch"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.categories.update(other.categories)
        for name in ("ttft", "e2el", "tpot", "e2e_norm", "isl", "osl", "ends", "lag", "itl", "span_start",
                     "span_end"):
            getattr(self, name).concat(getattr(other, name))
        self.first_send = min(self.first_send, other.first_send)
        self.profile_first_send = min(self.profile_first_send, other.profile_first_send)
        self.last_end = max(self.last_end, other.last_end)
        self.workers |= other.workers


def _accumulate_range(path: str, start: int, end: int) -> Accumulator:
    """Accumulate the lines that start in bytes [start, end) of a records file."""
    acc = Accumulator()
    with open(path, "rb") as fh:
        pos = start
        if start > 0:
            fh.seek(start - 1)
            pos = start - 1 + len(fh.readline())
        loads = json.loads
        add = acc.add
        while pos < end:
            line = fh.readline()
            if not line:
                break
            pos += len(line)
            if line.strip():
                try:
                    rec = loads(line)
                except ValueError:
                    continue  # a torn last line after a SIGKILL
                add(rec)
    acc.finish()
    return acc


def accumulate(records: Iterable[dict[str, Any]] | Path | str) -> Accumulator:
    """One pass over the records; a big file is split into byte ranges parsed by parallel processes."""
    if isinstance(records, (str, Path)):
        path = Path(records)
        if not path.exists():
            raise ResultError(f"summarise: {path} does not exist", fix="point at a run directory's records.jsonl")
        size = path.stat().st_size
        parts = min(os.cpu_count() or 1, _MAX_PARTS, max(size // _PART_BYTES, 1))
        if parts <= 1 or "fork" not in mp.get_all_start_methods():
            return _accumulate_range(str(path), 0, size)
        bounds = [size * k // parts for k in range(parts + 1)]
        ctx = mp.get_context("fork")  # no re-import of the caller's __main__, no start-up cost
        with ctx.Pool(parts) as pool:
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


