"""Synthetic Weka traces with the shape of the published AgentX corpora, generated as hash-id lists (never text).

The generator imitates a Claude-Code-like session (research/agentx-spec §2.2–2.5):
* a system/tools prefix shared by every main turn; each turn appends the previous answer and a tool result, so turn
  k+1 repeats turn k's hash ids and adds new 64-token blocks (theoretical prefix hit ≈ 0.95);
* context compaction when the prompt nears the session's context limit (200k- or 1M-class sessions): a prefix cut
  back to the system blocks plus a fresh summary;
* think times end-to-start: mostly short tool executions, sometimes long human pauses (some above the 300 s cap);
* subagents spawned in parallel batches after a main turn, with fresh contexts that share only part of the system
  prefix; most are awaited (the next main turn starts after they end), some run in the background and may outlive
  the root.

`scale = max_isl / 1,000,000` multiplies every prompt-side token count, so a small `max_isl` keeps the corpus shape
(hit rates, fan-out, turns, timing) at a fraction of the context size — the profile CI uses. Output lengths are not
scaled (`max_osl` caps them; only their share in the next prompt is): what a lane spends generating against what it
spends thinking is the corpus's at any context size, so requests in flight track the concurrency. At the default 1M,
`traces stats` lands in the bands of the published corpus statistics (ISL p50 ≈ 95k, p99 ≈ 500k, prefix hit ≈ 0.95,
mean OSL ≈ 2k).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llmsweep.spec.workload import SYNTH_MIN_ISL
from llmsweep.workload.traces.schema import Corpus, SubagentEntry, Trace, TraceRequest

BLOCK = 64
FULL_SCALE_ISL = 1_000_000

MAIN_MODELS = ("claude-opus-4-7", "claude-opus-4-8")
SUB_MODELS = ("claude-opus-4-7", "claude-haiku-4-5")
SUB_TYPES = ("general-purpose", "Explore", "Plan", "code-reviewer")


class SynthProfile(BaseModel):
    """Knobs of the synthetic corpus; the defaults reproduce the published AgentX shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    traces: int = Field(default=32, ge=1, description="Number of sessions.")
    seed: int = Field(default=0, description="Seed; the corpus is a pure function of the profile.")
    max_isl: int = Field(default=FULL_SCALE_ISL, ge=SYNTH_MIN_ISL,
                         description="Largest prompt; scales every token count.")
    main_turns_median: float = Field(default=70.0, gt=0, description="Median top-level turns per session.")
    max_main_turns: int = Field(default=600, ge=3)
    spawn_probability: float = Field(default=0.05, ge=0, le=1, description="Chance a main turn spawns subagents.")
    background_probability: float = Field(default=0.2, ge=0, le=1, description="Chance a batch runs in background.")
    long_context_share: float = Field(default=0.5, ge=0, le=1, description="Sessions with a 1M-class context.")
    max_osl: int | None = Field(default=None, ge=1, description="Cap on any request's output tokens.")
    subagents: bool = Field(default=True, description="Whether sessions spawn subagents.")

    @property
    def scale(self) -> float:
        return self.max_isl / FULL_SCALE_ISL


@dataclass
class _Stream:
    """A growing context: its hash ids and the id counter of the trace it belongs to."""

    ids: list[int]
    rows: list[TraceRequest] = field(default_factory=list)


class _TraceBuilder:
    def __init__(self, profile: SynthProfile, index: int) -> None:
        self.p = profile
        self.rng = np.random.default_rng([profile.seed & 0xFFFFFFFF, index, 7])
        self.index = index
        self.next_id = 0
        self.scale = profile.scale

    # -- sizes ------------------------------------------------------------------------------------------------

    def _lognormal(self, median: float, sigma: float, lo: float, hi: float) -> float:
        return float(min(hi, max(lo, median * math.exp(sigma * self.rng.standard_normal()))))

    def _tokens(self, median: float, sigma: float, hi: float) -> int:
        """A scaled token count, at least 1."""
        return max(1, round(self._lognormal(median, sigma, 1.0, hi) * self.scale))

    def _out(self, median: float, sigma: float, hi: float) -> int:
        """An answer's length. Not scaled with the context: a session capped at a small prompt still answers at
        AgentX length (mean ≈ 2k tokens), so a lane spends its time generating, not thinking, as in the corpus."""
        out = max(1, round(self._lognormal(median, sigma, 1.0, hi)))
        return out if self.p.max_osl is None else min(out, self.p.max_osl)

    def _in_context(self, out: int) -> int:
        """What an answer adds to the next prompt: all of it at full scale, its scaled share in a smaller profile
        (the next turn's hash ids are the trace's, not the live answer's), so prompts keep the corpus's growth and
        prefix-hit shape while answers keep their length."""
        return max(1, round(out * self.scale))

    def _new_blocks(self, tokens: int) -> list[int]:
        n = max(1, math.ceil(tokens / BLOCK))
        start = self.next_id
        self.next_id += n
        return list(range(start, start + n))

    def _think(self, human_share: float = 0.18) -> float:
        if self.rng.random() < human_share:
            return round(self._lognormal(25.0, 1.6, 2.0, 3600.0), 3)
        return round(self._lognormal(1.5, 1.0, 0.05, 120.0), 3)

    @staticmethod
    def _api_time(in_tokens: int, new_tokens: int, out: int) -> tuple[float, float]:
        ttft = 0.35 + new_tokens / 9000.0 + in_tokens / 600000.0
        return round(ttft, 3), round(ttft + out / 65.0, 3)

    def _request(self, t: float, model: str, ids: list[int], new_tokens: int, out: int) -> TraceRequest:
        in_tokens = len(ids) * BLOCK
        ttft, api = self._api_time(in_tokens, new_tokens, out)
        return TraceRequest.model_construct(
            type="s", t=round(t, 3), model=model, in_tokens=in_tokens, out=out, hash_ids=ids, api_time=api, ttft=ttft
        )

    # -- the session ------------------------------------------------------------------------------------------

    def build(self) -> Trace:
        p, rng = self.p, self.rng
        main_model = MAIN_MODELS[int(rng.integers(len(MAIN_MODELS)))]
        limit_full = 1_000_000 if rng.random() < p.long_context_share else 200_000
        cap = min(p.max_isl, round(limit_full * self.scale))
        threshold = cap * float(rng.uniform(0.4, 0.62)) if limit_full > 200_000 else cap * float(rng.uniform(0.8, 0.95))
        system = self._new_blocks(self._tokens(20000, 0.3, 40000))
        n_main = int(min(p.max_main_turns, max(3, round(self._lognormal(p.main_turns_median, 1.0, 3, 10_000)))))

        entries: list[TraceRequest | SubagentEntry] = []
        ids = system + self._new_blocks(self._tokens(1500, 1.0, 30000))  # the user's first prompt
        new_tokens = len(ids) * BLOCK
        t = 0.0
        sub_count = 0
        for k in range(n_main):
            out = self._out(1000, 1.3, 32000)
            row = self._request(t, main_model, ids, new_tokens, out)
            entries.append(row)
            end = row.t + row.api_time
            resume = end
            if p.subagents and k < n_main - 1 and rng.random() < p.spawn_probability:
                background = rng.random() < p.background_probability
                fan_out = int(min(6, rng.geometric(0.5)))
                for _ in range(fan_out):
                    sub_count += 1
                    entry = self._subagent(end, system, sub_count)
                    entries.append(entry)
                    if not background:
                        resume = max(resume, entry.end)
            # The next turn's prompt: this answer plus a tool result (or a compaction cut).
            growth = self._in_context(out) + self._tokens(1000, 1.5, 80000)
            grown = ids + self._new_blocks(growth)
            if len(grown) * BLOCK > threshold or len(grown) * BLOCK > p.max_isl:
                summary = self._new_blocks(self._tokens(6000, 0.5, 20000))
                grown = system + summary
                growth = len(summary) * BLOCK
            ids, new_tokens = grown, growth
            t = resume + self._think()
        entries.sort(key=lambda e: e.t)
        _stamp_think_times(entries)
        models = sorted({main_model} | {m for e in entries if isinstance(e, SubagentEntry) for m in e.models})
        return Trace.model_construct(
            id=f"synth-{self.p.seed}-{self.index:04d}",
            models=models,
            block_size=BLOCK,
            hash_id_scope="local",
            tool_tokens=0,
            system_tokens=0,
            requests=entries,
        )

    def _subagent(self, spawn_end: float, system: list[int], number: int) -> SubagentEntry:
        rng = self.rng
        model = SUB_MODELS[int(rng.integers(len(SUB_MODELS)))]
        kind = SUB_TYPES[int(rng.integers(len(SUB_TYPES)))]
        shared = system[: max(1, int(len(system) * 0.6))]
        ids = shared + self._new_blocks(self._tokens(6000, 0.8, 30000))
        new_tokens = len(ids) * BLOCK
        m = int(max(1, round(self._lognormal(8, 0.9, 1, 200))))
        t = spawn_end + float(rng.uniform(0.05, 1.5))
        rows: list[TraceRequest] = []
        limit = min(self.p.max_isl, round(180_000 * self.scale))
        for _ in range(m):
            out = self._out(700, 1.1, 16000)
            row = self._request(t, model, ids, new_tokens, out)
            rows.append(row)
            growth = self._in_context(out) + self._tokens(4000, 1.4, 60000)
            grown = ids + self._new_blocks(growth)
            if len(grown) * BLOCK > limit:
                break
            ids, new_tokens = grown, growth
            t = row.t + row.api_time + self._think(human_share=0.0)
        first, last_end = rows[0].t, max(r.t + r.api_time for r in rows)
        return SubagentEntry.model_construct(
            type="subagent",
            t=first,
            agent_id=f"{kind.lower().replace('-', '_')}_{number:03d}",
            subagent_type=kind,
            duration_ms=round((last_end - first) * 1000.0, 1),
            total_tokens=sum(r.in_tokens + r.out for r in rows),
            tool_use_count=None,
            status="completed",
            models=[model],
            requests=rows,
        )


def _stamp_think_times(entries: list[TraceRequest | SubagentEntry]) -> None:
    """`think_time` = gap from the previous chronological row's end (all streams together), clamped at 0."""
    rows: list[TraceRequest] = []
    for e in entries:
        rows.extend(e.requests if isinstance(e, SubagentEntry) else [e])
    rows.sort(key=lambda r: r.t)
    for prev, row in itertools.pairwise(rows):
        row.think_time = round(max(0.0, row.t - (prev.t + prev.api_time)), 3)


def synthesize(profile: SynthProfile | None = None) -> list[Trace]:
    """The synthetic corpus of `profile` (default: 32 full-scale sessions). A pure function of the profile, built
    once per process: the points of a sweep share it, so treat the traces as read-only."""
    return list(synthetic_corpus(profile or SynthProfile()).traces)


@functools.lru_cache(maxsize=8)
def synthetic_corpus(profile: SynthProfile) -> Corpus:
    """`synthesize` with the corpus's memo (`Corpus`), built once per process."""
    return Corpus(tuple(_TraceBuilder(profile, i).build() for i in range(profile.traces)))


def write_jsonl(traces: list[Trace], path: Path) -> None:
    """Write `traces.jsonl`: one compact trace per line, the format the loader and AgentX read (whole or not at
    all: a kill leaves no half-written corpus). A path ending `.gz` is written gzip-compressed, the same bytes for
    the same traces (no timestamp in the header); the loader reads it as it is."""
    import gzip

    from llmsweep import atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.name.endswith(".gz"):
        with atomic.writing(path) as fh:
            for trace in traces:
                fh.write(trace.to_json_line())
                fh.write("\n")
        return
    with atomic.writing_bytes(path) as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        for trace in traces:
            gz.write(trace.to_json_line().encode())
            gz.write(b"\n")
