"""Corpus statistics of a trace set: the numbers AgentX publishes for its datasets (research/agentx-spec §2.2, §2.7).

Theoretical prefix hit follows the dataset plots: the fraction of a request's hash ids already seen earlier in the
same trace (one seen-set per trace, main turns and subagent inners walked in file order). Everything is computed
with numpy over concatenated id arrays, so a corpus of millions of blocks takes well under a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from llmsweep.workload.traces.schema import SubagentEntry, Trace, TraceRequest

IDLE_GAP_CAP_S = 300.0


class Distribution(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> Distribution:
        arr = np.asarray(values, dtype=float)
        if arr.size == 0:
            return cls(count=0, mean=0.0, p50=0.0, p90=0.0, p99=0.0, max=0.0)
        p50, p90, p99 = np.percentile(arr, [50, 90, 99])
        return cls(count=int(arr.size), mean=float(arr.mean()), p50=float(p50), p90=float(p90), p99=float(p99),
                   max=float(arr.max()))


class CorpusStats(BaseModel):
    """`llmsweep traces stats --json` output."""

    model_config = ConfigDict(extra="forbid")

    traces: int
    main_turns: int
    subagent_groups: int
    subagent_inner_requests: int
    total_requests: int
    total_input_tokens: int
    total_output_tokens: int
    isl: Distribution
    osl: Distribution
    main_turns_per_trace: Distribution
    prefix_hit_request_mean: float
    """Mean over requests of the fraction of their blocks seen earlier in the trace."""
    prefix_hit_token_weighted: float
    """Seen blocks over all blocks, corpus-wide."""
    subagent_groups_per_trace: Distribution
    inner_requests_per_group: Distribution
    spawn_batch_size: Distribution
    """Subagents spawned after the same parent turn (the fan-out of one spawn point)."""
    background_groups: int
    """Subagent groups the parent did not wait for (still running at its next turn, or no next turn)."""
    outliving_groups: int
    """Background groups that end after the root's last turn ended."""
    think_time_s: Distribution
    think_time_above_cap_share: float

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _seen_fractions(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(seen blocks, total blocks) per request of `trace` in file order."""
    rows = trace.all_requests()
    lengths = np.fromiter((len(r.hash_ids) for r in rows), dtype=np.int64, count=len(rows))
    if lengths.sum() == 0:
        return np.zeros(len(rows)), lengths
    ids = np.fromiter((i for r in rows for i in r.hash_ids), dtype=np.int64, count=int(lengths.sum()))
    owner = np.repeat(np.arange(len(rows)), lengths)
    _, first_pos, inverse = np.unique(ids, return_index=True, return_inverse=True)
    seen = owner[first_pos[inverse]] < owner
    return np.bincount(owner, weights=seen, minlength=len(rows)), lengths


def _subagent_shape(trace: Trace) -> tuple[list[int], int, int]:
    """(batch sizes, background groups, groups outliving the root) of one trace."""
    batches: dict[int, int] = {}
    background = outliving = 0
    anchor = -1
    mains = trace.main_requests
    root_end = max((r.end for r in mains), default=0.0)
    next_main_t: list[float | None] = []
    upcoming: float | None = None
    for entry in reversed(trace.requests):
        if isinstance(entry, TraceRequest):
            upcoming = entry.t
        next_main_t.append(upcoming)
    next_main_t.reverse()
    for i, entry in enumerate(trace.requests):
        if isinstance(entry, TraceRequest):
            anchor += 1
            continue
        if anchor < 0:
            continue  # no preceding parent turn: replay drops it
        batches[anchor] = batches.get(anchor, 0) + 1
        follow = next_main_t[i]
        if follow is None or entry.end > follow + 1e-6:
            background += 1
            if entry.end > root_end:
                outliving += 1
    return list(batches.values()), background, outliving


def corpus_stats(traces: Iterable[Trace]) -> CorpusStats:
    """The statistics of `traces`, read in one pass: a stream of them (`loader.stream_traces`) is never held whole."""
    count = 0
    isl: list[int] = []
    osl: list[int] = []
    think: list[float] = []
    main_turns: list[int] = []
    groups: list[int] = []
    inners: list[int] = []
    batches: list[int] = []
    background = outliving = 0
    seen_total = blocks_total = 0.0
    fractions: list[np.ndarray] = []
    for trace in traces:
        count += 1
        rows = trace.all_requests()
        isl.extend(r.in_tokens for r in rows)
        osl.extend(r.out for r in rows)
        think.extend(r.think_time for r in rows if r.think_time is not None)
        main_turns.append(len(trace.main_requests))
        subs = [e for e in trace.requests if isinstance(e, SubagentEntry)]
        groups.append(len(subs))
        inners.extend(len(s.requests) for s in subs)
        sizes, bg, out = _subagent_shape(trace)
        batches.extend(sizes)
        background += bg
        outliving += out
        seen, lengths = _seen_fractions(trace)
        seen_total += float(seen.sum())
        blocks_total += float(lengths.sum())
        fractions.append(np.divide(seen, lengths, out=np.zeros_like(seen), where=lengths > 0))
    hits = np.concatenate(fractions) if fractions else np.zeros(0)
    think_arr = np.asarray(think, dtype=float)
    return CorpusStats(
        traces=count,
        main_turns=sum(main_turns),
        subagent_groups=sum(groups),
        subagent_inner_requests=sum(inners),
        total_requests=len(isl),
        total_input_tokens=int(sum(isl)),
        total_output_tokens=int(sum(osl)),
        isl=Distribution.of(isl),
        osl=Distribution.of(osl),
        main_turns_per_trace=Distribution.of(main_turns),
        prefix_hit_request_mean=float(hits.mean()) if hits.size else 0.0,
        prefix_hit_token_weighted=seen_total / blocks_total if blocks_total else 0.0,
        subagent_groups_per_trace=Distribution.of(groups),
        inner_requests_per_group=Distribution.of(inners),
        spawn_batch_size=Distribution.of(batches),
        background_groups=background,
        outliving_groups=outliving,
        think_time_s=Distribution.of(think_arr),
        think_time_above_cap_share=float((think_arr > IDLE_GAP_CAP_S).mean()) if think_arr.size else 0.0,
    )


# Published AgentX corpus figures (research/agentx-spec §2.2) and the bands a corpus of that shape should land in.
# The bands are ours: the published numbers are single quotes from consumers of the 062126 corpus, so we accept
# roughly ±30 % around them (wider for tails), and a default synthetic corpus is tested against them.
REFERENCE_BANDS: dict[str, tuple[str, float, float, float]] = {
        # key: (what, published, low, high); token figures scale with the corpus (see `band_report`)
    "isl.p50": ("ISL p50 (tokens)", 95_000, 65_000, 125_000),
    "isl.p99": ("ISL p99 (tokens)", 506_000, 350_000, 700_000),
    "osl.mean": ("OSL mean (tokens)", 2_000, 1_000, 3_000),
    "prefix_hit_token_weighted": ("theoretical prefix hit", 0.95, 0.90, 0.99),
}


def lookup(stats: CorpusStats, key: str) -> float:
    """A statistic by dotted key, e.g. 'isl.p50'."""
    value: Any = stats
    for part in key.split("."):
        value = getattr(value, part)
    return float(value)


_TOKEN_FIGURES = ("isl.",)
"""Figures that scale with a synthetic corpus's `max_isl` (prompts do; answers keep their length)."""


def band_report(stats: CorpusStats, *, scale: float = 1.0) -> list[dict[str, Any]]:
    """Each reference figure with the corpus value and whether it lies inside the band.

    `scale` multiplies the prompt-token figures, to judge a corpus synthesised with `--max-isl` = scale × 1M.
    """
    rows = []
    for key, (what, published, low, high) in REFERENCE_BANDS.items():
        if key.startswith(_TOKEN_FIGURES):
            published, low, high = published * scale, low * scale, high * scale
        value = lookup(stats, key)
        rows.append({"key": key, "what": what, "value": value, "published": published, "low": low, "high": high,
                     "inside": low <= value <= high})
    return rows
