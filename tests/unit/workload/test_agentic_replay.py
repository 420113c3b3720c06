from __future__ import annotations

from pathlib import Path

import pytest
from _workload_vclock import Dispatch, Run, run_virtual

from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.base import RequestOutcome, RequestSpec, Send
from llmsweep.workload.tokenizer import count_tokens, load_hf_tokenizer
from llmsweep.workload.traces.loader import load_traces
from llmsweep.workload.traces.synth import SynthProfile, synthesize


@pytest.fixture(scope="module")
def handbuilt(traces_dir: Path) -> str:
    return str(traces_dir / "handbuilt.jsonl")


def _cold(source: str, **kw: object) -> AgenticWorkload:
    """Replay without warm start: lane 0 always plays tree-a, lane 1 tree-b (sequential order, stride 2)."""
    cfg = AgenticConfig(source=source, sampler="sequential", concurrency=2, warm_start=False, run_id="run-1", **kw)
    return AgenticWorkload(cfg)


def _where(d: Dispatch) -> tuple[float, str, int]:
    return (d.at, d.spec.identity.node, d.spec.identity.turn)


def _lane(run: Run, lane: int, session: str | None = None) -> list[Dispatch]:
    return [d for d in run.dispatches if d.lane == lane and (session is None or d.spec.identity.session == session)]


def test_dispatch_order_and_offsets_follow_the_recording(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=2, duration=320.0, latency=1.0)
    first = _lane(run, 0, "tree-a/lane0/play0")
    assert [_where(d) for d in first] == [
        (0.0, "", 0),
        (3.0, "", 1),  # 2.0 s end-to-start after m0 ends at 1.0
        (4.2, "explore_002", 0),  # children start at their recorded offsets from m1's end (4.0)
        (4.5, "general_purpose_001", 0),
        (6.0, "general_purpose_001", 1),  # inner delay 0.5 s after 5.5
        (8.0, "", 2),  # joins both children (last ends 7.0), then its 1.0 s delay
        (309.0, "", 3),  # recorded 500 s pause capped at 300 s
        (310.5, "background_003", 0),  # spawned after the last root turn: background
        (313.5, "background_003", 1),
    ]


def test_lane_recycles_only_after_the_whole_tree_drains(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=2, duration=320.0, latency=1.0)
    spans = [s for s in run.sessions if s.lane == 0]
    assert spans[0].root_end == pytest.approx(310.0)
    assert spans[0].drained == pytest.approx(314.5)  # the background child outlives its root by 4.5 s
    assert spans[1].start == pytest.approx(314.5)
    assert spans[1].session == "tree-a/lane0/play1"
    assert run.max_live_trees == 2


def test_in_flight_exceeds_concurrency_during_fan_out(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=1, duration=320.0, latency=1.0)
    assert run.max_live_trees == 1
    assert run.max_in_flight == 2
    assert {d.spec.identity.node for d in run.dispatches if d.in_flight == 2} == {"general_purpose_001"}


def test_idle_gap_cap_is_configurable_and_can_be_off(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt, trace_idle_gap_cap_s=None), lanes=1, duration=600.0, latency=1.0)
    m3 = next(d for d in run.dispatches if d.spec.identity.turn == 3 and d.spec.identity.node == "")
    assert m3.at == pytest.approx(509.0)


def test_theoretical_cached_tokens_count_prefix_sent_earlier_in_the_play(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=2, duration=12.0, latency=1.0)
    cached = {(d.spec.identity.node, d.spec.identity.turn): d.spec.theoretical_cached_tokens for d in _lane(run, 0)}
    assert cached[("", 0)] == 0
    assert cached[("", 1)] == 128  # blocks 0 1 sent by m0
    assert cached[("explore_002", 0)] == 64  # shares only block 0 with the root
    assert cached[("general_purpose_001", 1)] == 128
    b = [d.spec for d in _lane(run, 1, "tree-b/lane1/play1")]
    assert [s.theoretical_cached_tokens for s in b] == [0, 192, 64]  # a new play starts with an empty cache


def test_identity_and_request_fields(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=2, duration=10.0, latency=1.0)
    spec = run.dispatches[0].spec
    assert spec.api == "chat" and spec.ignore_eos and spec.max_tokens == 64 and spec.input_tokens == 128
    ident = spec.identity
    assert (ident.trace, ident.lane, ident.turn, ident.phase, ident.node) == ("tree-a", 0, 0, "profiling", "")
    child = next(d.spec for d in run.dispatches if d.spec.identity.node == "explore_002")
    assert child.identity.session == ident.session and child.max_tokens == 8


def _messages_of(run: Run, lane: int) -> dict[tuple[str, int, str], tuple[dict, ...] | None]:
    return {(d.spec.identity.node, d.spec.identity.turn, d.spec.identity.session): d.spec.messages for d in
            _lane(run, lane)}


def test_block_text_is_deterministic_and_each_play_has_its_own_marker(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=2, duration=20.0, latency=1.0)
    b0 = [d.spec for d in _lane(run, 1, "tree-b/lane1/play0")]
    b1 = [d.spec for d in _lane(run, 1, "tree-b/lane1/play1")]
    first0 = b0[0].messages[0]["content"]  # type: ignore[index]
    first1 = b1[0].messages[0]["content"]  # type: ignore[index]
    marker0, body0 = first0.split("\n\n", 1)
    marker1, body1 = first1.split("\n\n", 1)
    assert marker0.startswith("[rid:") and marker0 != marker1
    assert body0 == body1  # same hash ids → same text, play after play
    # Turn 1 repeats turn 0's whole prompt as its prefix: the server's prefix cache sees the recorded reuse.
    assert b0[1].messages[0]["content"] == first0  # type: ignore[index]
    # Same config in another process → same text; another run id → another marker.
    again = run_virtual(_cold(handbuilt), lanes=2, duration=20.0, latency=1.0)
    assert _lane(again, 1)[0].spec.messages == b0[0].messages
    other = run_virtual(
        AgenticWorkload(AgenticConfig(source=handbuilt, sampler="sequential", concurrency=2, warm_start=False,
                                      run_id="run-2")), lanes=2, duration=20.0, latency=1.0)
    other_marker, other_body = _lane(other, 1)[0].spec.messages[0]["content"].split("\n\n", 1)  # type: ignore[index]
    assert other_body == body0 and other_marker != marker0


def test_subagents_share_block_text_with_their_root(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=1, duration=12.0, latency=1.0)
    root = run.dispatches[0].spec.messages[0]["content"]  # type: ignore[index]
    child = next(d.spec for d in run.dispatches if d.spec.identity.node == "explore_002")
    child_text = child.messages[0]["content"]  # type: ignore[index]
    block0 = 1 + 64  # marker word + block 0
    assert child_text.split(" ")[:block0] == root.split(" ")[:block0]
    assert child_text.split(" ")[block0] != root.split(" ")[block0]


def test_prompts_are_exactly_the_trace_lengths_with_builtin_tokenizer(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=1, duration=320.0, latency=1.0)
    for d in run.dispatches:
        contents = [m["content"] for m in d.spec.messages]  # type: ignore[union-attr]
        assert sum(count_tokens(c) for c in contents) - 1 == d.spec.input_tokens  # minus the one-word marker


def test_a_hash_list_longer_than_the_turns_tokens_is_laid_out_only_as_far_as_they_reach(tmp_path: Path) -> None:
    """A turn of `in: 200` recording ten 64-token blocks became a 641-word prompt (every block laid out whole); its
    prompt is the 200 tokens the trace says, and only the blocks they span count as theoretically cached."""
    import json

    trace = {"id": "long-ids", "requests": [
        {"t": 0.0, "in": 200, "out": 4, "hash_ids": list(range(10))},
        {"t": 5.0, "in": 64, "out": 4, "hash_ids": list(range(10, 14))},
        {"t": 10.0, "in": 256, "out": 4, "hash_ids": [0, 1, 2, 3, 20, 21]},
    ]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(trace) + "\n")
    run = run_virtual(_cold(str(path)), lanes=1, duration=30.0, latency=0.5)
    sent = [d for d in run.dispatches if d.spec.identity.trace == "long-ids"]
    assert [d.spec.input_tokens for d in sent[:3]] == [200, 64, 256]
    for d in sent[:3]:
        contents = [m["content"] for m in d.spec.messages]  # type: ignore[union-attr]
        assert sum(count_tokens(c) for c in contents) - 1 == d.spec.input_tokens  # minus the one-word marker
    assert sent[2].spec.theoretical_cached_tokens == 4 * 64  # blocks 0-3 were sent by the first turn (its 4 blocks)


def _shape_tokens(spec: RequestSpec) -> int:
    """The content tokens of a request's shape (what the simulator counts): a word is one, a block run its sizes."""
    assert spec.shape is not None
    return sum(1 if isinstance(run, str) else run.size * (len(run.ids) - 1) + run.last
               for m in spec.shape for run in m.runs())


def test_a_partial_last_block_is_whole_once_a_later_turn_extends_or_resends_it(tmp_path: Path) -> None:
    """`in` need not be a multiple of the block size (AgentX's proxy counts a partial trailing block). The turn after
    one that ended in a partial block kept that block partial in its history: 28 tokens short of its `in` here, and
    short again on every later turn; a resend of the same blocks with another `in` was sent at the old length."""
    import json

    trace = {"id": "partial", "requests": [
        {"t": 0.0, "in": 100, "out": 4, "hash_ids": [0, 1]},          # block 1 holds 36 tokens
        {"t": 5.0, "in": 300, "out": 4, "hash_ids": [0, 1, 2, 3, 4]},  # block 1 whole, block 4 holds 44
        {"t": 10.0, "in": 310, "out": 4, "hash_ids": [0, 1, 2, 3, 4]},  # the same blocks, block 4 holds 54
        {"t": 15.0, "in": 290, "out": 4, "hash_ids": [0, 1, 2, 3, 4]},  # and 34
        {"t": 20.0, "in": 400, "out": 4, "hash_ids": [0, 1, 2, 3, 4, 5, 6]},
    ]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(trace) + "\n")
    run = run_virtual(_cold(str(path)), lanes=1, duration=40.0, latency=0.5)
    sent = [d.spec for d in run.dispatches if d.spec.identity.trace == "partial"][:5]
    assert [s.input_tokens for s in sent] == [100, 300, 310, 290, 400]
    for spec in sent:
        contents = [m["content"] for m in spec.messages]  # type: ignore[union-attr]
        assert sum(count_tokens(c) for c in contents) - 1 == spec.input_tokens  # minus the one-word marker
        assert _shape_tokens(spec) - 1 == spec.input_tokens
    # the history is still a prefix of the next prompt, word for word (a partial block is its whole block's prefix)
    first = sent[0].messages[0]["content"].split()  # type: ignore[index]
    assert sent[1].messages[0]["content"].split()[:len(first)] == first  # type: ignore[index]


def test_a_prefix_cut_back_to_an_answer_cuts_the_answers_last_block_to_the_turns_in(tmp_path: Path) -> None:
    """A turn whose blocks are a prefix of the turn before's, ending where a recorded answer ends (a rewind), with a
    partial last block: the kept answer was sent whole, 42 tokens past the turn's `in` here."""
    import json

    trace = {"id": "rewind", "requests": [
        {"t": 0.0, "in": 128, "out": 64, "hash_ids": [0, 1]},
        {"t": 5.0, "in": 256, "out": 4, "hash_ids": [0, 1, 2, 3]},  # block 2 is the answer to turn 0
        {"t": 10.0, "in": 150, "out": 4, "hash_ids": [0, 1, 2]},   # back to the answer, its block holding 22
        {"t": 15.0, "in": 256, "out": 4, "hash_ids": [0, 1, 2, 5]},
    ]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(trace) + "\n")
    run = run_virtual(_cold(str(path)), lanes=1, duration=40.0, latency=0.5)
    sent = [d.spec for d in run.dispatches if d.spec.identity.trace == "rewind"][:4]
    assert [s.input_tokens for s in sent] == [128, 256, 150, 256]
    assert [m["role"] for m in sent[2].messages] == ["user", "assistant", "user"]  # type: ignore[union-attr]
    for spec in sent:
        contents = [m["content"] for m in spec.messages]  # type: ignore[union-attr]
        assert sum(count_tokens(c) for c in contents) - 1 == spec.input_tokens  # minus the one-word marker
        assert _shape_tokens(spec) - 1 == spec.input_tokens


def test_history_alternates_recorded_assistant_turns(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=1, duration=12.0, latency=1.0)
    m2 = next(d.spec for d in run.dispatches if d.spec.identity.node == "" and d.spec.identity.turn == 2)
    roles = [m["role"] for m in m2.messages]  # type: ignore[union-attr]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    # The assistant turn holds the recorded answer's blocks: out=64 → one block of 64 tokens.
    assert count_tokens(m2.messages[1]["content"]) == 64  # type: ignore[index]


def test_prefix_cut_keeps_the_shared_messages(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=2, duration=4.0, latency=1.0)
    b = [d.spec for d in _lane(run, 1, "tree-b/lane1/play0")]
    # tree-b turn 2 keeps only block 0 of the history: one user message with everything, same opening text.
    assert len(b[2].messages) == 1  # type: ignore[arg-type]
    opening = b[0].messages[0]["content"].split(" ")[:65]  # type: ignore[index]
    assert b[2].messages[0]["content"].split(" ")[:65] == opening  # type: ignore[index]


def test_live_assistant_mode_threads_server_answers(handbuilt: str) -> None:
    def answer(spec: RequestSpec) -> RequestOutcome:
        return RequestOutcome(ok=True, output_text=f" answer-{spec.identity.turn}", output_tokens=1)

    run = run_virtual(_cold(handbuilt, live_assistant_responses=True), lanes=1, duration=4.0, latency=1.0,
                      outcome=answer)
    m1 = run.dispatches[1].spec
    assert m1.messages[1] == {"role": "assistant", "content": " answer-0"}  # type: ignore[index]


def test_prompt_text_is_not_built_for_interpreters_that_never_read_it(handbuilt: str) -> None:
    run = run_virtual(_cold(handbuilt), lanes=2, duration=100.0, latency=1.0)
    assert not any(d.spec.prompt_built for d in run.dispatches)


# -- warm start ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_corpus() -> list:
    return synthesize(SynthProfile(traces=6, seed=3, max_isl=16384))


def test_warm_start_primes_at_t_star_then_one_token_warmups(small_corpus: list) -> None:
    cfg = AgenticConfig(concurrency=3, warmup_requests_per_lane=2, run_id="w", seed=5)
    workload = AgenticWorkload(cfg, traces=small_corpus)
    run = run_virtual(workload, lanes=3, duration=200.0, latency=1.0)
    for lane in range(3):
        dispatches = _lane(run, lane)
        session = dispatches[0].spec.identity.session
        mine = [d for d in dispatches if d.spec.identity.session == session and d.spec.identity.node == ""]
        primer, w1, w2, prof = mine[:4]
        trace = next(t for t in small_corpus if t.id == primer.spec.identity.trace)
        turns = len(trace.main_requests)
        start = primer.spec.identity.turn + 1
        times = [r.t for r in trace.main_requests]
        lo = times[0] + 0.25 * (times[-1] - times[0])
        hi = times[0] + 0.75 * (times[-1] - times[0])
        assert lo <= times[start] or start == 1
        assert times[start - 1] <= hi or start == turns - 3
        assert [d.spec.identity.phase for d in mine[:3]] == ["warmup"] * 3
        assert all(d.spec.max_tokens == 1 for d in mine[:3])
        assert primer.spec.theoretical_cached_tokens == 0  # the primer carries the full prefix, fresh
        assert primer.spec.input_tokens == trace.main_requests[start - 1].in_tokens
        assert [w1.spec.identity.turn, w2.spec.identity.turn, prof.spec.identity.turn] == [start, start + 1, start + 2]
        assert w1.at == primer.at + 1.0 and w2.at == w1.at + 1.0  # no idle delay between warm-up requests
        assert prof.spec.identity.phase == "profiling" and prof.spec.identity.node == ""
        later = [d for d in dispatches if d.spec.identity.session != session]
        assert all(d.spec.identity.phase == "profiling" for d in later)
        if later:
            assert later[0].spec.identity.turn == 0  # recycled plays start from the beginning


def test_profiling_starts_only_once_every_lanes_warm_up_has_drained(small_corpus: list) -> None:
    # lane 0's primer takes 40 s (a long prefill), every other request 1 s: lanes 1 and 2 are done warming up at 3 s
    cfg = AgenticConfig(concurrency=3, warmup_requests_per_lane=2, run_id="d", seed=5, trace_idle_gap_cap_s=5.0)
    workload = AgenticWorkload(cfg, traces=small_corpus)
    assert workload.warmup_drain_s == cfg.warmup_grace_s

    def latency(spec: RequestSpec) -> float:
        ident = spec.identity
        return 40.0 if ident.lane == 0 and ident.phase == "warmup" and ident.request_index == 0 else 1.0

    run = run_virtual(workload, lanes=3, duration=300.0, latency=latency)
    warm = [d for d in run.dispatches if d.spec.identity.phase == "warmup"]
    prof = [d for d in run.dispatches if d.spec.identity.phase == "profiling"]
    assert run.released == max(d.at + latency(d.spec) for d in warm) == 42.0
    assert min(d.at for d in prof) >= run.released
    plans = {t.id: workload.plan(i) for i, t in enumerate(workload.traces)}
    for lane in range(3):
        first = next(d for d in prof if d.lane == lane and d.spec.identity.node == "")
        turn = plans[first.spec.identity.trace].root.turns[first.spec.identity.turn]
        # the recorded delay before the first profiling turn runs from the release (AgentX: residual delays kept)
        # (or it waits for a subagent: its own, or one whose joining turn the warm-up replayed)
        assert first.at == pytest.approx(run.released + min(turn.delay, 5.0)) or turn.joins or any(
            c.joined_at is not None and first.spec.identity.turn - 2 <= c.joined_at < first.spec.identity.turn
            for c in plans[first.spec.identity.trace].children)


def test_without_warm_start_there_is_no_drain(handbuilt: str) -> None:
    workload = _cold(handbuilt)
    assert workload.warmup_drain_s is None
    assert run_virtual(workload, lanes=2, duration=50.0, latency=1.0).released is None


def test_each_lane_starts_on_a_different_trace(small_corpus: list) -> None:
    workload = AgenticWorkload(AgenticConfig(concurrency=4, warmup_requests_per_lane=1, run_id="x"),
                               traces=small_corpus)
    sends = [next(iter(workload.sessions(lane))).send(None) for lane in range(4)]
    assert all(isinstance(s, Send) for s in sends)
    firsts = {s.spec.identity.trace for s in sends if isinstance(s, Send)}
    assert len(firsts) == 4


def test_bpe_blocks_are_exactly_their_token_size(handbuilt: str, bpe_tokenizer_dir: Path) -> None:
    tok = load_hf_tokenizer(bpe_tokenizer_dir)
    workload = AgenticWorkload(
        AgenticConfig(source=handbuilt, sampler="sequential", concurrency=2, warm_start=False, run_id="b"),
        tokenizer=tok,
    )
    run = run_virtual(workload, lanes=1, duration=320.0, latency=1.0)
    for d in run.dispatches:
        messages = d.spec.messages
        assert messages is not None
        marker = len(tok.encode(messages[0]["content"].split("\n\n")[0] + "\n\n"))
        lengths = sum(len(tok.encode(m["content"])) for m in messages)
        assert lengths - marker == d.spec.input_tokens


def test_loader_round_trips_the_handbuilt_traces(handbuilt: str) -> None:
    traces = load_traces(handbuilt)
    assert [t.id for t in traces] == ["tree-a", "tree-b"]
    assert len(traces[0].subagents) == 3 and len(traces[0].main_requests) == 4


def test_a_single_lane_recycles_through_the_corpus(handbuilt: str) -> None:
    cfg = AgenticConfig(source=handbuilt, sampler="sequential", concurrency=1, warm_start=False, run_id="c")
    run = run_virtual(AgenticWorkload(cfg), lanes=1, duration=330.0, latency=1.0)
    assert [s.session for s in run.sessions[:3]] == ["tree-a/lane0/play0", "tree-b/lane0/play1", "tree-a/lane0/play2"]
    assert run.sessions[1].start == run.sessions[0].drained


def test_traces_without_top_level_requests_are_skipped_not_spun_on() -> None:
    from llmsweep.errors import DatasetError
    from llmsweep.workload.traces.schema import Trace

    only_sub = Trace.model_validate({"id": "s", "requests": [
        {"type": "subagent", "t": 0, "agent_id": "a", "requests": [{"t": 0, "in": 64, "out": 1, "hash_ids": [0]}]}]})
    with pytest.raises(DatasetError, match="top-level request"):
        AgenticWorkload(AgenticConfig(run_id="e"), traces=[only_sub])


@pytest.mark.parametrize("sampler", ["sequential", "shuffle"])
def test_a_skipped_trace_leaves_every_lane_a_playable_one(small_corpus: list, sampler: str) -> None:
    from llmsweep.workload.traces.schema import Trace

    only_sub = Trace.model_validate({"id": "s", "requests": [
        {"type": "subagent", "t": 0, "agent_id": "a", "requests": [{"t": 0, "in": 64, "out": 1, "hash_ids": [0]}]}]})
    traces = [only_sub, *small_corpus[:2]]
    workload = AgenticWorkload(AgenticConfig(concurrency=3, sampler=sampler, warm_start=False, run_id="k"),
                               traces=traces)
    played = set()
    for lane in range(3):
        sessions = iter(workload.sessions(lane))
        for _ in range(2):
            send = next(sessions).send(None)
            assert isinstance(send, Send)
            played.add(send.spec.identity.trace)
    assert played == {t.id for t in small_corpus[:2]}


def test_warm_start_primes_subagents_live_at_t_star(handbuilt: str) -> None:
    # tree-a's timeline spans 0..509 s; ratio 0.0098 puts t* at ~4.99 s: m1 is the primer, explore_002 (4.2-5.2)
    # and general_purpose_001 (4.5-7.0) are live, each has begun one request.
    cfg = AgenticConfig(source=handbuilt, sampler="sequential", concurrency=2, run_id="t", warmup_requests_per_lane=0,
                        trajectory_start_min_ratio=0.0098, trajectory_start_max_ratio=0.0098)
    run = run_virtual(AgenticWorkload(cfg), lanes=1, duration=100.0, latency=1.0)
    got = [(d.at, d.spec.identity.node, d.spec.identity.turn, d.spec.identity.phase) for d in run.dispatches]
    assert got[:5] == [
        (0.0, "", 1, "warmup"),  # root primer: the turn before t*, full prefix
        (1.0, "explore_002", 0, "warmup"),  # one primer per live subagent stream
        (1.0, "general_purpose_001", 0, "warmup"),
        (2.5, "general_purpose_001", 1, "profiling"),  # continues with its recorded 0.5 s delay
        (4.5, "", 2, "profiling"),  # the root's next turn joins both, then waits its 1.0 s
    ]
    primed = run.dispatches[2].spec
    assert primed.max_tokens == 1 and primed.theoretical_cached_tokens == 64  # block 0 came with the root primer


def test_subagents_the_warm_up_turns_spawned_are_replayed_from_the_snapshot(handbuilt: str) -> None:
    # t* at ~1.5 s: m0 is the primer, m1 the one warm-up turn; m1 spawns explore_002 (4.2-5.2 s) and
    # general_purpose_001 (4.5-7.0 s), neither begun at m1's recorded end (4.0 s): both wait their remaining offset
    # from the release, and the root's next turn joins them, as recorded. They used to be dropped from the first play.
    cfg = AgenticConfig(source=handbuilt, sampler="sequential", concurrency=2, run_id="w", warmup_requests_per_lane=1,
                        trajectory_start_min_ratio=0.003, trajectory_start_max_ratio=0.003)
    run = run_virtual(AgenticWorkload(cfg), lanes=1, duration=100.0, latency=1.0)
    got = [(d.at, d.spec.identity.node, d.spec.identity.turn, d.spec.identity.phase) for d in run.dispatches]
    assert run.released == 2.0
    assert got[:6] == [
        (0.0, "", 0, "warmup"),  # primer
        (1.0, "", 1, "warmup"),  # the warm-up turn that spawns both
        (2.2, "explore_002", 0, "profiling"),  # 0.2 s after m1's end, counted from the release
        (2.5, "general_purpose_001", 0, "profiling"),
        (4.0, "general_purpose_001", 1, "profiling"),  # its recorded 0.5 s delay
        (6.0, "", 2, "profiling"),  # m2 joins both, then waits its 1.0 s
    ]


def test_the_per_tree_idle_cap_shifts_an_idle_trees_timers_together_and_spares_a_busy_tree() -> None:
    """The tests' virtual clock applies AgentX's per-tree cap as the client and the predictor do."""
    from support.workloads import PausingTree

    idle = run_virtual(PausingTree(pause_s=699.0, cap_s=300.0, child=False), lanes=1, duration=3000.0, latency=1.0)
    busy = run_virtual(PausingTree(pause_s=699.0, cap_s=300.0, child=True), lanes=1, duration=3000.0, latency=1.0)
    for run, gap in ((idle, 300.0), (busy, 699.0)):
        root = [d.at for d in run.dispatches if d.spec.identity.request_index in (0, 1)]
        assert root == [0.0, 1.0 + gap]


def test_agentic_delays_are_replayed_as_recorded_and_capped_per_tree(handbuilt: str) -> None:
    # tree-a's root pauses 500 s before its last turn, after its subagents have ended: an idle tree, cut to the cap
    for cap, gap in ((300.0, 300.0), (None, 500.0)):
        run = run_virtual(_cold(handbuilt, trace_idle_gap_cap_s=cap), lanes=1, duration=1000.0, latency=1.0)
        root = [d for d in run.dispatches if d.spec.identity.node == "" and d.spec.identity.session.endswith("play0")]
        assert root[3].at - (root[2].at + 1.0) == gap
