"""Small workloads for client tests (picklable, so multi-process runs can use them)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

from llmsweep.workload.base import (
    Drain,
    Join,
    LaneProgram,
    RequestIdentity,
    RequestSpec,
    Send,
    Sleep,
    Spawn,
    Workload,
)


def chat_spec(lane: int, index: int, *, max_tokens: int = 8, phase: str = "profiling", **extra: Any) -> RequestSpec:
    return RequestSpec(
        api="chat",
        max_tokens=max_tokens,
        messages=({"role": "user", "content": f"hello lane {lane} request {index} " + "word " * 10},),
        input_tokens=15,
        identity=RequestIdentity(lane=lane, request_index=index, phase=phase, session=f"{lane}-{index}"),  # type: ignore[arg-type]
        extra_body=dict(extra),
    )


class SimpleWorkload(Workload):
    """Single-request sessions; each lane yields endless sessions (the client's budget or deadline stops it).

    `faults` maps a global request index to a `test_fault` the test server will act on.
    """

    name = "simple"

    def __init__(self, *, max_tokens: int = 8, api: str = "chat", faults: dict[int, str] | None = None,
                 lanes_hint: int = 1, sessions_per_lane: int | None = None) -> None:
        self.max_tokens = max_tokens
        self.api = api
        self.faults = faults or {}
        self.lanes_hint = lanes_hint
        self.sessions_per_lane = sessions_per_lane

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        counter = itertools.count() if self.sessions_per_lane is None else range(self.sessions_per_lane)
        for k in counter:
            index = k * self.lanes_hint + lane
            yield self._program(lane, index)

    def _program(self, lane: int, index: int) -> LaneProgram:
        extra = {"test_fault": self.faults[index]} if index in self.faults else {}
        spec = chat_spec(lane, index, max_tokens=self.max_tokens, **extra)
        if self.api == "completions":
            spec = RequestSpec(api="completions", max_tokens=self.max_tokens, prompt="hello " * 10,
                               input_tokens=10, identity=spec.identity, extra_body=spec.extra_body)
        yield Send(spec)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "max_tokens": self.max_tokens}


class TreeWorkload(Workload):
    """A root that sends, spawns `children` subagents (each: sleep, send), sends again, joins, sends last.

    Each session tree therefore makes 3 + children requests; think time `think_s` separates root turns.
    """

    name = "tree"

    def __init__(self, *, children: int = 2, think_s: float = 0.01, max_tokens: int = 4, trees_per_lane: int = 1,
                 background_child: bool = False) -> None:
        self.children = children
        self.think_s = think_s
        self.max_tokens = max_tokens
        self.trees_per_lane = trees_per_lane
        self.background_child = background_child

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        for t in range(self.trees_per_lane):
            yield self._root(lane, t)

    def _spec(self, lane: int, tree: int, node: str, turn: int) -> RequestSpec:
        return RequestSpec(
            api="chat",
            max_tokens=self.max_tokens,
            messages=({"role": "user", "content": f"lane {lane} tree {tree} node {node} turn {turn}"},),
            input_tokens=8,
            theoretical_cached_tokens=4 * turn,
            identity=RequestIdentity(lane=lane, turn=turn, session=f"{lane}-{tree}", node=node, trace=f"t{tree}"),
        )

    def _child(self, lane: int, tree: int, node: str) -> LaneProgram:
        yield Sleep(self.think_s)
        yield Send(self._spec(lane, tree, node, 0))

    def _root(self, lane: int, tree: int) -> LaneProgram:
        yield Send(self._spec(lane, tree, "", 0))
        handles = []
        for c in range(self.children):
            handles.append((yield Spawn(self._child(lane, tree, f"sa{c}"))))
        if self.background_child:
            yield Spawn(self._child(lane, tree, "bg"))  # never joined: the lane must still wait for it
        yield Sleep(self.think_s)
        yield Send(self._spec(lane, tree, "", 1))
        yield Join(tuple(handles))
        yield Send(self._spec(lane, tree, "", 2))


class DrainingWorkload(Workload):
    """Lanes that warm up for different times, then drain (`Drain`) before profiling, as AgentX lanes do.

    Lane 0 sends `slow_warmups` warm-up requests of `slow_tokens` tokens and spawns a child that sends one warm-up
    request and drains too; lane `lanes - 1`'s first program sends one warm-up request and ends without draining (a
    trace too short to split); every other lane sends one 1-token warm-up request. After its `Drain` a first program
    sends `profiling` requests; every later session sends `profiling` requests at once.
    """

    name = "draining"

    def __init__(self, *, lanes: int, slow_warmups: int = 3, slow_tokens: int = 40, profiling: int = 2,
                 sessions_per_lane: int = 2, grace_s: float = 60.0) -> None:
        self.lanes = lanes
        self.slow_warmups = slow_warmups
        self.slow_tokens = slow_tokens
        self.profiling = profiling
        self.sessions_per_lane = sessions_per_lane
        self.warmup_drain_s = grace_s

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        yield self._first(lane)
        for k in range(1, self.sessions_per_lane):
            yield self._sends(lane, 100 * k, self.profiling)

    def _sends(self, lane: int, base: int, n: int, *, phase: str = "profiling", tokens: int = 2) -> LaneProgram:
        for i in range(n):
            yield Send(chat_spec(lane, base + i, max_tokens=tokens, phase=phase))

    def _first(self, lane: int) -> LaneProgram:
        if lane == 0:
            child = yield Spawn(self._child())
            yield from self._sends(lane, 0, self.slow_warmups, phase="warmup", tokens=self.slow_tokens)
            yield Drain()
            yield Join((child,))
        else:
            yield from self._sends(lane, 0, 1, phase="warmup", tokens=1)
            if lane == self.lanes - 1:
                return
            yield Drain()
        yield from self._sends(lane, 10, self.profiling)

    def _child(self) -> LaneProgram:
        yield from self._sends(0, 50, 1, phase="warmup", tokens=1)
        yield Drain()
        yield from self._sends(0, 60, 1)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "lanes": self.lanes}


class PausingTree(Workload):
    """One session per lane: the root sends, optionally spawns a background child that sends every `every_s` for
    `busy_s`, sleeps `pause_s`, then sends again. With a per-tree idle cap (`tree_idle_cap_s`) the pause is cut to
    the cap only when the tree has nothing in flight (no child, or a child that has stopped)."""

    name = "pausing-tree"

    def __init__(self, *, pause_s: float, cap_s: float | None, child: bool, every_s: float = 5.0,
                 busy_s: float = 2000.0, max_tokens: int = 2, then_s: tuple[float, ...] = ()) -> None:
        self.pause_s, self.child, self.every_s, self.busy_s = pause_s, child, every_s, busy_s
        self.then_s = then_s
        """Further sleeps after the pause, before the second send (past the cap they end at once)."""
        self.max_tokens = max_tokens
        self.tree_idle_cap_s = cap_s

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        yield self._root(lane)

    def _root(self, lane: int) -> LaneProgram:
        yield Send(chat_spec(lane, 0, max_tokens=self.max_tokens))
        if self.child:
            yield Spawn(self._child(lane))
        yield Sleep(self.pause_s)
        for seconds in self.then_s:
            yield Sleep(seconds)
        yield Send(chat_spec(lane, 1, max_tokens=self.max_tokens))

    def _child(self, lane: int) -> LaneProgram:
        for i in range(int(self.busy_s / self.every_s)):
            yield Send(chat_spec(lane, 100 + i, max_tokens=self.max_tokens))
            yield Sleep(self.every_s)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


class DyingWorkload(SimpleWorkload):
    """A `SimpleWorkload` whose lane `die_lane` kills its process (exit 3) when asked for its sessions: a client
    worker that dies during the warm-up."""

    name = "dying"

    def __init__(self, *, die_lane: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.die_lane = die_lane

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        if lane == self.die_lane:
            os._exit(3)
        return super().sessions(lane)
