"""Small workloads for client tests (picklable, so multi-process runs can use them)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from llmsweep.workload.base import (
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
