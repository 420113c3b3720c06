"""AgentX agentic trace replay as lane programs (research/agentx-spec §1.4, §1.7, §5.3).

Each lane plays one session tree at a time: the root stream of a trace plus every subagent it spawns; the
interpreter starts the lane's next session only when the whole tree, background children included, has drained.

* **Warm start** (first play of each lane): sample t* uniformly in [min_ratio, max_ratio] of the trace's recorded
  timeline; send one *primer* — the root turn just before t*, carrying its full accumulated prefix — then
  `warmup_requests_per_lane` more root turns back to back; all with max_tokens=1 and phase "warmup" (a root primer
  that fails ends the whole run, as AIPerf aborts it: `RequestIdentity.primer`). Profiling
  continues from there with recorded delays. Subagents live at t* are primed too (their last request before t*,
  full prefix, one token) and go on as recorded; ones spawned before t* but not yet started wait their remaining
  offset. Subagents the warm-up turns spawned are taken from the snapshot at the last warm-up turn's recorded end
  (AgentX snapshots every live subagent after the warm-up): one live then is primed or waits its remaining offset
  in the same way; one that had ended by then is not replayed. Recycled plays start at turn 0.
* **Warm-up drain**: with warm start, the first play's root yields `Drain` after its warm-up turns (at once when its
  trace was too short to split), and each stream primed or waiting at t* after its primer (before its remaining
  offset): the interpreter holds them until every lane's warm-up has drained, across its workers, and profiling
  starts from that snapshot with the recorded delays still to run (AgentX). `warmup_grace_s` bounds the wait.
* **Delays** are end-to-start, as recorded. AgentX's idle caps shift pending timers rather than cut delays, and need
  a view of the streams, so interpreters apply them (`Workload.tree_idle_cap_s`): the per-trajectory-tree cap
  (`trace_idle_gap_cap_s`, InferenceX: 300 s) brings a tree's pending delays forward together once none of its
  streams has had a request in flight for that long; the whole-system cap (`system_idle_gap_cap_s`, AgentX: 10 s)
  does the same across every lane. Both are carried in the config and `describe()`.
* **Cache bust**: each play gets its own `[rid:…]` marker at the head of every stream's first user message, derived
  from (run id, lane, play, trace), so a play never hits cache left by another play, lane or run, while the streams
  of one tree share their prefixes as recorded.
* **Accounting**: every Send carries `input_tokens` (the trace's `in`) and `theoretical_cached_tokens` (the longest
  hash-block prefix already sent in this play, in dispatch order), plus identity (trace, lane, turn, phase,
  session = one play, node = '' or the subagent's agent_id).

Programs are cheap: no text is built until a consumer reads `spec.messages` (the simulator never does).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import logging
import threading
import uuid
from collections.abc import Hashable, Iterator
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.errors import DatasetError
from llmsweep.words import count_of
from llmsweep.workload.base import (
    Drain,
    Join,
    LaneProgram,
    Phase,
    RequestIdentity,
    RequestOutcome,
    RequestSpec,
    Send,
    Sleep,
    Spawn,
    SpawnHandle,
    Workload,
)
from llmsweep.workload.blocks import BlockText, PrefixCache, bust_marker
from llmsweep.workload.conversation import Conversation
from llmsweep.workload.tokenizer import Tokenizer, get_tokenizer
from llmsweep.workload.traces.digest import corpus_digest, memo_digest, playable_traces, replay_digest
from llmsweep.workload.traces.loader import load_corpus, load_traces
from llmsweep.workload.traces.plan import JoinPolicy, TracePlan, TurnPlan, build_plan, dropped_subagents
from llmsweep.workload.traces.schema import Corpus, Trace
from llmsweep.workload.traces.synth import SynthProfile, synthetic_corpus

log = logging.getLogger(__name__)


class AgenticConfig(BaseModel):
    """What an agentic replay plays. Picklable; every client worker rebuilds the workload from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["agentic"] = "agentic"
    source: str | None = Field(
        default=None,
        description="Trace JSONL file, directory, HF dataset id or AgentX loader id; None or 'synthetic' = the"
        " synthetic corpus.",
    )
    revision: str | None = Field(
        default=None, description="The commit (or branch, tag) of a hub dataset `source` to replay; None = its latest."
    )
    synthetic: SynthProfile = Field(default_factory=SynthProfile, description="Corpus used when source is None.")
    max_traces: int | None = Field(default=None, ge=1, description="Load at most this many traces.")
    concurrency: int | None = Field(
        default=None, ge=1, description="Lanes the interpreter runs; recycled lanes stride the corpus by it."
    )
    sampler: Literal["shuffle", "sequential"] = Field(default="shuffle", description="Order lanes draw traces in.")
    seed: int = Field(default=42, description="Seed of trace order, t* and block text.")
    run_id: str = Field(
        default_factory=lambda: uuid.uuid4().hex, description="Run identity mixed into cache-bust markers."
    )
    tokenizer: str | None = Field(default=None, description="HF tokenizer dir or hub id; None = built-in.")
    warm_start: bool = Field(default=True, description="Start each lane's first play at t* with a primer.")
    trajectory_start_min_ratio: float = Field(default=0.25, ge=0.0, le=1.0)
    trajectory_start_max_ratio: float = Field(default=0.75, ge=0.0, le=1.0)
    warmup_requests_per_lane: int = Field(default=10, ge=0, description="One-token root turns after the primer.")
    warmup_grace_s: float = Field(
        default=1800.0, gt=0,
        description="How long an interpreter waits for every lane's warm-up to drain before it stops the run"
        " (AgentX's warm-up grace period).",
    )
    trace_idle_gap_cap_s: float | None = Field(
        default=300.0, gt=0,
        description="Per-trajectory-tree idle cap: a tree none of whose streams has had a request in flight for this"
        " long has its pending delays brought forward together (applied by interpreters; AgentX's"
        " --trace-idle-gap-cap-seconds).",
    )
    system_idle_gap_cap_s: float | None = Field(
        default=10.0, gt=0, description="Whole-system idle cap; applied by interpreters that see every lane."
    )
    join_policy: JoinPolicy = Field(
        default="agentx",
        description="Which parent turn waits for a subagent: 'agentx' — the first later parent turn that started, as"
        " recorded, at or after the subagent's end (AIPerf's tiered SPAWN_JOIN; a subagent outliving every later"
        " parent turn runs in the background); 'recorded' — the following parent turn only, if the subagent had"
        " ended before it started, else none.",
    )
    branch_timing: Literal["agentx", "recorded"] = Field(
        default="recorded",
        description="When subagents start and the root turn that joins them goes. 'recorded': a subagent at its"
        " recorded offset from the spawning turn's end; the joining turn its recorded delay after the later of its"
        " previous turn's and the subagents' ends. 'agentx' (AIPerf): a spawn batch's first subagent at once when"
        " the spawning turn ends, its siblings at their recorded offsets from it; the joining turn at once when"
        " the subagents end if one was still running when its previous turn ended, else its end-to-start delay"
        " after that turn.",
    )
    split_parallel_requests: bool = Field(
        default=True,
        description="Replay a subagent's inner requests that overlapped in the recording as parallel streams (AIPerf"
        " splits such hidden parallel agents out); False runs them one after another.",
    )
    live_assistant_responses: bool = Field(
        default=False, description="Use the server's answers as assistant history instead of recorded turns."
    )
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @property
    def synthesized(self) -> bool:
        """The replay plays the synthetic corpus of `synthetic` (no trace source named)."""
        return self.source in (None, "synthetic")

    @model_validator(mode="after")
    def _ratios(self) -> AgenticConfig:
        if self.trajectory_start_min_ratio > self.trajectory_start_max_ratio:
            raise ValueError("trajectory_start_min_ratio must not exceed trajectory_start_max_ratio")
        return self


class _Play:
    """State one session tree shares across its streams: marker, ideal prefix cache, request counter."""

    def __init__(self, workload: AgenticWorkload, plan: TracePlan, lane: int, play: int) -> None:
        cfg = workload.config
        self.workload = workload
        self.plan = plan
        self.lane = lane
        self.trace_id = plan.trace.id
        self.session = f"{plan.trace.id}/lane{lane}/play{play}"
        self.marker = bust_marker(cfg.run_id, lane, play, plan.trace.id)
        self.cache = PrefixCache()
        self.block_size = plan.trace.block_size
        self._counter = itertools.count()
        self.finished: set[int] = set()
        """Children (indices into the plan's `children`) whose program has sent its last request."""

    def conversation(self, node: str) -> Conversation:
        return Conversation(
            self.workload.blocks, namespace=self.trace_id, marker=self.marker, block_size=self.block_size
        )

    def send(
        self, conv: Conversation, node: str, turn: TurnPlan, phase: Phase, *, one_token: bool = False,
        last: RequestOutcome | None = None, primer: bool = False,
    ) -> Send:
        req = turn.request
        # the blocks the turn's `in` tokens span: a recorded hash list longer than that (AgentX's are ~ceil(in/bs))
        # laid every block out whole, a prompt several times the length the trace says it had
        ids, spanned = req.hash_ids, max(0, -(-req.in_tokens // self.block_size))
        if len(ids) > spanned:  # (a copy only where one is cut: the list is a prompt's thousands of blocks)
            ids = ids[:spanned]
        keys = conv.keys(ids)
        # the prefix this stream's previous turn shares was observed with that turn: the search starts past it
        cached_blocks = self.cache.observe(keys, conv.shared(keys))
        live = None
        if self.workload.config.live_assistant_responses and last is not None and last.ok and last.output_text:
            live = last.output_text
        messages, shape = conv.advance(
            ids, req.in_tokens, req.out, keys, live_answer=live, tail_key=f"{node}#{turn.index}"
        )
        spec = RequestSpec(
            api="chat",
            max_tokens=1 if one_token else max(1, req.out),
            messages=messages,
            shape=shape,
            ignore_eos=True,
            input_tokens=req.in_tokens,
            theoretical_cached_tokens=min(req.in_tokens, cached_blocks * self.block_size),
            identity=RequestIdentity(
                trace=self.trace_id,
                lane=self.lane,
                turn=turn.index,
                phase=phase,
                session=self.session,
                node=node,
                request_index=next(self._counter),
                primer=primer,
            ),
            extra_body=dict(self.workload.config.extra_body),
        )
        return Send(spec)


def replay_corpus_digest(source: str, *, limit: int | None = None, revision: str | None = None) -> str:
    """The corpus digest a replay of `source` (a hub dataset's at `revision`) records
    (`AgenticWorkload.corpus_digest`), without building the workload (`run --reuse` compares it with what a stored
    result replayed)."""
    if limit is not None:
        return corpus_digest(playable_traces(load_traces(source, limit=limit, revision=revision)))
    return replay_digest(load_corpus(source, revision=revision))


class AgenticWorkload(Workload):
    """Closed-loop agentic replay: `sessions(lane)` yields one session tree after another, forever."""

    name = "agentic"

    def __init__(
        self, config: AgenticConfig, *, traces: list[Trace] | None = None, tokenizer: Tokenizer | None = None
    ) -> None:
        self.config = config
        corpus: Corpus | None = None
        """The corpus the traces come from, shared by every workload of the process that replays it (None: given,
        or a limited part of a source)."""
        if traces is None and config.synthesized:
            corpus = synthetic_corpus(config.synthetic)
        elif traces is None and config.max_traces is None:
            assert config.source is not None
            corpus = load_corpus(config.source, revision=config.revision)
        elif traces is None:
            assert config.source is not None
            traces = load_traces(config.source, limit=config.max_traces, revision=config.revision)
        if corpus is not None:
            traces = list(corpus.traces)
        assert traces is not None
        playable = playable_traces(traces)
        if len(playable) < len(traces):
            log.warning("skipping %s with no top-level request", count_of(len(traces) - len(playable), "trace"))
        if not playable:
            raise DatasetError(
                f"agentic replay needs at least one trace with a top-level request (source {config.source})",
                fix="check the trace source",
            )
        self.traces = playable
        self.warmup_drain_s = config.warmup_grace_s if config.warm_start else None
        self.tree_idle_cap_s = config.trace_idle_gap_cap_s
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer(config.tokenizer)
        self.blocks = BlockText(self.tokenizer, seed=config.seed)
        self._memo: dict[Hashable, Any] = corpus.memo if corpus is not None else {}
        """Plans by ("plan", index, join policy, split) and the corpus digest: kept with a shared corpus for every
        workload of the process (a sweep's points), as they depend on the traces and those two options only."""
        self._lock = threading.Lock()
        order = np.arange(len(playable))
        if config.sampler == "shuffle":
            order = np.random.default_rng([config.seed & 0xFFFFFFFF, 3]).permutation(len(playable))
        self._order = [int(i) for i in order]

    # -- public -------------------------------------------------------------------------------------------------

    def plan(self, index: int) -> TracePlan:
        cfg = self.config
        key = ("plan", index, cfg.join_policy, cfg.split_parallel_requests)
        with self._lock:
            plan: TracePlan | None = self._memo.get(key)
            if plan is None:
                plan = self._memo[key] = build_plan(
                    self.traces[index], join_policy=cfg.join_policy, split_parallel=cfg.split_parallel_requests
                )
            return plan

    @functools.cached_property
    def corpus_digest(self) -> str:
        """Fingerprint of the traces this workload replays (`llmsweep.workload.traces.digest`)."""
        return memo_digest(self._memo, self.traces)

    def trace_for(self, lane: int, play: int) -> int:
        """Index of the trace lane `lane` plays `play`-th: lanes stride a seeded order by the concurrency."""
        stride = self.config.concurrency or 1
        return self._order[(lane + play * stride) % len(self._order)]

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        for play in itertools.count():
            index = self.trace_for(lane, play)
            start, t_star = 0, 0.0
            drain = play == 0 and self.config.warm_start
            if drain:
                index, start, t_star = self._warm_start(lane, index)
            yield self._root(_Play(self, self.plan(index), lane, play), start, t_star, drain=drain)

    def describe(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "name": self.name,
            "source": cfg.source or "synthetic",
            **({"revision": cfg.revision} if cfg.revision is not None else {}),
            "dropped_subagents": sum(dropped_subagents(trace) for trace in self.traces),
            "traces": len(self.traces),
            "corpus_digest": self.corpus_digest,
            "tokenizer": self.tokenizer.name,
            **cfg.model_dump(mode="json", exclude={"source", "revision", "tokenizer", "synthetic"}),
            **({"synthetic": cfg.synthetic.model_dump(mode="json")} if cfg.synthesized else {}),
        }

    # -- warm start ---------------------------------------------------------------------------------------------

    def _warm_start(self, lane: int, index: int) -> tuple[int, int, float]:
        """(trace, start turn, t*) for a lane's first play: the first trace from `index` on long enough to split."""
        need = self.config.warmup_requests_per_lane + 2  # primer turn, warm-up turns, one profiling turn
        position = self._order.index(index)
        for step in range(len(self._order)):
            candidate = self._order[(position + step) % len(self._order)]
            plan = self.plan(candidate)
            if len(plan.root.turns) >= need:
                return (candidate, *self._sample_start(plan, lane))
        return index, 0, 0.0

    def _sample_start(self, plan: TracePlan, lane: int) -> tuple[int, float]:
        """The first root turn at or after t* (clamped to leave a primer and one profiling turn), and t*."""
        cfg = self.config
        times = plan.start_times
        rng = np.random.default_rng([cfg.seed & 0xFFFFFFFF, lane, 17])
        ratio = float(rng.uniform(cfg.trajectory_start_min_ratio, cfg.trajectory_start_max_ratio))
        t_star = times[0] + ratio * (times[-1] - times[0])
        start = int(min(max(bisect.bisect_left(times, t_star), 1), len(times) - 1 - cfg.warmup_requests_per_lane))
        return start, min(max(t_star, times[start - 1]), times[start])

    # -- programs -----------------------------------------------------------------------------------------------

    def _root(self, play: _Play, start: int, t_star: float = 0.0, *, drain: bool = False) -> LaneProgram:
        turns = play.plan.root.turns
        conv = play.conversation("")
        first = 0
        handles: dict[int, SpawnHandle] = {}
        if start > 0:
            yield play.send(conv, "", turns[start - 1], "warmup", one_token=True, primer=True)
            for child in self._live_at(play.plan, start, t_star):
                handles[child] = yield Spawn(self._resumed_child(play, child, t_star))
            first = start + self.config.warmup_requests_per_lane
            for k in range(start, first):
                yield play.send(conv, "", turns[k], "warmup", one_token=True)
            if first > start:  # the snapshot: streams the warm-up turns spawned that are live when they end
                snap = turns[first - 1].request.end
                for child in self._live_at(play.plan, first, snap, since=start):
                    handles[child] = yield Spawn(self._resumed_child(play, child, snap))
        if drain:
            yield Drain()
        # a stream the warm-up snapshot resumed whose joining root turn was a warm-up turn (replayed with one token,
        # joining nothing) is waited for by the first profiling turn, as AIPerf's snapshot keeps its pending join
        skipped = tuple(handles[c] for c in handles
                        if (j := play.plan.children[c].joined_at) is not None and start <= j < first)
        last: RequestOutcome | None = None
        for k in range(first, len(turns)):
            turn = turns[k]
            waits = tuple(handles[c] for c in turn.joins if c in handles) + (skipped if k == first else ())
            delay = turn.delay
            if waits and self.config.branch_timing == "agentx":
                # AIPerf suspends the parent when its previous turn ends with a joined child still running and sends
                # the joining turn the moment the last one ends; otherwise the turn keeps its own end-to-start delay
                blocked = any(c in handles and c not in play.finished for c in turn.joins)
                delay = 0.0 if blocked else turn.stream_delay
            if waits:
                yield Join(waits)
            if k > 0 and delay > 0:
                yield Sleep(delay)
            last = yield play.send(conv, "", turn, "profiling", last=last if k > first else None)
            for child in turn.spawns:
                handles[child] = yield Spawn(self._child(play, child))

    @staticmethod
    def _live_at(plan: TracePlan, start: int, t_star: float, *, since: int = 0) -> list[int]:
        """Children anchored on root turns `since` .. `start` - 1 (spawned by them) that had not ended by t*."""
        live = []
        for i, child in enumerate(plan.children):
            if since <= child.anchor <= start - 1 and child.turns[-1].request.end > t_star:
                live.append(i)
        return live

    def _resumed_child(self, play: _Play, child: int, t_star: float) -> LaneProgram:
        """A child live at t*: prime its stream with its last request before t* (full prefix), then go on as
        recorded; a child spawned but not yet started at t* waits its remaining offset."""
        stream = play.plan.children[child]
        conv = play.conversation(stream.node)
        turns = stream.turns
        begun = [t for t in turns if t.request.t < t_star]
        if not begun:
            yield Drain()
            rest = turns[0].request.t - t_star
            if rest > 0:
                yield Sleep(rest)
            nxt = 0
        else:
            yield play.send(conv, stream.node, begun[-1], "warmup", one_token=True)
            yield Drain()
            nxt = len(begun)
        last: RequestOutcome | None = None
        for j in range(nxt, len(turns)):
            turn = turns[j]
            if (j > nxt or begun) and turn.delay > 0:
                yield Sleep(turn.delay)
            last = yield play.send(conv, stream.node, turn, "profiling", last=last)
        play.finished.add(child)

    def _child(self, play: _Play, child: int) -> LaneProgram:
        stream = play.plan.children[child]
        conv = play.conversation(stream.node)
        offset = stream.branch_offset if self.config.branch_timing == "agentx" else stream.offset
        if offset > 0:
            yield Sleep(offset)
        last: RequestOutcome | None = None
        for j, turn in enumerate(stream.turns):
            if j > 0 and turn.delay > 0:
                yield Sleep(turn.delay)
            last = yield play.send(conv, stream.node, turn, "profiling", last=last)
        play.finished.add(child)
