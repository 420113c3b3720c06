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


# m0, then a subagent spawned by m0 (1.5–4.0 s) still running when m1 started (2.0 s); m2 started after it ended.
_INTERLEAVED = Trace.model_validate({"id": "interleaved", "requests": [
    _req(0.0, [0, 1]),
    _sub("sa", _req(1.5, [0, 10]), _req(3.0, [0, 10, 11])),
    _req(2.0, [0, 1, 2]),
    _req(5.0, [0, 1, 2, 3]),
]})


def _slow_subagent(spec: Any) -> float:
    """The server takes 3 s for the subagent's requests (recorded: 1 s) and 1 s for the root's."""
    return 3.0 if spec.identity.node else 1.0


def _cold(trace: Trace, **kw: Any) -> AgenticWorkload:
    cfg = AgenticConfig(source="x", concurrency=1, warm_start=False, run_id="r", sampler="sequential", **kw)
    return AgenticWorkload(cfg, traces=[trace])


def test_a_subagent_still_running_at_the_next_parent_turn_is_joined_by_a_later_one() -> None:
    """AgentX's loader (AIPerf `weka_trace.py`, "tiered joins"; the spec's §2.8 paraphrase says only "the parent's
    following turn"): a subagent is joined by the first later parent turn whose recorded start is at or after the
    subagent's recorded end, and runs in the background only when no later parent turn reaches its end. Here m1
    (2.0 s) started while the subagent ran, m2 (5.0 s) after it ended: m2 waits for it. With the server slower on
    the subagent than recorded, m2 used to go on its own 2 s delay after m1 (5.0 s) while the subagent still ran —
    the plan made any child not done by the following turn a background child for good."""
    run = run_virtual(_cold(_INTERLEAVED), lanes=1, duration=50.0, latency=_slow_subagent)
    assert _times(run, "sa") == pytest.approx([1.5, 5.0])  # spawned at m0's end + 0.5 s; 0.5 s end-to-start
    # m1 goes 1.0 s after m0 as recorded, beside the subagent; m2 waits for its end (8.0) + the recorded 1.0 s
    assert _times(run, "") == pytest.approx([0.0, 2.0, 9.0])


def test_the_recorded_join_policy_keeps_the_earlier_rule() -> None:
    """The opt-out `join_policy="recorded"`: only the following parent turn may join a child, when the child had
    ended before it started; otherwise the child runs in the background."""
    run = run_virtual(_cold(_INTERLEAVED, join_policy="recorded"), lanes=1, duration=50.0, latency=_slow_subagent)
    assert _times(run, "") == pytest.approx([0.0, 2.0, 5.0])


def test_the_first_profiling_turn_waits_for_a_primed_child_whose_join_the_warm_up_went_past() -> None:
    """Spec §5.3.3–4: lanes with subagents live at t* prime them, the warm-up advances the lane by N one-token
    requests, and profiling starts from a snapshot of each live root/subagent/*pending join*. Here t* = 41 s falls
    after m4 (the primer) while m4's subagent (42–59 s) still runs, and m5 — which waited for it — is a warm-up
    turn. The root must not run past that join: its first profiling turn (m7) waits for the subagent to end and
    then its own recorded 9 s delay. It used to go at its delay after the warm-up, beside the subagent's remaining
    requests, a parallelism the recording never had."""
    times = [0.0, 10.0, 20.0, 30.0, 40.0, 65.0, 75.0, 85.0, 95.0, 105.0, 115.0, 125.0]
    requests: list[dict[str, Any]] = []
    for k, t in enumerate(times):
        requests.append(_req(t, list(range(k + 1))))
        if k == 4:
            requests.append(_sub("sa", _req(42.0, [0, 50]), _req(50.0, [0, 50, 51]), _req(58.0, [0, 50, 51, 52])))
    trace = Trace.model_validate({"id": "warm", "requests": requests})
    ratio = 41.0 / 125.0
    cfg = AgenticConfig(source="x", concurrency=1, run_id="r", warmup_requests_per_lane=2,
                        trajectory_start_min_ratio=ratio, trajectory_start_max_ratio=ratio)
    run = run_virtual(AgenticWorkload(cfg, traces=[trace]), lanes=1, duration=40.0, latency=1.0)
    root = [(d.at, d.spec.identity.turn, d.spec.identity.phase) for d in run.dispatches if d.spec.identity.node == ""]
    assert root[:3] == [(0.0, 4, "warmup"), (1.0, 5, "warmup"), (2.0, 6, "warmup")]  # primer m4, warm-up m5 m6
    assert run.released == pytest.approx(3.0)
    # the subagent waits its remaining 1 s offset from t*, then its recorded 7 s end-to-start delays
    assert _times(run, "sa") == pytest.approx([4.0, 12.0, 20.0])
    assert root[3][:2] == (pytest.approx(30.0), 7)  # its end (21.0) + m7's recorded 9 s delay
    assert run.max_in_flight == 1


# m0, then a subagent whose three requests ran in parallel (all begin at 1.5 s, 10 s each), then m1.
_PARALLEL = Trace.model_validate({"id": "parallel", "requests": [
    _req(0.0, [0]),
    _sub("sa", _req(1.5, [0, 10], api=10.0), _req(1.5, [0, 20], api=10.0), _req(1.5, [0, 30], api=10.0)),
    _req(12.0, [0, 1]),
]})


def test_requests_that_ran_in_parallel_inside_a_subagent_are_replayed_in_parallel() -> None:
    """Spec §2.8: AIPerf's loader splits hidden parallel agents out of flat request streams (flattened-agent
    detection, nested inside subagents too); each split child dispatches at its recorded offset from the spawn and
    the join waits for all of them. A subagent's three recorded-parallel requests used to be sent one after another
    (30 s instead of 10 s, m1 at 32 s): replayed load was serialised wherever a corpus hides parallel agents in a
    subagent entry."""
    run = run_virtual(_cold(_PARALLEL), lanes=1, duration=30.0,
                      latency=lambda spec: 10.0 if spec.identity.node else 1.0)
    first = [d for d in run.dispatches if d.spec.identity.session.endswith("/lane0/play0")]
    subs = [(d.at, d.spec.identity.node) for d in first if d.spec.identity.node]
    assert subs == [(1.5, "sa"), (1.5, "sa::fa:001"), (1.5, "sa::fa:002")]
    assert run.max_in_flight == 3
    # m1 joins all three (they end at 11.5) and keeps its recorded 0.5 s after the subagent's end
    assert _times(run, "") == pytest.approx([0.0, 12.0])
    prompts = {d.spec.identity.node: d.spec.input_tokens for d in first if d.spec.identity.node}
    assert prompts == {"sa": 128, "sa::fa:001": 128, "sa::fa:002": 128}


def test_a_subagent_whose_requests_never_overlap_stays_one_stream() -> None:
    """A sequential subagent (each request starts after the previous ended) is one chain, replayed as before."""
    run = run_virtual(_cold(_INTERLEAVED), lanes=1, duration=50.0, latency=1.0)
    assert {d.spec.identity.node for d in run.dispatches} == {"", "sa"}


def test_split_parallel_requests_can_be_turned_off() -> None:
    """`split_parallel_requests=False` (AIPerf's kill switch for flattened-agent splitting): one stream, in order."""
    run = run_virtual(_cold(_PARALLEL, split_parallel_requests=False), lanes=1, duration=40.0,
                      latency=lambda spec: 10.0 if spec.identity.node else 1.0)
    assert [d.at for d in run.dispatches if d.spec.identity.node == "sa"][:3] == [1.5, 11.5, 21.5]


def test_agentx_branch_timing_spawns_at_once_and_sends_a_blocked_joining_turn_at_once() -> None:
    """AIPerf's agentic replay (0.13.0): a spawn batch's first child dispatches at its recorded offset from the
    batch's own start (branch_orchestrator `_child_dispatch_offset_ms`: 0 for the first child), i.e. as soon as the
    spawning turn ends; a parent whose next turn is gated by unfinished children is suspended when its turn ends,
    and `dispatch_join_turn` sends the gated turn the moment the last child ends, with no delay. With
    `branch_timing="agentx"` the subagent starts at m0's end (1.0 s, not 1.5 s) and m2 — blocked at m1's end
    (3.0 s) — goes when the subagent ends (7.5 s), not after the recorded 1.0 s that followed its end."""
    run = run_virtual(_cold(_INTERLEAVED, branch_timing="agentx"), lanes=1, duration=50.0, latency=_slow_subagent)
    assert _times(run, "sa") == pytest.approx([1.0, 4.5])
    assert _times(run, "") == pytest.approx([0.0, 2.0, 7.5])


def test_agentx_branch_timing_keeps_sibling_offsets_within_a_batch() -> None:
    """AIPerf: siblings of one spawn batch (same spawning and joining turn) dispatch at their recorded offsets from
    the batch's first child: the handbuilt-like batch explore (4.2 s) and general (4.5 s) after m1 (ends 4.0 s)
    go at 4.0 s and 4.3 s."""
    trace = Trace.model_validate({"id": "batch", "requests": [
        _req(0.0, [0]), _req(3.0, [0, 1]),
        _sub("explore", _req(4.2, [0, 20])), _sub("general", _req(4.5, [0, 10])),
        _req(8.0, [0, 1, 2]),
    ]})
    run = run_virtual(_cold(trace, branch_timing="agentx"), lanes=1, duration=20.0, latency=1.0)
    assert _times(run, "")[:2] == pytest.approx([0.0, 3.0])  # m1 2.0 s after m0 ends, as recorded
    assert _times(run, "explore") == pytest.approx([4.0])
    assert _times(run, "general") == pytest.approx([4.3])
    recorded = run_virtual(_cold(trace), lanes=1, duration=20.0, latency=1.0)
    assert (_times(recorded, "explore"), _times(recorded, "general")) == (pytest.approx([4.2]), pytest.approx([4.5]))
def test_agentx_join_timing_keeps_the_turns_own_delay_when_its_children_were_done() -> None:
    """AIPerf: a gated turn whose children all ended before the parent's previous turn did is not suspended; it
    keeps its end-to-start delay after that turn (recorded: m2 at 5.0 s, 2.0 s after m1's end at 3.0 s). With the
    subagent faster than recorded (0.2 s a request: done at 2.9 s), m2 goes 2.0 s after m1 ends (5.0 s); the
    recorded join timing counts its delay from the subagent's recorded end (4.0 s) instead: 1.0 s (4.0 s)."""
    def fast(spec: Any) -> float:
        return 0.2 if spec.identity.node else 1.0

    agentx = run_virtual(_cold(_INTERLEAVED, branch_timing="agentx"), lanes=1, duration=50.0, latency=fast)
    assert _times(agentx, "") == pytest.approx([0.0, 2.0, 5.0])
    recorded = run_virtual(_cold(_INTERLEAVED), lanes=1, duration=50.0, latency=fast)
    assert _times(recorded, "") == pytest.approx([0.0, 2.0, 4.0])
