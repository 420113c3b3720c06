"""Mooncake traces: one request per JSONL line, replayed open-loop on its timestamps (research/agentx-spec §5.2).

A row is `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}` (optional `text_input`,
`session_id`, `delay` in ms). Each hash id is one block of `block_size` (512) tokens; ids are global to the file,
so rows sharing a leading run of ids share a cacheable prefix. Prompts are synthesised with the same block text as
agentic replay (identical ids → identical text), each row's final block cut to fit `input_length` exactly, any
length beyond the blocks filled with text private to the row.

Rows are independent requests here: `hash_ids` describe the whole prompt (the original Mooncake semantics). Files
that store multi-turn *deltas* keyed by `session_id` (an AIPerf convention) would be under-counted; convert them.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep.errors import DatasetError
from llmsweep.workload.base import (
    Api,
    Arrival,
    Deferred,
    LaneProgram,
    RequestIdentity,
    RequestSpec,
    Send,
    Workload,
)
from llmsweep.workload.blocks import BlockId, BlockText, JsonNumber, PrefixCache, bust_marker, prefix_keys
from llmsweep.workload.tokenizer import Tokenizer, get_tokenizer
from llmsweep.workload.traces.digest import file_digest
from llmsweep.workload.traces.schema import MAX_REQUEST_TOKENS

NAMESPACE = "mooncake"




class MooncakeRow(BaseModel):
    """One line of a Mooncake trace. External data: unknown fields are ignored; a number is a JSON number (a decimal
    length, NaN, a boolean or a quoted figure is refused with its line: `JsonNumber`)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    timestamp: Annotated[float | None, JsonNumber] = Field(default=None,
                                                       description="Arrival, milliseconds since the trace start.")
    input_length: Annotated[int, JsonNumber] = Field(ge=1, le=MAX_REQUEST_TOKENS)
    output_length: Annotated[int, JsonNumber] = Field(ge=1, le=MAX_REQUEST_TOKENS)
    hash_ids: list[BlockId] = Field(default_factory=list)
    text_input: str | None = None
    session_id: str | None = None
    delay: Annotated[float | None, JsonNumber] = Field(default=None, ge=0.0,
                                                   description="Milliseconds after the previous row (no timestamp).")


class MooncakeConfig(BaseModel):
    """A Mooncake replay. Picklable; every client worker rebuilds the workload from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["mooncake"] = "mooncake"
    source: str = Field(description="Mooncake JSONL file.")
    api: Api = Field(default="chat", description="'chat' sends text; 'completions' sends token ids.")
    block_size: int = Field(default=512, ge=1, description="Tokens per hash id.")
    speedup: float = Field(default=1.0, gt=0, description="Divide every timestamp by this.")
    max_rows: int | None = Field(default=None, ge=1)
    seed: int = 0
    tokenizer: str | None = None
    cache_bust: bool = Field(
        default=True, description="Prefix every prompt with one run-wide marker so earlier runs' cache never hits."
    )
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    extra_body: dict[str, Any] = Field(default_factory=dict)


def load_mooncake(path: str | Path, *, limit: int | None = None) -> list[MooncakeRow]:
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"Mooncake trace {path} does not exist", fix="pass the path of a Mooncake JSONL file")
    from llmsweep.workload.traces.loader import json_lines, row_error

    rows: list[MooncakeRow] = []
    lines: list[int] = []
    for lineno, line in json_lines(path):  # (gzip-compressed too; a line that is not UTF-8 is named below)
        try:
            rows.append(MooncakeRow.model_validate_json(line))
        except ValidationError as exc:
            raise DatasetError(
                f"{path}:{lineno}: not a Mooncake row: {row_error(exc, whole='line')}",
                fix="each line needs timestamp (ms), input_length, output_length and hash_ids, as UTF-8 JSON",
            ) from None
        lines.append(lineno)
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise DatasetError(f"{path} holds no Mooncake rows", fix="check the file")
    times = arrival_times(rows)
    for k in range(1, len(rows)):
        if times[k] < times[k - 1]:
            raise DatasetError(
                f"{path}:{lines[k]}: the row arrives at {times[k]:g} s, before the row of line {lines[k - 1]}"
                f" ({times[k - 1]:g} s): a replay on the timestamps would send it late, out of order",
                fix="sort the rows by timestamp (a row without one arrives `delay` ms after the row before it)",
            )
    return rows


def arrival_times(rows: list[MooncakeRow]) -> list[float]:
    """Each row's arrival in seconds after the first timestamped row (before any speedup): its `timestamp`, or, for
    a row without one, its `delay` after the row before it (the first row: after the start)."""
    out: list[float] = []
    clock = 0.0
    origin: float | None = None
    for row in rows:
        if row.timestamp is not None:
            origin = row.timestamp if origin is None else origin
            clock = (row.timestamp - origin) / 1000.0
        else:
            clock += (row.delay or 0.0) / 1000.0
        out.append(clock)
    return out


class MooncakeWorkload(Workload):
    """Open loop on the trace's timestamps (`arrivals()`); closed loop over the rows once (`sessions()`)."""

    name = "mooncake"

    def __init__(
        self, config: MooncakeConfig, *, rows: list[MooncakeRow] | None = None, tokenizer: Tokenizer | None = None
    ) -> None:
        self.config = config
        self.corpus_digest: str | None = None
        """The trace file's digest (`traces.digest.file_digest`), read as its rows are: what a replay records as
        `provenance.workload.corpus_digest` (an agentic replay records its corpus's), so a result names the corpus it
        replayed (its identity's `corpus`) and a `--resume` or `run --reuse` can tell a file regenerated in place.
        None for rows given directly (no file was read)."""
        if rows is None:
            self.corpus_digest = file_digest(config.source) if Path(config.source).is_file() else None
            rows = load_mooncake(config.source, limit=config.max_rows)
        self.rows = rows
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer(config.tokenizer)
        self.blocks = BlockText(self.tokenizer, seed=config.seed)
        self.marker = bust_marker(config.run_id, "mooncake") if config.cache_bust else ""
        # each row's theoretical cached tokens, over every row in trace order (an infinite prefix cache): one figure
        # per row whichever client worker sends it (a cache per worker saw only its own rows)
        cache = PrefixCache()
        self._cached = [min(row.input_length, cache.observe(prefix_keys(self._layout(row)[0])) * config.block_size)
                        for row in self.rows]
        self._worker, self._workers = 0, 1
        self._next = 0
        self._lock = threading.Lock()

    def offsets(self) -> list[float]:
        """Arrival of each row in seconds after the first, divided by `speedup` (`arrival_times`)."""
        return [at / self.config.speedup for at in arrival_times(self.rows)]

    def arrivals(self) -> Iterator[Arrival]:
        for index, at in enumerate(self.offsets()):
            yield Arrival(at=at, program=self._program(index, lane=0))

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        """Closed loop: the rows once, shared by every lane of this worker (its rows `worker, worker + workers, …`:
        :meth:`bind_worker`)."""
        while True:
            with self._lock:
                if self._next >= len(self.rows):
                    return
                index = self._next
                self._next += self._workers
            yield self._program(index, lane)

    def bind_worker(self, worker: int, workers: int) -> None:
        """Send only worker `worker`'s share of `workers` client processes' rows in closed loop (rows `worker,
        worker + workers, …`): each process replayed every row, so `workers` processes sent each row `workers` times.
        Rewinds the rows (a replay of the same workload starts again). Open-loop arrivals are split by the client."""
        if workers < 1 or not 0 <= worker < workers:
            raise ValueError(f"worker {worker} of {workers}: need workers >= 1 and 0 <= worker < workers")
        with self._lock:
            self._worker, self._workers, self._next = worker, workers, worker

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "rows": len(self.rows), "tokenizer": self.tokenizer.name,
                **({"corpus_digest": self.corpus_digest} if self.corpus_digest is not None else {}),
                **self.config.model_dump(mode="json")}

    # -- requests -------------------------------------------------------------------------------------------------

    def _layout(self, row: MooncakeRow) -> tuple[list[int], int | None, int]:
        """(block ids used, size of the last block if partial, tail tokens beyond the blocks)."""
        bs = self.config.block_size
        n = min(len(row.hash_ids), math.ceil(row.input_length / bs))
        ids = row.hash_ids[:n]
        last = row.input_length - bs * (n - 1) if n else None
        last = last if last is not None and last < bs else None
        tail = max(0, row.input_length - bs * n)
        return ids, last, tail

    def request(self, index: int, *, lane: int = 0) -> RequestSpec:
        cfg = self.config
        row = self.rows[index]
        ids, last, tail = self._layout(row)
        cached = self._cached[index]
        common: dict[str, Any] = {
            "max_tokens": row.output_length,
            "ignore_eos": True,
            "input_tokens": row.input_length,
            "theoretical_cached_tokens": cached,
            "identity": RequestIdentity(
                trace=Path(cfg.source).name, lane=lane, session=row.session_id or f"row-{index}", request_index=index
            ),
            "extra_body": dict(cfg.extra_body),
        }
        if cfg.api == "completions":
            return RequestSpec(api="completions", prompt=Deferred(lambda: self._ids(index, row, ids, last, tail)),
                               **common)
        return RequestSpec(api="chat", messages=Deferred(lambda: self._messages(index, row, ids, last, tail)), **common)

    def _text(self, index: int, ids: list[int], last: int | None, tail: int) -> str:
        text = self.blocks.join(NAMESPACE, ids, self.config.block_size, last)
        return self.marker + text + (self.blocks.text(NAMESPACE + "/tail", index, tail) if tail else "")

    def _messages(
        self, index: int, row: MooncakeRow, ids: list[int], last: int | None, tail: int
    ) -> tuple[dict[str, Any], ...]:
        content = self.marker + row.text_input if row.text_input is not None else self._text(index, ids, last, tail)
        return ({"role": "user", "content": content},)

    def _ids(self, index: int, row: MooncakeRow, ids: list[int], last: int | None, tail: int) -> tuple[int, ...]:
        if row.text_input is not None:  # the row's own text, as a chat request sends it
            return tuple(self.tokenizer.encode(self.marker + row.text_input))
        bs = self.config.block_size
        out: list[int] = self.tokenizer.encode(self.marker) if self.marker else []
        for k, block in enumerate(ids):
            out.extend(self.blocks.token_ids(NAMESPACE, block, last if (k == len(ids) - 1 and last) else bs))
        if tail:
            out.extend(self.blocks.token_ids(NAMESPACE + "/tail", index, tail))
        return tuple(out)

    def _program(self, index: int, lane: int) -> LaneProgram:
        yield Send(self.request(index, lane=lane))
