"""Virtual-time prediction: run a workload's lane programs against the engine core with a discrete-event clock.

The same lane programs the load generator runs over HTTP (`llmsweep.workload.base`) are interpreted here with no
HTTP and no asyncio: `Send` submits to the core (after the engine's frontend latency), `Sleep` schedules a wake-up,
`Spawn` starts a child program in the same session tree, `Join` waits for whole child trees. Closed loop: each of
`concurrency` lanes runs one session tree at a time and takes the next only when the whole tree has drained (AgentX
semantics); `Drain` holds a workload's warm-up as the client does (`llmsweep.workload.base.Drain`). Open loop:
`Workload.arrivals()` starts sessions at their own times.

The output is one record dict per request with exactly the fields of `llmsweep.client.records.RequestRecord`, so
`llmsweep.metrics.summarise` treats predicted and measured runs alike.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmsweep.errors import ConfigError
from llmsweep.metrics.gates import GateConfig, root_primer_failed, warmup_not_drained
from llmsweep.sim.core import EngineCore, SimRequest
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.kv import BlockHashes, Hint, as_keys
from llmsweep.sim.metrics import CoreCollector, MetricsStyle
from llmsweep.sim.prompt import PromptEncoder
from llmsweep.sim.text import token_text
from llmsweep.workload.base import (
    Drain,
    Join,
    LaneProgram,
    RequestOutcome,
    RequestSpec,
    Send,
    Sleep,
    Spawn,
    SpawnHandle,
    WarmupDrain,
    Workload,
)

if TYPE_CHECKING:
    from llmsweep.metrics.model import Summary
    from llmsweep.plan.point import Point
    from llmsweep.power.samples import Telemetry
    from llmsweep.power.virtual import VirtualPower

log = logging.getLogger(__name__)

_STEP, _SUBMIT, _WAKE, _ARRIVAL, _SLEEP = 0, 1, 2, 3, 4
"""Event kinds. _WAKE: a program's outcome or join is ready; _SLEEP: a program's sleep ends (payload (task, token): a
sleep the per-tree idle cap brought forward is pushed again with a new token, and its old entry is skipped)."""
_INF = float("inf")
UNBOUNDED_WINDOW_S = 1e7
"""The window of a point that stops on its prompt count (fixed-length): long enough never to be the reason."""


SCRAPE_INTERVAL_S = 1.0
"""How often a virtual-time run scrapes the simulated server (each virtual second, plus the window's base scrape):
what its provenance records as the scrape interval."""


@dataclass(slots=True, eq=False)
class _Tree:
    """A session tree, for AgentX's per-tree idle cap: its requests in flight, its programs whose outcome or join is
    ready, when it last sent or heard back, and its programs' pending sleeps (their wake times)."""

    inflight: int = 0
    ready: int = 0
    last: float = 0.0
    sleepers: dict[_Task, float] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class _Task:
    """One running lane program; `pending` counts itself plus unfinished child subtrees."""

    gen: LaneProgram
    lane: int
    parent: _Task | None
    tid: int
    pending: int = 1
    joining: set[int] = field(default_factory=set)
    children: dict[int, _Task] = field(default_factory=dict)
    done_children: set[int] = field(default_factory=set)
    armed: bool = False
    """It has to reach `Drain` before the warm-up drain releases the lanes."""
    tree: _Tree | None = None
    """Its session tree's idle-cap state (None: the workload has no per-tree cap)."""
    sleep_token: int = 0


@dataclass(slots=True)
class PredictionStats:
    """What the prediction cost and saw (for bench output and provenance)."""

    requests: int = 0
    steps: int = 0
    virtual_seconds: float = 0.0
    preemptions: int = 0
    sessions_started: int = 0
    counters: dict[str, Any] = field(default_factory=dict)
    warmup_drained_at: float | None = None
    """Virtual time at which the warm-up drain released the lanes (None: the workload does not drain)."""
    stop_reason: str | None = None
    """Why the run stopped before its window (the warm-up did not drain within its grace)."""


@dataclass(frozen=True, slots=True)
class WindowProgress:
    """How far a point's prediction is, as `predict_point(on_progress=...)` reports it at each scrape (every virtual
    second): the profiling window's virtual seconds done (None during the warm-up) of `window_s`, and the profiling
    requests sent of `to_send` (None: the window is bounded by time only)."""

    elapsed_s: float | None
    window_s: float
    sent: int
    to_send: int | None

    def fraction(self) -> float:
        """The share of the window done: of its virtual seconds or of its requests, whichever is further."""
        if self.elapsed_s is None:
            return 0.0
        by_time = self.elapsed_s / self.window_s if self.timed() else 0.0
        by_count = self.sent / self.to_send if self.to_send else 0.0
        return min(1.0, max(by_time, by_count))

    def timed(self) -> bool:
        """Whether the window has a length in time (a fixed-length point's is its request count only)."""
        return self.window_s < UNBOUNDED_WINDOW_S


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection while a point is predicted: its passes over what existed before (a trace corpus:
    millions of objects) and over the records and scrapes the run keeps anyway were an eighth of a one-hour point's
    CPU inside the run, and a quarter of an agentic point's in all when the summary (and its power block) was built
    after the run with collection back on, walking the same heap; the point's own cycles (finished lane programs)
    are few. A caller wraps the whole point (`predict_point`, `run` in virtual time), the predictor its run.
    Collection resumes afterwards; an outer caller's setting is restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Predictor:
    """Discrete-event interpreter of lane programs over an :class:`EngineCore`."""

    defer_stamps = True
    """Let the engine defer decodes' chunk stamps (`EngineCore.segments`; this interpreter's step ends take them)."""

    def __init__(self, core: EngineCore, *, start_time: float = 0.0, output_text: bool = False,
                 encoder: PromptEncoder | None = None, scrape_interval: float | None = None,
                 metrics_style: MetricsStyle = "both", model_name: str = "sim", shapes: bool = True) -> None:
        self.core = core
        if self.defer_stamps:
            core.segments = []  # the engine may defer decodes' chunk stamps (`EngineCore.segments`): see `_stamp`
        self._step_ends: list[float] = []
        """`core.step_ends` as unix times (start_time + each), as far as `_stamp` has needed them."""
        self.shapes = shapes
        """Encode prompts from their token shapes when the workload gives them (False: always from the text, the
        reference path)."""
        self.start_time = start_time
        self.output_text = output_text
        self.encoder = encoder or PromptEncoder(core.block_size)
        self.frontend = core.timer.frontend_latency()
        """The front end's latency with nothing else in flight: the least any request waits before the engine."""
        self._frontend_of = core.timer.frontend_latency
        self._in_flight = 0
        """Requests sent and not yet answered (finished or refused): the load the front end serves."""
        self.records: list[dict[str, Any]] = []
        self._heap: list[tuple[float, int, int, Any]] = []
        self._submits: list[float] = []
        """Times of the submits in the heap (a heap; ones already done are dropped lazily)."""
        self._seq = 0
        self._tid = 0
        self._busy = False
        self._duration = 0.0
        self._deadline = 0.0
        self._max_requests: float = float("inf")
        self._profiling_sent = 0
        self._lane_sessions: dict[int, Iterator[LaneProgram]] = {}
        self.stats = PredictionStats()
        self.scrape_interval = scrape_interval
        self.scrapes: list[dict[str, Any]] = []
        """Server-metric snapshots in the client's scrape format ({"t", "samples": [[name, labels, value]]})."""
        self._collector = CoreCollector(core, model_name=model_name, style=metrics_style)
        self._next_scrape = 0.0 if scrape_interval else float("inf")
        self.probes: list[Callable[[float], None]] = []
        """Called with each scrape's unix time (after the snapshot), e.g. the modelled power (`power.virtual`)."""
        self._idle_cap: float | None = None
        self._last_activity = 0.0
        self._hints: dict[tuple[str, str], Hint] = {}
        """Per agent (session, node): its last finished prompt's keys and blocks (oldest agents dropped first)."""
        self._hint_cap = 256
        self._tree_cap: float | None = None
        """AgentX's per-tree idle cap (`Workload.tree_idle_cap_s`)."""
        self._drain: WarmupDrain | None = None
        self._drain_grace = _INF
        self._held: list[_Task] = []
        """Programs that reached `Drain`, until the release."""
        self._primers: set[str] = set()
        """The ids of the root primers' records (`RequestIdentity.primer`): one refused stops the run."""
        self._idle_lanes: list[int] = []
        """Lanes whose first session tree drained before the release: they start their next one at the release."""
        self._wound_down = False
        """The run stopped and its sleeping programs were closed (`_wind_down`)."""
        self._warmup_phase = False
        """The warm-up requests are a phase of their own (`run(warmup_requests=...)`): profiling waits for its end."""
        self._warmups_in_flight = 0
        self._after_warmup: list[tuple[_Task, RequestSpec]] = []
        """Profiling requests held until the warm-up requests in flight have ended (`_warmup_phase`)."""

    def scrape(self, now: float, *, probes: bool = True) -> None:
        """Record one snapshot of the engine's Prometheus series at virtual time `now` (inside a block of decode
        steps: as of `now`, see :meth:`EngineCore.as_of`); `probes`: and call the probes (the modelled power, the
        progress), as the whole-second scrapes do — the window's base scrape does not, as the client's power sampler
        keeps its own clock."""
        core = self.core
        saved = core.enter_as_of(now)  # (`as_of` as a pair of calls: a scrape per virtual second)
        try:
            self.scrapes.append({"t": self.start_time + now, "samples": self._collector.samples()})
            if probes:
                for probe in self.probes:
                    probe(self.start_time + now)
        finally:
            if saved is not None:
                core.exit_as_of(saved)

    def report_window(self, on_progress: Callable[[WindowProgress], None]) -> None:
        """Call `on_progress` with :meth:`window_progress` at every scrape (each virtual second)."""
        self.probes.append(lambda t: on_progress(self.window_progress(t - self.start_time)))

    def window_progress(self, now: float) -> WindowProgress:
        """How far the profiling window is at virtual time `now` (a read: nothing of the run changes)."""
        sent = self._profiling_sent
        elapsed = None if not sent else max(0.0, min(self._duration, now - (self._deadline - self._duration)))
        cap = self._max_requests
        return WindowProgress(elapsed, self._duration, sent, None if cap == _INF else int(cap))

    # -- scheduling helpers ----------------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, payload))
        if kind == _SUBMIT:
            heapq.heappush(self._submits, t)

    def _horizon(self, now: float) -> float:
        """Until when the engine's batch cannot change from outside: the next submit. A wake-up or an arrival only
        runs a lane program, which reaches the engine by a submit at least the frontend latency later (it reads
        nothing of the engine; the latency with nothing else in flight is the least), so it bounds a block at its
        time plus that latency."""
        submits = self._submits
        while submits and submits[0] <= now:  # submitted already (events up to `now` are done)
            heapq.heappop(submits)
        heap = self._heap
        horizon = heap[0][0] + self.frontend if heap else _INF
        return submits[0] if submits and submits[0] < horizon else horizon

    def _remember(self, record: dict[str, Any], r: SimRequest) -> None:
        """Keep a finished request's prompt keys and blocks as the hint for its agent's next request, whose prompt
        usually extends it (`KVPool.lookup_array`; a wrong guess costs a comparison, never the answer)."""
        if not len(r.released) or not self.core.pool.prefix_caching:
            return
        hints = self._hints
        key = (record["session"], record["node"])
        hints.pop(key, None)
        hints[key] = (as_keys(r.block_hashes), r.released)
        if len(hints) > self._hint_cap:
            del hints[next(iter(hints))]

    def _new_task(self, gen: LaneProgram, lane: int, parent: _Task | None) -> _Task:
        self._tid += 1
        tree = parent.tree if parent is not None else (_Tree() if self._tree_cap is not None else None)
        return _Task(gen, lane, parent, self._tid, tree=tree)

    def _wind_down_if_stopped(self, now: float) -> float:
        """`_wind_down` once the run has stopped: at `now` (a stop, its requests sent), or at its deadline when no
        event and no scrape is left before it (the window ran out while every program slept); returns the time."""
        if self._stopped(now):
            self._wind_down(now)
        elif min(self._heap[0][0] if self._heap else now, self._next_scrape) >= self._deadline > now:
            now = self._deadline
            self._wind_down(now)
        return now

    def _wind_down(self, now: float) -> None:
        """Once the run has stopped (its window over, its requests sent, or a stop), close the programs still asleep
        now, as the client cancels its sleeping lanes at its end: each would only be closed when it woke
        (`_advance`), and the run went on to that time, with a scrape per virtual second on the way (a trace's
        recorded 1e5 s pause made a 20 s window take 20 s of wall time; in-flight requests still run to the end)."""
        self._wound_down = True
        heap, kept, sleepers = self._heap, [], []
        for event in heap:
            t, _, kind, payload = event
            if kind == _SLEEP or (kind == _WAKE and t > now and payload[1] is None):  # a sleep (a ready one is now)
                if kind == _WAKE or payload[1] == payload[0].sleep_token:  # not an entry the tree cap superseded
                    sleepers.append(payload[0])
                continue
            kept.append(event)
        if not sleepers:
            return
        heapq.heapify(kept)
        self._heap = kept
        for task in sleepers:
            if task.tree is not None:
                task.tree.sleepers.pop(task, None)
            self._advance(task, None, now)  # stopped: closes it (and lets an armed one leave the drain)

    def _cap_idle_gap(self) -> None:
        """AgentX's system idle cap, as the client applies it: when nothing is in flight and every program sleeps,
        and the earliest wake-up lies more than the cap after the last activity, bring every sleeper forward by the
        same amount (order and relative delays are kept)."""
        heap, cap = self._heap, self._idle_cap
        if cap is None or not heap or self._engine_busy():
            return
        shift = heap[0][0] - (self._last_activity + cap)
        if shift <= 1e-9 or any(kind not in (_WAKE, _SLEEP) for _, _, kind, _ in heap):
            return
        self._heap = [(t - shift, seq, kind, payload) for t, seq, kind, payload in heap]
        heapq.heapify(self._heap)
        for t, _, kind, payload in self._heap:
            if kind == _SLEEP and payload[1] == payload[0].sleep_token and payload[0].tree is not None:
                payload[0].tree.sleepers[payload[0]] = t

    def _cap_tree(self, tree: _Tree | None, now: float) -> None:
        """AgentX's per-tree idle cap: when none of the tree's requests is in flight, none of its programs is ready
        and its earliest sleep ends more than the cap after its last activity, bring all its sleeps forward by the
        same amount (order and relative delays kept). Called whenever one of its programs has just blocked."""
        cap = self._tree_cap
        if cap is None or tree is None or tree.inflight or tree.ready or not tree.sleepers:
            return
        shift = min(tree.sleepers.values()) - max(tree.last + cap, now)
        if shift <= 1e-9:
            return
        for task, wake in list(tree.sleepers.items()):
            task.sleep_token += 1
            tree.sleepers[task] = wake - shift
            self._push(wake - shift, _SLEEP, (task, task.sleep_token))

    def _on_wake(self, kind: int, payload: Any, now: float) -> None:
        """A program's outcome or join is ready (_WAKE), or its sleep ended (_SLEEP): run it until it blocks."""
        task: _Task = payload[0]
        tree = task.tree
        if kind == _SLEEP:
            if payload[1] != task.sleep_token:
                return  # brought forward by the per-tree cap: its new entry runs it
            if tree is not None:
                tree.sleepers.pop(task, None)
            value = None
        else:
            if tree is not None:
                tree.ready -= 1
            value = payload[1]
        self._advance(task, value, now)
        self._cap_tree(tree, now)

    def _ready(self, task: _Task, value: Any, now: float) -> None:
        """Run `task` at `now` with `value` (an outcome, a finished join, a release): after the events already due."""
        if task.tree is not None:
            task.tree.ready += 1
        self._push(now, _WAKE, (task, value))

    def _engine_busy(self) -> bool:
        """True while the engine has a step in flight or requests to run (a disaggregated cluster: any instance)."""
        return self._busy or self.core.has_work()

    # -- program interpretation --------------------------------------------------------------------------------------
    def _stopped(self, now: float) -> bool:
        return now >= self._deadline or self._profiling_sent >= self._max_requests

    def _advance(self, task: _Task, value: Any, now: float) -> None:
        """Feed `value` to the program and carry out actions until it blocks or ends."""
        while True:
            if self._stopped(now):
                task.gen.close()
                if task.armed:
                    task.armed = False
                    self._leave(now)
                return
            try:
                action = task.gen.send(value)
            except StopIteration:
                self._task_done(task, now)
                return
            if isinstance(action, Send):
                phase = action.spec.identity.phase
                if phase == "profiling":
                    if self._warmups_in_flight:  # a warm-up phase of its own: profiling starts when it has ended
                        self._after_warmup.append((task, action.spec))
                        return
                    self._send_profiling(task, action.spec, now)
                    return
                if phase == "warmup" and self._warmup_phase:
                    self._warmups_in_flight += 1
                self._send(task, action.spec, now)
                return
            if isinstance(action, Sleep):
                wake = now + max(0.0, action.seconds)
                if task.tree is None:
                    self._push(wake, _WAKE, (task, None))
                else:
                    task.tree.sleepers[task] = wake
                    self._push(wake, _SLEEP, (task, task.sleep_token))
                return
            if isinstance(action, Spawn):
                child = self._new_task(action.program, task.lane, task)
                if task.armed:
                    assert self._drain is not None
                    child.armed = True
                    self._drain.join()
                task.children[child.tid] = child
                task.pending += 1
                self._advance(child, None, now)
                value = SpawnHandle(child.tid)
                continue
            if isinstance(action, Join):
                waiting = {h.id for h in action.handles if h.id not in task.done_children}
                if not waiting:
                    value = None
                    continue
                task.joining = waiting
                return
            if isinstance(action, Drain):
                if not task.armed:  # after the release, a later session's, or in open loop: nothing to wait for
                    value = None
                    continue
                task.armed = False
                self._held.append(task)
                self._leave(now)
                return
            raise ConfigError(f"lane program yielded {action!r}, which is not Send, Sleep, Spawn, Join or Drain",
                              fix="yield only the actions defined in llmsweep.workload.base")

    def _send_profiling(self, task: _Task, spec: RequestSpec, now: float) -> None:
        if self._profiling_sent >= self._max_requests:
            task.gen.close()
            return
        if not self._profiling_sent:  # the window starts at the first profiling request, as the client's
            self._deadline = now + self._duration
            if self.scrape_interval:  # and its server series from a scrape there, as the client's
                self.scrape(now, probes=False)  # base scrape: the warm-up's counters are not the window's
        self._profiling_sent += 1
        self._send(task, spec, now)

    def _ended(self, record: dict[str, Any], now: float) -> None:
        """A request was answered (finished or refused). The last warm-up request of a warm-up phase of its own
        releases the profiling requests held for it, as the client starts profiling once its warm-up has ended."""
        self._in_flight -= 1
        if self._warmups_in_flight and record["phase"] == "warmup":
            self._warmups_in_flight -= 1
            if not self._warmups_in_flight:
                held, self._after_warmup = self._after_warmup, []
                for task, spec in held:
                    if self._stopped(now):
                        task.gen.close()
                    else:
                        self._send_profiling(task, spec, now)

    def _leave(self, now: float) -> None:
        """An armed program reached `Drain` or ended (or a lane had none): on the last one, the release (every held
        program goes on, every idle lane takes its next session), unless the wait outlasted the warm-up grace: then
        the run stops."""
        assert self._drain is not None
        if not self._drain.leave():
            return
        self.stats.warmup_drained_at = now
        if now > self._drain_grace and not self._stopped(now):
            self.stats.stop_reason = warmup_not_drained(self._drain_grace)
            log.warning("predict: %s", self.stats.stop_reason)
            self._deadline = now
        for held in self._held:
            if held.tree is not None:  # profiling starts from the snapshot: the tree's idle time counts from here
                held.tree.last = now
            self._ready(held, None, now)
        self._held = []
        idle, self._idle_lanes = self._idle_lanes, []
        for lane in idle:
            self._start_lane_session(lane, now)

    def _task_done(self, task: _Task, now: float) -> None:
        if task.armed:
            task.armed = False
            self._leave(now)
        task.pending -= 1
        while task.pending == 0:
            parent = task.parent
            if parent is None:
                self._tree_done(task, now)
                return
            parent.done_children.add(task.tid)
            parent.pending -= 1
            if task.tid in parent.joining:
                parent.joining.discard(task.tid)
                if not parent.joining:
                    self._ready(parent, None, now)
            task = parent

    def _tree_done(self, root: _Task, now: float) -> None:
        """A lane's session tree drained: start the lane's next session (closed loop only)."""
        if root.lane >= 0:
            self._start_lane_session(root.lane, now)

    def _start_lane_session(self, lane: int, now: float, *, armed: bool = False) -> None:
        if self._drain is not None and self._drain.holding and not armed:
            self._idle_lanes.append(lane)  # a second session waits for the release
            return
        task = None
        if not self._stopped(now) and (sessions := self._lane_sessions.get(lane)) is not None:
            program = next(sessions, None)
            if program is not None:
                task = self._new_task(program, lane, None)
        if task is None:
            if armed:  # a lane with nothing to play has nothing to drain
                self._leave(now)
            return
        task.armed = armed
        self.stats.sessions_started += 1
        self._advance(task, None, now)

    def _send(self, task: _Task, spec: RequestSpec, now: float) -> None:
        ident = spec.identity
        if self.shapes and spec.shape is not None:
            n_tokens, hashes = self.encoder.shaped(spec.shape, template=spec.api == "chat")
        else:
            n_tokens, hashes = self.encoder.encode(messages=spec.messages, prompt=spec.prompt)
        record: dict[str, Any] = {
            "id": f"sim-{len(self.records)}", "trace": ident.trace, "lane": ident.lane, "turn": ident.turn,
            "phase": ident.phase, "session": ident.session, "node": ident.node,
            "request_index": ident.request_index, "api": spec.api,
            "scheduled_at": self.start_time + now, "sent_at": self.start_time + now, "first_byte_at": None,
            "first_token_at": None, "end_at": None, "chunk_times": [], "chunk_tokens": [], "status": None,
            "error_class": None, "error": None, "prompt_tokens": n_tokens, "completion_tokens": None,
            "cached_tokens": None, "input_tokens_expected": spec.input_tokens,
            "theoretical_cached_tokens": spec.theoretical_cached_tokens, "max_tokens": spec.max_tokens,
            "finish_reason": "length", "worker": 0,  # the predicted engine generates max_tokens, as under ignore_eos
            "retried": False, "usage_over_max_tokens": None,
        }
        self.records.append(record)
        if ident.primer:
            self._primers.add(record["id"])
        self._last_activity = now
        if task.tree is not None:
            task.tree.inflight += 1
            task.tree.last = now
        # the front end's latency under the requests it already serves (`Efficiency.frontend_per_request_s`)
        latency = self._frontend_of(self._in_flight)
        self._in_flight += 1
        self._push(now + latency, _SUBMIT, (task, record, n_tokens, hashes, spec.max_tokens))

    def _submit(self, payload: tuple[_Task, dict[str, Any], int, BlockHashes, int], now: float) -> None:
        task, record, n_tokens, hashes, max_tokens = payload
        owner = (task, record, record["chunk_times"], record["chunk_tokens"])
        hint = self._hints.get((record["session"], record["node"]))
        req = self.core.new_request(n_tokens, hashes, max_tokens, owner=owner, now=now, hint=hint)
        if req.error is not None:
            self._rejected(task, record, n_tokens, req.error, now)

    def _rejected(self, task: _Task, record: dict[str, Any], n_tokens: int, error: str, now: float) -> None:
        """The engine refused a request at submission (too long for the KV pool, or empty): recorded as a 400; a
        context overflow ends that session's program (AgentX, as the client), another error is the program's."""
        overflow = bool(n_tokens)
        record.update(status=400, error_class="context_overflow" if overflow else "http", error=error,
                      end_at=self.start_time + now)
        self._ended(record, now)
        self._last_activity = now
        tree = task.tree
        if tree is not None:
            tree.inflight -= 1
            tree.last = now
        if record["id"] in self._primers and not self._stopped(now):  # AgentX aborts the run, as the client does
            self.stats.stop_reason = root_primer_failed(record["lane"], record["trace"], error)
            log.warning("predict: %s", self.stats.stop_reason)
            self._deadline = now
        if overflow:
            task.gen.close()
            self._task_done(task, now)
        else:
            self._advance(task, RequestOutcome(ok=False, error=error), now)
        self._cap_tree(tree, now)

    def _stamp(self, segments: list[tuple[SimRequest, int, int, list[int] | None]]) -> None:
        """Stamp the chunks the engine deferred (`EngineCore.segments`): at the end of each step of each, a token or
        the segment's tokens of that step."""
        ends = self._step_ends
        log = self.core.step_ends
        if len(ends) < len(log):
            start = self.start_time
            ends.extend([start + t for t in log[len(ends):]])
        for r, lo, hi, tokens in segments:
            r.owner[2].extend(ends[lo:hi])
            r.owner[3].extend([1] * (hi - lo) if tokens is None else tokens)
        segments.clear()

    def _on_step_end(self, now: float) -> None:
        t_abs = self.start_time + now
        emitted = self.core.end_step()
        segments = self.core.segments
        if segments:
            self._stamp(segments)
        block = self.core.last_block
        if block is not None:  # several decode steps at once: no first token, a chunk per step, finishes at the end
            ends = [self.start_time + t for t in block.ends]
            for r, tokens in zip(emitted, block.tokens, strict=True):
                r.owner[2].extend(ends)
                r.owner[3].extend(tokens)
            if block.finishes:
                for r in emitted:
                    if r.finished_at is not None:
                        self._finish(r, r.owner[0], r.owner[1], now)
            return
        for r in emitted:
            task, record, times, tokens = r.owner
            if not times:
                record["first_token_at"] = record["first_byte_at"] = t_abs
            times.append(t_abs)
            tokens.append(r.last_emitted)
            if r.finished_at is not None:
                self._finish(r, task, record, now)

    def _finish(self, r: SimRequest, task: _Task, record: dict[str, Any], now: float) -> None:
        record.update(end_at=self.start_time + now, status=200, completion_tokens=r.generated,
                      cached_tokens=max(r.cached_tokens, 0))
        self._ended(record, now)
        self._remember(record, r)
        self._last_activity = now
        if task.tree is not None:
            task.tree.inflight -= 1
            task.tree.last = now
        text = token_text(self.core.config.seed, r.rid, 0, r.generated) if self.output_text else ""
        self._ready(task, RequestOutcome(ok=True, output_text=text, output_tokens=r.generated), now)

    # -- main loop ----------------------------------------------------------------------------------------------------
    def run(self, workload: Workload, *, concurrency: int, duration: float,
            max_requests: int | None = None, open_loop: bool | None = None,
            warmup_requests: int = 0) -> list[dict[str, Any]]:
        """Interpret `workload` for a profiling window of `duration` virtual seconds counted from the first profiling
        request (warm-up requests come first and do not count, as in the client), or until `max_requests` profiling
        requests were sent (the client's `num_requests`); in-flight requests then run to completion.

        `open_loop`: start sessions at the workload's own arrival times; None = whenever it has them. False runs
        `concurrency` closed-loop lanes even then (the client does so when given a concurrency).
        `warmup_requests`: the client's (`Load.warmup_requests`, a fixed-length point's): above 0 its warm-up is a
        phase of its own, as the client's: a profiling request waits until no warm-up request is in flight, so the
        window starts when the warm-up has ended and its requests never share the engine with the window's."""
        if duration <= 0:
            raise ConfigError(f"predict: duration must be positive, got {duration}", fix="pass --duration > 0")
        self._warmup_phase = warmup_requests > 0
        with no_cyclic_gc():
            return self._run(workload, concurrency=concurrency, duration=duration, max_requests=max_requests,
                             open_loop=open_loop)

    def _run(self, workload: Workload, *, concurrency: int, duration: float, max_requests: int | None,
             open_loop: bool | None) -> list[dict[str, Any]]:
        self._duration = duration
        self._hint_cap = 4 * max(concurrency, 1) + 64
        # until the first profiling request the deadline only bounds a runaway warm-up
        self._deadline = 10 * duration + 3600.0
        self._max_requests = float("inf") if max_requests is None else max_requests
        # the whole-system idle cap needs every lane in view, so the interpreter applies it (as the client does)
        self._idle_cap = getattr(getattr(workload, "config", None), "system_idle_gap_cap_s", None)
        self._tree_cap = workload.tree_idle_cap_s
        arrivals = workload.arrivals() if open_loop is not False else None
        if arrivals is not None:
            self._push_arrival(arrivals)
        else:
            if concurrency < 1:
                raise ConfigError(f"predict: concurrency must be >= 1, got {concurrency}", fix="pass --concurrency")
            if workload.warmup_drain_s is not None:
                self._drain = WarmupDrain(concurrency)
                self._drain_grace = workload.warmup_drain_s
            for lane in range(concurrency):
                self._lane_sessions[lane] = iter(workload.sessions(lane))
                self._start_lane_session(lane, 0.0, armed=self._drain is not None)
        now = self._loop()
        if self.core.segments is not None:  # (a stalled engine's requests keep the chunks they emitted)
            self.core.settle()
            self._stamp(self.core.segments)
        if self.scrape_interval:
            self.scrape(now)
        self._finish_stats(now)
        return self.records

    def _finish_stats(self, now: float) -> None:
        c = self.core.counters
        self.stats.requests = len(self.records)
        self.stats.steps = c.steps
        self.stats.virtual_seconds = now
        self.stats.preemptions = c.preemptions

    def _loop(self) -> float:
        """Pop events until none is left and the engine is idle; returns the virtual time of the last one."""
        core = self.core
        now = 0.0
        while self._heap or (not self._busy and core.has_work()):
            if not self._wound_down:
                now = self._wind_down_if_stopped(now)
            if self._idle_cap is not None and not self._stopped(now):
                self._cap_idle_gap()
            heap = self._heap
            if heap:
                if heap[0][0] >= self._next_scrape:
                    self.scrape(self._next_scrape)
                    self._next_scrape += self.scrape_interval or float("inf")
                    continue
                now, _, kind, payload = heapq.heappop(heap)
                if kind == _STEP:
                    self._busy = False
                    self._on_step_end(now)
                elif kind == _SUBMIT:
                    self._submit(payload, now)
                elif kind in (_WAKE, _SLEEP):
                    self._on_wake(kind, payload, now)
                else:
                    self._on_arrival(payload, now)
            if not self._busy and core.has_work() and (not heap or heap[0][0] > now):
                # a scrape is a read (`scrape` sees a block's state as of its time): it does not bound a block
                end = core.begin_step(now, self._horizon(now), finish=True)
                if end is not None:
                    self._busy = True
                    self._push(end, _STEP, None)
                elif not heap:
                    log.warning("predict: engine stalled with %d waiting requests", len(core.waiting))
                    break
        return now

    def _push_arrival(self, arrivals: Iterator[Any]) -> None:
        if self._profiling_sent >= self._max_requests:
            return
        arrival = next(arrivals, None)
        if arrival is not None and arrival.at < self._deadline:
            self._push(max(0.0, arrival.at), _ARRIVAL, (arrival, arrivals))

    def _on_arrival(self, payload: tuple[Any, Iterator[Any]], now: float) -> None:
        arrival, rest = payload
        self.stats.sessions_started += 1
        self._advance(self._new_task(arrival.program, -1, None), None, now)
        self._push_arrival(rest)


def predict(
    workload: Workload,
    engine_config: EngineConfig | EngineCore,
    *,
    concurrency: int,
    duration: float,
    start_time: float = 0.0,
    output_text: bool = False,
    max_requests: int | None = None,
    warmup_requests: int = 0,
) -> list[dict[str, Any]]:
    """Predicted request records for `workload` on the simulated engine (see the module doc).

    `engine_config` is an :class:`EngineConfig` (a fresh core is built) or a ready core (to read its counters after).
    Times in the records are `start_time` + virtual seconds. `warmup_requests`: as the client's (`Predictor.run`).
    """
    core = engine_config if isinstance(engine_config, EngineCore) else build_core(engine_config)
    return Predictor(core, start_time=start_time, output_text=output_text).run(
        workload, concurrency=concurrency, duration=duration, max_requests=max_requests,
        warmup_requests=warmup_requests)


@dataclass
class PredictedPoint:
    """What `llmsweep predict` produced for one point: the records, the scrapes and the gated summary."""

    point: Point
    seconds: float
    records: list[dict[str, Any]]
    scrapes: list[dict[str, Any]]
    summary: Summary | None
    """None when the caller summarises the written files itself (`llmsweep run` in virtual time)."""
    workload: Workload | None = None
    stats: PredictionStats | None = None
    telemetry: Telemetry | None = None
    """The modelled power the summary integrated (what `gpu_metrics.jsonl` holds), when it has a power block."""
    calibration: str | None = None
    """The simulated engine's calibration label (a deployment's: each pool's)."""
    run_info: dict[str, Any] | None = None
    """What the summary was computed with besides the records and scrapes (`client.folder.run_json`: provenance,
    gates, source `predicted`), which `predict --out` writes as the point's run.json; None when not summarised."""

    def write_streams(self, folder: Path) -> None:
        """The records and scrapes as the client writes them (`records.jsonl`, `server_metrics.jsonl`, each line in
        the client's encoding), into `folder`."""
        from llmsweep.client.files import RECORDS_FILE, SERVER_METRICS_FILE
        from llmsweep.client.records import record_line
        from llmsweep.client.scrape import scrape_line

        (folder / RECORDS_FILE).write_bytes(b"".join(map(record_line, self.records)))
        (folder / SERVER_METRICS_FILE).write_bytes(b"".join(map(scrape_line, self.scrapes)))


def point_window(point: Point, duration: float | None, max_requests: int | None) -> tuple[float, int | None]:
    """(profiling window in virtual seconds, profiling requests to send) of a point, as `predict_point` runs it: a
    fixed-length point sends its planned prompts whatever the window; otherwise the window asked for, the point's own,
    the job's duration, else 600 s."""
    load = point.load
    if duration is None and max_requests is None and load.duration_s is None and load.num_requests is not None:
        return UNBOUNDED_WINDOW_S, load.num_requests
    return duration or load.duration_s or float(point.job.duration or 600), max_requests


def predict_point(
    point: Point,
    config: EngineConfig,
    *,
    duration: float | None = None,
    max_requests: int | None = None,
    provenance: dict[str, Any] | None = None,
    start_time: float = 0.0,
    summarize: bool = True,
    power: VirtualPower | None = None,
    on_progress: Callable[[WindowProgress], None] | None = None,
    **workload_overrides: Any,
) -> PredictedPoint:
    """Predict one point of a job on the simulated engine `config`, as `llmsweep run` would drive it: the point's
    workload (built-in tokenizer), concurrency and gates; a profiling window of `duration` virtual seconds (default:
    the point's own window, else the job's duration, else 600 s) or until `max_requests` profiling requests (default:
    the point's prompt count — a fixed-length point sends its planned prompts whatever the window). Times in the
    records are `start_time` + virtual seconds; `summarize=False` leaves the summary empty. `power`: the GPUs'
    modelled power (`power.virtual`), read at every scrape and integrated into the summary's power block.
    `on_progress`: called at every scrape (each virtual second) with how far the window is (a progress display)."""
    from llmsweep.client.folder import run_json
    from llmsweep.metrics.model import PREDICTED

    load = point.load
    seconds, max_requests = point_window(point, duration, max_requests)
    workload = point.workload(simulated=True, **workload_overrides)
    predictor = Predictor(build_core(config), start_time=start_time, scrape_interval=SCRAPE_INTERVAL_S,
                          metrics_style=config.engine_style, model_name=point.job.model)
    if power is not None and power.probe is not None:
        predictor.probes.append(power.probe(predictor.core))
    if on_progress is not None:
        predictor.report_window(on_progress)
    records = predictor.run(workload, concurrency=point.concurrency, duration=seconds, max_requests=max_requests,
                            open_loop=load.concurrency is None, warmup_requests=load.warmup_requests)
    summary: Summary | None = None
    telemetry = info = None
    if summarize:  # `llmsweep run` in virtual time writes the files and summarises them as the live path does
        # the workload it ran, as `run` records it: the coverage gate reads an agentic replay's idle cap from it
        # (less the replay's random run id, a cache-bust identity and no setting: a prediction is the same whatever
        # process makes it)
        described = {"workload": {k: v for k, v in workload.describe().items() if k != "run_id"}} \
            if not (provenance or {}).get("workload") else {}
        info = run_json(provenance={**(provenance or {}), **described}, gates=point_gates(point, seconds),
                        client={"stop_reason": predictor.stats.stop_reason}, gpus=point.gpus, source=PREDICTED)
        telemetry = power.telemetry(point.gpus) if power is not None else None
        summary = summarise_predicted(records, predictor.scrapes, info, telemetry)
    return PredictedPoint(point, seconds, records, predictor.scrapes, summary, workload, predictor.stats, telemetry,
                          config.calibration_label(), info)


def point_gates(point: Point, seconds: float) -> GateConfig:
    """The gates a predicted point is judged by: the point's own, its planned window the one predicted when the point
    plans a duration."""
    return point.gates(planned_duration_s=seconds if point.load.duration_s is not None else None)


def summarise_predicted(records: list[dict[str, Any]], scrapes: list[dict[str, Any]], info: dict[str, Any],
                        telemetry: Telemetry | None) -> Summary:
    """The summary of a predicted point's records and scrapes with what its run.json says (`info`, a
    `client.folder.run_json` document), as `llmsweep summarize` computes it again from the written files."""
    from llmsweep.metrics import summarise

    return summarise(records, gpus=info["gpus"], server_metrics=scrapes, source=info["source"],
                     provenance=info["provenance"], gates=GateConfig(**info["gates"]), telemetry=telemetry,
                     client=info["client"])
