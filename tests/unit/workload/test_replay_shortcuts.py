"""The agentic replay's shortcuts give what the plain definitions give: the common prefix of two id lists
(`common_prefix`, slice comparisons), a turn's prefix keys computed from the previous turn's (`extend_keys`,
`Conversation.keys`), a corpus read once per process while its files keep their bytes, trace plans and digests shared by
the workloads of one corpus, and the dropped-subagent count `describe` gives without building plans."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload, replay_corpus_digest
from llmsweep.workload.blocks import BlockText, PrefixCache, common_prefix, extend_keys, prefix_keys
from llmsweep.workload.conversation import Conversation
from llmsweep.workload.tokenizer import get_tokenizer
from llmsweep.workload.traces.loader import load_traces
from llmsweep.workload.traces.plan import build_plan
from llmsweep.workload.traces.schema import Trace
from llmsweep.workload.traces.synth import SynthProfile


def _element_by_element(a: list[int], b: list[int]) -> int:
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared


def _pairs(rng: random.Random, count: int) -> list[tuple[list[int], list[int]]]:
    """Id lists with every relation a turn has to the one before: extended, resent, cut back, unrelated, shorter,
    empty; ids up to 2^63 - 1 (the largest a trace may hold)."""
    pairs = []
    for _ in range(count):
        top = rng.choice([3, 1 << 20, (1 << 63) - 1])
        a = [rng.randint(0, top) for _ in range(rng.randint(0, 300))]
        b = a[: rng.randint(0, len(a))] + [rng.randint(0, top) for _ in range(rng.choice([0, 1, 5, 200]))]
        pairs.append((a, b) if rng.random() < 0.5 else (b, a))
    return pairs


def test_shared_prefix_is_the_common_leading_run() -> None:
    rng = random.Random(7)
    for a, b in _pairs(rng, 3000):
        assert common_prefix(a, b) == _element_by_element(a, b), (a, b)


def test_extend_keys_equals_prefix_keys_bit_for_bit() -> None:
    rng = random.Random(11)
    for a, b in _pairs(rng, 1500):
        got = extend_keys(a, prefix_keys(a), b)
        want = prefix_keys(b)
        assert got.dtype == want.dtype == np.uint64
        assert np.array_equal(got, want), (a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conversation_keys_follow_its_turns(seed: int) -> None:
    """A stream's keys come from its previous turn's; each is the turn's own `prefix_keys` (compaction cuts too), the
    keys it shares with that turn are their common prefix, and the ideal cache searched from there finds what a search
    from the start finds."""
    rng = random.Random(seed)
    conv = Conversation(BlockText(get_tokenizer(None)), namespace="t", marker="", block_size=64)
    searched, from_shared = PrefixCache(), PrefixCache()
    ids = list(range(50))
    prev = None
    for turn in range(40):
        keys = conv.keys(ids)
        assert np.array_equal(keys, prefix_keys(ids))
        shared = conv.shared(keys)
        assert shared == (0 if prev is None else common_prefix(prev, keys))
        assert from_shared.observe(keys, shared) == searched.observe(keys)
        prev = keys
        conv.advance(ids, 64 * len(ids), 100, keys, tail_key=f"#{turn}")
        roll = rng.random()
        if roll < 0.15:
            ids = [*ids[: rng.randint(1, len(ids))], 10_000 + turn]  # a compaction cut
        elif roll < 0.25:
            pass  # the same prompt again
        else:
            ids = ids + [1000 * turn + k for k in range(rng.randint(1, 30))]


def test_workloads_of_one_synthetic_corpus_share_its_plans() -> None:
    """A sweep's points replay the same cached corpus: a trace's plan is built once per (join policy, split) and
    every workload of the process gets that same plan; other options get their own."""

    profile = SynthProfile(traces=3, max_isl=20_000, seed=913)
    a = AgenticWorkload(AgenticConfig(synthetic=profile, run_id="a"))
    b = AgenticWorkload(AgenticConfig(synthetic=profile, run_id="b", seed=5))
    recorded = AgenticWorkload(AgenticConfig(synthetic=profile, join_policy="recorded"))
    unsplit = AgenticWorkload(AgenticConfig(synthetic=profile, split_parallel_requests=False))
    for i in range(3):
        assert a.plan(i) is b.plan(i)
        assert a.plan(i) == build_plan(a.traces[i], join_policy="agentx", split_parallel=True)
        assert recorded.plan(i) == build_plan(a.traces[i], join_policy="recorded", split_parallel=True)
        assert unsplit.plan(i) == build_plan(a.traces[i], join_policy="agentx", split_parallel=False)
        assert recorded.plan(i) is not a.plan(i) and unsplit.plan(i) is not a.plan(i)


def test_describe_counts_the_subagents_no_parent_turn_spawns() -> None:
    def req(t: float) -> dict[str, object]:
        return {"t": t, "in": 64, "out": 1, "hash_ids": [1]}

    def sub(t: float) -> dict[str, object]:
        return {"type": "subagent", "t": t, "agent_id": f"s{t}", "requests": [req(t)]}

    traces = [Trace.model_validate({"id": "early", "requests": [sub(0.0), sub(0.5), req(1.0), sub(2.0), req(3.0)]}),
              Trace.model_validate({"id": "none", "requests": [req(0.0), sub(1.0), req(2.0)]}),
              Trace.model_validate({"id": "empty", "requests": [
                  {"type": "subagent", "t": 0.0, "agent_id": "e"}, req(1.0)]})]
    workload = AgenticWorkload(AgenticConfig(source="x", run_id="r"), traces=traces)
    assert [build_plan(t).dropped for t in traces] == [2, 0, 1]
    assert workload.describe()["dropped_subagents"] == 3


def test_a_corpus_file_is_read_once_while_its_bytes_stay(tmp_path: Path) -> None:
    """The points of a sweep share one read of a trace file (each read it whole again); a file rewritten, even to
    the same size at once, is read again."""
    path = tmp_path / "traces.jsonl"

    def write(t: float) -> None:
        lines = [json.dumps({"id": f"tree-{i}", "requests": [{"t": t, "in": 64, "out": 1, "hash_ids": [i]}]})
                 for i in range(3)]
        path.write_text("\n".join(lines) + "\n")

    write(1.0)
    first = load_traces(path)
    assert [t.id for t in first] == ["tree-0", "tree-1", "tree-2"]
    assert all(a is b for a, b in zip(load_traces(path), first, strict=True))
    a = AgenticWorkload(AgenticConfig(source=str(path), run_id="a"))
    b = AgenticWorkload(AgenticConfig(source=str(path), run_id="b"))
    assert a.plan(0) is b.plan(0)
    assert a.corpus_digest == b.corpus_digest == replay_corpus_digest(str(path))
    limited = load_traces(path, limit=2)  # a part of a corpus is read as before, on its own
    assert [t.id for t in limited] == ["tree-0", "tree-1"] and limited[0] is not first[0]

    write(2.0)  # the same size, within the file system's timestamp tick
    again = load_traces(path)
    assert again[0].requests[0].t == 2.0
    assert AgenticWorkload(AgenticConfig(source=str(path), run_id="c")).corpus_digest != a.corpus_digest
