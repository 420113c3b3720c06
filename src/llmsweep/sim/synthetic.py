"""Small hand-written workloads for the simulator's tests, benchmarks and demos (no trace files, no tokenizer).

- :class:`ChatWorkload` — fixed ISL/OSL chat requests, optionally sharing a prefix (closed loop, one request per
  session) — the shape of a fixed-sequence-length sweep.
- :class:`AgentWorkload` — AgentX-like sessions: a shared system prefix, turns that append an answer and a tool
  result to a growing history, think times, and subagents spawned and joined (fresh contexts sharing the system
  prompt) — the shape that exercises the prefix cache, KV pressure and lane recycling.

Text is built from two-syllable words, one token each under the built-in word tokenizer, so lengths are exact.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from llmsweep.workload.base import Join, LaneProgram, RequestIdentity, RequestSpec, Send, Sleep, Spawn, Workload

_SYL = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]
_WORDS = [a + b for a in _SYL for b in _SYL]


_POOL: list[str] = random.Random(0x51A).choices(_WORDS, k=1 << 18)


def words_text(rng: random.Random, n: int) -> str:
    """`n` one-token words: a seeded slice of a fixed word pool (cheap, so benchmarks time the simulator)."""
    out: list[str] = []
    while n > 0:
        take = min(n, len(_POOL) // 2)
        start = rng.randrange(len(_POOL) - take)
        out.append(" ".join(_POOL[start:start + take]))
        n -= take
    return " ".join(out)


class ChatWorkload(Workload):
    """Each session is one chat request of `isl` tokens (template included) asking for `osl` tokens."""

    name = "sim-chat"

    def __init__(self, *, isl: int = 1024, osl: int = 128, shared_prefix: int = 0, seed: int = 0,
                 requests: int | None = None) -> None:
        self.isl, self.osl, self.seed = isl, osl, seed
        self.requests = requests
        self._count = 0
        self._prefix = words_text(random.Random(seed ^ 0xABC), shared_prefix) if shared_prefix else ""
        self._shared = shared_prefix

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        while self.requests is None or self._count < self.requests:
            index = self._count
            self._count += 1
            yield self._program(lane, index)

    def _program(self, lane: int, index: int) -> LaneProgram:
        rng = random.Random(self.seed * 1_000_003 + index)
        body = max(1, self.isl - 5 - self._shared)  # ChatML adds 3 per message + 2 for the generation prompt
        content = (self._prefix + " " if self._prefix else "") + words_text(rng, body)
        spec = RequestSpec(api="chat", max_tokens=self.osl, messages=({"role": "user", "content": content},),
                           input_tokens=self.isl, theoretical_cached_tokens=self._shared if index else 0,
                           identity=RequestIdentity(lane=lane, request_index=index, session=f"s{index}"))
        yield Send(spec)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "isl": self.isl, "osl": self.osl, "shared_prefix": self._shared}


class AgentWorkload(Workload):
    """AgentX-shaped sessions with growing context (see the module doc); deterministic for a seed."""

    name = "sim-agent"

    def __init__(self, *, system_tokens: int = 4000, turns: int = 20, tool_tokens: int = 1500, osl: int = 400,
                 think_s: float = 2.0, subagent_every: int = 6, subagents: int = 2, subagent_turns: int = 3,
                 seed: int = 0) -> None:
        self.system_tokens, self.turns, self.tool_tokens, self.osl = system_tokens, turns, tool_tokens, osl
        self.think_s, self.subagent_every, self.subagents, self.subagent_turns = (
            think_s, subagent_every, subagents, subagent_turns)
        self.seed = seed
        self._system = {"role": "system", "content": words_text(random.Random(seed), system_tokens)}
        self._sessions = 0
        self._any_sent = False

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        while True:
            index = self._sessions
            self._sessions += 1
            yield self._root(lane, index)

    def _identity(self, lane: int, session: int, node: str, turn: int) -> RequestIdentity:
        return RequestIdentity(trace=f"agent-{session}", lane=lane, turn=turn, session=f"s{session}", node=node)

    def _conversation(self, rng: random.Random, lane: int, session: int, node: str, turns: int,
                      history: list[dict[str, Any]], spawn: bool) -> LaneProgram:
        total = sum(len(m["content"].split()) + 3 for m in history)
        # an infinite cache already holds the shared system prompt once any request carried it
        seen = total if self._any_sent else 0
        self._any_sent = True
        for turn in range(turns):
            content = f"[rid:{session:06x}{node}] " * (turn == 0) + words_text(rng, self.tool_tokens)
            history.append({"role": "user", "content": content})
            total += self.tool_tokens + (turn == 0) + 3
            messages = tuple(history)
            osl = max(1, int(rng.lognormvariate(0, 0.5) * self.osl))
            spec = RequestSpec(api="chat", max_tokens=osl, messages=messages, input_tokens=total + 2,
                               theoretical_cached_tokens=seen, identity=self._identity(lane, session, node, turn))
            yield Send(spec)
            seen = total + 2
            history.append({"role": "assistant", "content": words_text(rng, osl)})
            total += osl + 3
            if spawn and self.subagent_every and turn % self.subagent_every == self.subagent_every - 1:
                handles = []
                for k in range(self.subagents):
                    sub_rng = random.Random(rng.random())
                    child = self._conversation(sub_rng, lane, session, f"sa{turn}-{k}", self.subagent_turns,
                                               [self._system], False)
                    handles.append((yield Spawn(child)))
                yield Join(tuple(handles))
            yield Sleep(rng.expovariate(1.0 / self.think_s) if self.think_s else 0.0)

    def _root(self, lane: int, session: int) -> LaneProgram:
        rng = random.Random(self.seed * 7_919 + session)
        yield from self._conversation(rng, lane, session, "", self.turns, [self._system], True)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "system_tokens": self.system_tokens, "turns": self.turns,
                "tool_tokens": self.tool_tokens, "osl": self.osl}
