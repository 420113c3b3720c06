"""A tiny deterministic virtual-clock interpreter of lane programs, for tests.

Every Send takes `latency` simulated seconds; Sleep advances the program's clock; Spawn starts a child in the same
session tree; Join resumes once each handle's whole subtree has finished. A lane starts its next session only when
its whole tree has drained. No new session or request starts at or after `duration`. A workload that drains its
warm-up (`Workload.warmup_drain_s`) has its `Drain`s held until every lane's first program has arrived or ended, and
one with a per-tree idle cap (`Workload.tree_idle_cap_s`) has a tree's sleeps brought forward together once none of
its requests has been in flight for that long (checked at the end of each instant).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

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


@dataclass
class Dispatch:
    at: float
    lane: int
    spec: RequestSpec
    in_flight: int
    """Requests in flight right after this one was dispatched."""


@dataclass
class SessionSpan:
    lane: int
    session: str
    start: float
    root_end: float | None = None
    drained: float | None = None


@dataclass
class _Task:
    id: int
    program: LaneProgram
    tree: _Tree
    parent: _Task | None
    children: list[_Task] = field(default_factory=list)
    done: bool = False
    armed: bool = False
    token: int = 0

    def subtree_done(self) -> bool:
        return self.done and all(c.subtree_done() for c in self.children)


@dataclass
class _Tree:
    lane: int
    span: SessionSpan
    live: int = 0
    inflight: int = 0
    last: float = 0.0
    sleepers: dict[int, float] = field(default_factory=dict)


@dataclass
class Run:
    dispatches: list[Dispatch]
    sessions: list[SessionSpan]
    max_in_flight: int
    max_live_trees: int
    end: float
    released: float | None = None
    """When the warm-up drain let the lanes go (None: the workload does not drain)."""


def run_virtual(
    workload: Workload,
    *,
    lanes: int,
    duration: float,
    latency: float | Callable[[RequestSpec], float] = 1.0,
    outcome: Callable[[RequestSpec], RequestOutcome] | None = None,
) -> Run:
    lat = latency if callable(latency) else (lambda _spec: float(latency))
    make_outcome = outcome or (lambda spec: RequestOutcome(ok=True, output_text="", output_tokens=spec.max_tokens))
    heap: list[tuple[float, int, Callable[[], None]]] = []
    seq = itertools.count()
    ids = itertools.count()
    now = 0.0
    in_flight = 0
    live_trees = 0
    stats = {"max_in_flight": 0, "max_live": 0}
    dispatches: list[Dispatch] = []
    spans: list[SessionSpan] = []
    tasks: dict[int, _Task] = {}
    joins: list[tuple[_Task, tuple[SpawnHandle, ...]]] = []
    iters: dict[int, Iterator[LaneProgram]] = {lane: workload.sessions(lane) for lane in range(lanes)}
    gate = WarmupDrain(lanes) if workload.warmup_drain_s is not None else None
    tree_cap = workload.tree_idle_cap_s
    trees: list[_Tree] = []
    held: list[_Task] = []
    idle_lanes: list[int] = []
    released: list[float] = []

    def leave() -> None:
        assert gate is not None
        if gate.leave():
            released.append(now)
            for tree in trees:  # profiling starts from the snapshot: idle time counts from here
                tree.last = now
            for task in held:
                at(now, partial(step, task, None))
            for lane in idle_lanes:
                start_session(lane)

    def at(when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(heap, (when, next(seq), fn))

    def start_session(lane: int, armed: bool = False) -> None:
        nonlocal live_trees
        if gate is not None and gate.holding and not armed:
            idle_lanes.append(lane)
            return
        if now >= duration:
            if armed:
                leave()
            return
        program = next(iters[lane], None)
        if program is None:
            if armed:
                leave()
            return
        span = SessionSpan(lane=lane, session="", start=now)
        spans.append(span)
        tree = _Tree(lane=lane, span=span, last=now)
        trees.append(tree)
        live_trees += 1
        stats["max_live"] = max(stats["max_live"], live_trees)
        start_task(program, tree, None, armed)

    def start_task(program: LaneProgram, tree: _Tree, parent: _Task | None, armed: bool = False) -> _Task:
        task = _Task(id=next(ids), program=program, tree=tree, parent=parent, armed=armed)
        if armed and parent is not None:
            assert gate is not None
            gate.join()
        tasks[task.id] = task
        tree.live += 1
        if parent is not None:
            parent.children.append(task)
        at(now, lambda: step(task, None))
        return task

    def finish(task: _Task) -> None:
        nonlocal live_trees
        task.done = True
        if task.armed:
            task.armed = False
            leave()
        tree = task.tree
        tree.live -= 1
        if task.parent is None:
            tree.span.root_end = now
        for waiting in list(joins):
            waiter, handles = waiting
            if all(tasks[h.id].subtree_done() for h in handles):
                joins.remove(waiting)
                at(now, partial(step, waiter, None))
        if tree.live == 0:
            tree.span.drained = now
            live_trees -= 1
            start_session(tree.lane)

    def step(task: _Task, value: Any) -> None:
        nonlocal in_flight
        while True:
            try:
                action = task.program.send(value)
            except StopIteration:
                finish(task)
                return
            if isinstance(action, Send):
                if now >= duration:
                    finish(task)
                    return
                spec = action.spec
                if not task.tree.span.session:
                    task.tree.span.session = spec.identity.session
                in_flight += 1
                task.tree.inflight += 1
                task.tree.last = now
                stats["max_in_flight"] = max(stats["max_in_flight"], in_flight)
                dispatches.append(Dispatch(at=now, lane=task.tree.lane, spec=spec, in_flight=in_flight))

                def complete(t: _Task = task, s: RequestSpec = spec) -> None:
                    nonlocal in_flight
                    in_flight -= 1
                    t.tree.inflight -= 1
                    t.tree.last = now
                    step(t, make_outcome(s))

                at(now + lat(spec), complete)
                return
            if isinstance(action, Sleep):
                task.token += 1
                task.tree.sleepers[task.id] = now + action.seconds
                at(now + action.seconds, partial(wake, task, task.token))
                return
            if isinstance(action, Spawn):
                child = start_task(action.program, task.tree, task, task.armed)
                value = SpawnHandle(child.id)
                continue
            if isinstance(action, Join):
                if all(tasks[h.id].subtree_done() for h in action.handles):
                    value = None
                    continue
                joins.append((task, action.handles))
                return
            if isinstance(action, Drain):
                if task.armed:
                    task.armed = False
                    held.append(task)
                    leave()
                    return
                value = None
                continue
            raise TypeError(f"unknown action {action!r}")

    def wake(task: _Task, token: int) -> None:
        if task.token != token:
            return  # brought forward by the per-tree cap: its new wake-up runs it
        task.tree.sleepers.pop(task.id, None)
        step(task, None)

    def cap_trees() -> None:
        """AgentX's per-tree idle cap, at the end of an instant (every program that could run has run)."""
        if tree_cap is None:
            return
        for tree in trees:
            if tree.inflight or not tree.sleepers:
                continue
            shift = min(tree.sleepers.values()) - max(tree.last + tree_cap, now)
            if shift <= 1e-9:
                continue
            for tid, when in list(tree.sleepers.items()):
                task = tasks[tid]
                task.token += 1
                tree.sleepers[tid] = when - shift
                at(when - shift, partial(wake, task, task.token))

    for lane in range(lanes):
        start_session(lane, armed=gate is not None)
    while heap:
        now, _, fn = heapq.heappop(heap)
        fn()
        if not heap or heap[0][0] > now:
            cap_trees()
    return Run(dispatches, spans, stats["max_in_flight"], stats["max_live"], now, released[0] if released else None)
