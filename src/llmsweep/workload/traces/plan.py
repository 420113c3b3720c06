"""A trace as a replay plan: the root stream, its subagent streams, and when each waits for what.

Rules (research/agentx-spec §2.8, §5.2–5.3, with one deliberate refinement):
* one root stream of the top-level requests; each subagent entry is a child stream spawned when the parent's
  *preceding* top-level turn completes, its first request `offset` seconds later (its recorded offset from that
  turn's end); an entry with no preceding parent turn is dropped, as AIPerf does;
* delays are end-to-start: a turn starts `delay` seconds after the end of what it depends on (the previous turn of
  its stream, and for a root turn also the children it joins), floored at 0;
* joins (`JoinPolicy`): under "agentx" (the default; AIPerf's Weka loader, which the spec's §2.8 paraphrase
  simplifies) a child is *joined* by the first parent turn after it whose recorded start is at or after the child's
  recorded end — that turn waits for the child's last request — so a child still running at the following turn
  gates a later one ("tiered" joins), and only a child that outlives every later parent turn is a **background**
  child; under "recorded" (the plan's earlier rule) a child is joined only by the following turn, when it ended
  before that turn started, and is otherwise background. A background child still belongs to the tree, which drains
  only when it ends.
  Children with the same anchors form one multi-child spawn batch naturally.
* parallel requests inside one subagent (`split_parallel`): AIPerf splits hidden parallel agents out of a flat
  request stream (§2.8, flattened-agent detection). Here a subagent whose inner requests overlap in the recording
  becomes several child streams (`_chains`: `<agent_id>`, `<agent_id>::fa:001`, …), each spawned and joined as the
  subagent is and dispatched at its recorded offset from the spawn, rather than one stream that runs them one after
  another. (AIPerf's hash-evidence classification — sidecars, reductions, worker groups — and splitting of the root
  stream are not reproduced.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from llmsweep.workload.blocks import common_prefix
from llmsweep.workload.traces.schema import SubagentEntry, Trace, TraceRequest

JOIN_TOLERANCE_S = 1e-3

AGENTX_JOIN_EPSILON_S = 1e-6
"""AIPerf's tolerance when it compares a parent turn's start with a subagent's recorded end."""

JoinPolicy = Literal["agentx", "recorded"]
"""Which parent turn waits for a child: "agentx" — the first parent turn after it that started, as recorded, at or
after the child's end (AIPerf's tiered joins); "recorded" — the following parent turn if it started after the child's
end, else none (the child runs in the background)."""


@dataclass(frozen=True, slots=True)
class TurnPlan:
    index: int
    request: TraceRequest
    delay: float
    """Seconds from the end of this turn's dependencies to its start (recorded, uncapped)."""
    joins: tuple[int, ...] = ()
    """Children (indices into `TracePlan.children`) this turn waits for before its delay starts."""
    spawns: tuple[int, ...] = ()
    """Children spawned when this turn completes."""
    stream_delay: float = 0.0
    """Seconds from the end of the previous turn of its stream alone to its start (recorded; AIPerf's end-to-start
    delay, which ignores the children a root turn joins). Equal to `delay` for a turn that joins nothing."""


@dataclass(frozen=True, slots=True)
class StreamPlan:
    node: str
    """'' for the root, else the subagent's agent_id."""
    turns: tuple[TurnPlan, ...]
    offset: float = 0.0
    """Children: seconds from the spawn (the parent turn's end) to the first request."""
    branch_offset: float = 0.0
    """Children: seconds from the start of the first child of its spawn batch (the children with its anchor and
    joining turn) to its first request — AIPerf's dispatch offset from the spawn, which leaves out the recorded gap
    between the parent turn's end and the batch's first request."""
    anchor: int = -1
    """Children: the root turn whose completion spawns it."""
    joined_at: int | None = None
    """Children: the root turn that waits for it; None for a background child."""


@dataclass(frozen=True, slots=True)
class TracePlan:
    trace: Trace
    root: StreamPlan
    children: tuple[StreamPlan, ...]
    dropped: int = 0
    """Subagent entries with no preceding parent turn (not replayed)."""
    start_times: tuple[float, ...] = field(default_factory=tuple)
    """Recorded start of each root turn (for sampling the warm-start point t*)."""

    @property
    def background(self) -> tuple[int, ...]:
        return tuple(i for i, c in enumerate(self.children) if c.joined_at is None)


def _stream_turns(requests: list[TraceRequest]) -> list[tuple[TraceRequest, float]]:
    out: list[tuple[TraceRequest, float]] = []
    prev_end: float | None = None
    for req in requests:
        delay = 0.0 if prev_end is None else max(0.0, req.t - prev_end)
        out.append((req, delay))
        prev_end = req.t + req.api_time
    return out


def _join_turn(mains: list[TraceRequest], following: int | None, end: float, policy: JoinPolicy) -> int | None:
    """The root turn that waits for a child ending at `end` whose first possible joiner is `following`."""
    if following is None:
        return None
    if policy == "recorded":
        return following if end <= mains[following].t + JOIN_TOLERANCE_S else None
    for k in range(following, len(mains)):  # AIPerf: the first later parent turn that starts at or after its end
        if mains[k].t + AGENTX_JOIN_EPSILON_S >= end:
            return k
    return None


def _chains(requests: list[TraceRequest]) -> list[list[TraceRequest]]:
    """A subagent's inner requests (by start) as context chains that ran one after another: a request continues
    the free chain (its last request ended, as recorded, by this one's start) whose hash ids it shares the longest
    prefix with, the latest such on a tie; one that overlaps every chain began in parallel and opens a chain of its
    own. A subagent whose requests never overlap is one chain, as it was recorded."""
    chains: list[list[TraceRequest]] = []
    ends: list[float] = []  # each chain's last request's recorded end
    for req in requests:
        begun = req.t + JOIN_TOLERANCE_S
        free = [i for i, end in enumerate(ends) if end <= begun]  # the others were still running when it began
        if not free:
            chains.append([req])
            ends.append(req.end)
            continue
        best = free[0]
        if len(free) > 1:  # the prefix shared decides only between several (a single free chain takes it)
            best_len = -1
            for i in free:
                shared = common_prefix(chains[i][-1].hash_ids, req.hash_ids)
                if shared >= best_len:
                    best, best_len = i, shared
        chains[best].append(req)
        ends[best] = req.end
    return chains


def dropped_subagents(trace: Trace) -> int:
    """Subagent entries a replay drops (`TracePlan.dropped`): those before the first top-level request, which no
    parent turn spawns."""
    dropped = 0
    for entry in trace.requests:
        if not isinstance(entry, SubagentEntry):
            break
        dropped += 1
    return dropped


def build_plan(trace: Trace, *, join_policy: JoinPolicy = "recorded", split_parallel: bool = False) -> TracePlan:
    """The replay plan of `trace`. `join_policy` and `split_parallel` default to the plan's historical rules here;
    the replay's `AgenticConfig` defaults to AgentX's ("agentx", split)."""
    mains: list[TraceRequest] = []
    attached: list[tuple[SubagentEntry, int, int | None]] = []  # (entry, anchor, following)
    pending: list[SubagentEntry] = []
    for entry in trace.requests:
        if isinstance(entry, SubagentEntry):
            if mains and entry.requests:  # one before the first main turn is dropped (`dropped_subagents`)
                pending.append(entry)
            continue
        for sub in pending:
            attached.append((sub, len(mains) - 1, len(mains)))
        pending = []
        mains.append(entry)
    attached.extend((sub, len(mains) - 1, None) for sub in pending)

    children: list[StreamPlan] = []
    joins: dict[int, list[int]] = {}
    spawns: dict[int, list[int]] = {}
    join_end: dict[int, float] = {}
    batch_start: dict[tuple[int, int | None], float] = {}
    # each entry with its recorded end (`SubagentEntry.end`, a property: taken once) and the root turn that joins it
    ends = [(sub, anchor, sub.end, following) for sub, anchor, following in attached]
    placed = [(sub, anchor, end, _join_turn(mains, following, end, join_policy))
              for sub, anchor, end, following in ends]
    for sub, anchor, _, joined in placed:
        key = (anchor, joined)
        batch_start[key] = min(batch_start.get(key, float("inf")), min(r.t for r in sub.requests))
    for sub, anchor, end, joined in placed:
        inner = sorted(sub.requests, key=lambda r: r.t)
        first_in_batch = batch_start[(anchor, joined)]
        spawn_at = mains[anchor].end
        chains = _chains(inner) if split_parallel else [inner]
        for c, chain in enumerate(chains):
            child_index = len(children)
            turns = tuple(
                TurnPlan(index=j, request=req, delay=delay, stream_delay=delay)
                for j, (req, delay) in enumerate(_stream_turns(chain))
            )
            children.append(
                StreamPlan(node=sub.agent_id if c == 0 else f"{sub.agent_id}::fa:{c:03d}", turns=turns,
                           offset=max(0.0, chain[0].t - spawn_at), anchor=anchor, joined_at=joined,
                           branch_offset=max(0.0, chain[0].t - first_in_batch))
            )
            spawns.setdefault(anchor, []).append(child_index)
            if joined is not None:
                joins.setdefault(joined, []).append(child_index)
                join_end[joined] = max(join_end.get(joined, 0.0), end)

    root_turns: list[TurnPlan] = []
    for k, req in enumerate(mains):
        if k == 0:
            delay = stream_delay = 0.0
        else:
            depends = max(mains[k - 1].end, join_end.get(k, float("-inf")))
            delay = max(0.0, req.t - depends)
            stream_delay = max(0.0, req.t - mains[k - 1].end)
        root_turns.append(
            TurnPlan(index=k, request=req, delay=delay, joins=tuple(joins.get(k, ())), spawns=tuple(spawns.get(k, ())),
                     stream_delay=stream_delay)
        )
    return TracePlan(
        trace=trace,
        root=StreamPlan(node="", turns=tuple(root_turns)),
        children=tuple(children),
        dropped=dropped_subagents(trace),
        start_times=tuple(r.t for r in mains),
    )
