"""Audit of the agentic replay against AgentX (research/agentx-spec), on lane programs run in virtual time."""

from __future__ import annotations

from typing import Any

import pytest
from _workload_vclock import Run, run_virtual

from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.traces.schema import Trace


def _req(t: float, ids: list[int], api: float = 1.0, out: int = 8) -> dict[str, Any]:
    return {"type": "s", "t": t, "in": 64 * len(ids), "out": out, "hash_ids": ids, "api_time": api}


def _sub(agent_id: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {"type": "subagent", "t": requests[0]["t"], "agent_id": agent_id, "requests": list(requests)}


def _times(run: Run, node: str, play: int = 0) -> list[float]:
    """Dispatch times of one stream of lane 0's `play`-th session."""
    return [d.at for d in run.dispatches
            if d.spec.identity.node == node and d.spec.identity.session.endswith(f"/lane0/play{play}")]


# m0, then a subagent spawned by m0 that was still running when m1 started (recorded), then m1 and m2.
_INTERLEAVED = Trace.model_validate({"id": "interleaved", "requests": [
    _req(0.0, [0, 1]),
    _sub("sa", _req(1.5, [0, 10]), _req(3.0, [0, 10, 11])),
    _req(2.0, [0, 1, 2]),
    _req(5.0, [0, 1, 2, 3]),
]})


def _cold(trace: Trace, **kw: Any) -> AgenticWorkload:
    cfg = AgenticConfig(source="x", concurrency=1, warm_start=False, run_id="r", sampler="sequential", **kw)
    return AgenticWorkload(cfg, traces=[trace])


def test_a_subagent_with_a_following_parent_turn_is_joined_by_it() -> None:
    """Spec §2.8 (AIPerf's Weka loader): each subagent becomes a child spawned on the parent's preceding turn with a
    SPAWN_JOIN prerequisite on the parent's following turn; only a subagent with no following parent turn runs in
    the background (the parent does not wait). So m1 waits for the subagent even though the recording shows m1
    starting while the subagent still ran; the replay used to let m1 go (a "background" refinement of its own),
    replaying more concurrency than AgentX does."""
    run = run_virtual(_cold(_INTERLEAVED), lanes=1, duration=50.0, latency=1.0)
    assert _times(run, "sa") == pytest.approx([1.5, 3.0])  # spawned at m0's end (1.0) + recorded 0.5 s offset
    # m1 waits for the child's end (4.0); its recorded start lies before that, so no further delay
    assert _times(run, "") == pytest.approx([0.0, 4.0, 7.0])  # m2: 2.0 s end-to-start after m1 ends at 5.0
    assert run.max_in_flight == 1  # the root never runs beside the subagent it waits for


def test_the_recorded_join_policy_keeps_the_interleaved_subagent_in_the_background() -> None:
    """The opt-out `join_policy="recorded"`: a parent turn waits only for children the recording shows it waited
    for, so m1 goes 1.0 s after m0 ends as recorded, beside the subagent."""
    run = run_virtual(_cold(_INTERLEAVED, join_policy="recorded"), lanes=1, duration=50.0, latency=1.0)
    assert _times(run, "")[:2] == pytest.approx([0.0, 2.0])
    assert run.max_in_flight == 2

