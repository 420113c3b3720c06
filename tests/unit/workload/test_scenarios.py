"""The scenario registry: each scenario owns its defaults, its stopping rule, its workload and its gate profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.spec.workload import ResolvedWorkload, ScenarioId
from llmsweep.workload.agentic import AgenticWorkload
from llmsweep.workload.fixed import FixedLengthWorkload
from llmsweep.workload.mooncake import MooncakeWorkload
from llmsweep.workload.scenario import (
    REPEAT_MARK,
    get_scenario,
    point_seed,
    repeat_index,
    scenario_ids,
    scenario_of,
)

COMMON = {"tokenizer": "org/model", "served-model-name": "m"}


def _fixed(**extra: object) -> ResolvedWorkload:
    return ResolvedWorkload.model_validate({
        **COMMON, "scenario": "fixed-seq-len", "use-chat-template": False, "isl": 256, "osl": 32,
        "num-prompts-per-conc": 10, "range-ratio": 0.8, **extra,
    })


def _replay(path: Path, **replay: object) -> ResolvedWorkload:
    return ResolvedWorkload.model_validate({
        **COMMON, "scenario": "mooncake-replay", "use-chat-template": True, "replay": {"mooncake": str(path), **replay},
    })


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 500 * i, "input_length": 600, "output_length": 8, "hash_ids": [0, i]} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_every_scenario_id_has_its_scenario() -> None:
    assert set(scenario_ids()) == {s.value for s in ScenarioId}
    for sid in ScenarioId:
        assert get_scenario(sid).id is sid
        assert get_scenario(sid.value) is get_scenario(sid)


def test_an_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown scenario 'eval'") as err:
        get_scenario("eval")
    assert err.value.fix is not None and "mooncake-replay" in err.value.fix


def test_gate_profiles_keep_todays_thresholds() -> None:
    fixed, agentic, replay = (get_scenario(s) for s in ScenarioId)
    assert (fixed.gate.max_error_ratio, agentic.gate.max_error_ratio, replay.gate.max_error_ratio) == (0.05, 0.10, 0.05)
    # The 900 s submission minimum is AgentX's: only agentic points need a window that long; a fixed-length or
    # replay point is defined by the prompts it completes (InferenceX).
    assert agentic.gate.config().min_submission_s == 900.0
    assert fixed.gate.config().min_submission_s == replay.gate.config().min_submission_s == 0.0
    load = agentic.load(ResolvedWorkload.model_validate({
        **COMMON, "scenario": "agentic-coding", "use-chat-template": True, "traces": {"path": "x"}, "duration": 120,
    }), concurrency=4)
    gates = agentic.gate.config(planned_duration_s=load.duration_s, require_metrics_prefix="sglang:")
    assert (gates.planned_duration_s, gates.max_error_ratio, gates.require_metrics_prefix) == (120.0, 0.10, "sglang:")


def test_fixed_points_count_prompts_and_salt_their_seed_per_point() -> None:
    scenario = scenario_of(_fixed())
    load = scenario.load(_fixed(), concurrency=8)
    assert (load.concurrency, load.num_requests, load.warmup_requests, load.duration_s) == (8, 80, 16, None)
    a = scenario.build(_fixed(), concurrency=2, point="job-a", tokenizer=None)
    b = scenario.build(_fixed(), concurrency=2, point="job-b", tokenizer=None)
    assert isinstance(a, FixedLengthWorkload) and isinstance(b, FixedLengthWorkload)
    assert a.config.seed != b.config.seed and a.config.api == "completions"
    assert scenario.api(_fixed(**{"use-chat-template": True})) == "chat"


def test_agentic_points_run_a_window_on_the_chat_route() -> None:
    resolved = ResolvedWorkload.model_validate({
        **COMMON, "scenario": "agentic-coding", "use-chat-template": False,
        "traces": {"synthetic": {"traces": 2, "seed": 1, "max-isl": 4000, "max-osl": 20}}, "warmup-per-lane": 1,
    })
    scenario = scenario_of(resolved)
    assert scenario.load(resolved, concurrency=4, job_duration=600).duration_s == 600.0
    assert scenario.load(resolved, concurrency=4).duration_s == 3600.0
    assert scenario.api(resolved) == "chat"
    assert isinstance(scenario.build(resolved, concurrency=2, tokenizer=None), AgenticWorkload)


def test_replay_is_closed_loop_at_conc_unless_it_follows_timestamps(trace: Path) -> None:
    scenario = get_scenario(ScenarioId.MOONCAKE_REPLAY)
    load = scenario.load(_replay(trace), concurrency=4)
    assert (load.concurrency, load.num_requests, load.duration_s) == (4, None, None)  # every row once
    assert scenario.load(_replay(trace, timestamps=True), concurrency=4).concurrency is None
    workload = scenario.build(_replay(trace, speedup=2.0, **{"max-rows": 4}), concurrency=4, tokenizer=None)
    assert isinstance(workload, MooncakeWorkload)
    assert len(workload.rows) == 4 and workload.offsets() == [0.0, 0.25, 0.5, 0.75]
    assert workload.config.api == "chat"
    assert scenario.gate.kind == "replay"


def _agentic(**extra: object) -> ResolvedWorkload:
    return ResolvedWorkload.model_validate({
        **COMMON, "scenario": "agentic-coding", "use-chat-template": True,
        "traces": {"synthetic": {"traces": 6, "seed": 1, "max-isl": 4000, "max-osl": 20}}, "warmup-per-lane": 1,
        **extra,
    })


def test_every_scenario_gives_a_repeat_its_own_seed_and_the_first_run_its_old_one(trace: Path) -> None:
    """The seed a workload gets from its job id: a repeat (`<id>-repeat<k>`) draws its own sample in every scenario;
    a first run keeps the seed it had before repeats were salted (the resolved seed for replays, the per-point seed
    for fixed-length prompts), so stored results and reuse keys still describe what it sends."""
    cases = [(_fixed(), point_seed(42, "job")), (_agentic(), 42), (_replay(trace), 42)]
    for resolved, first in cases:
        scenario = scenario_of(resolved)
        seeds = [scenario.build(resolved, concurrency=2, point=p, tokenizer=None).config.seed  # type: ignore[attr-defined]
                 for p in ("job", f"job{REPEAT_MARK}2", f"job{REPEAT_MARK}3")]
        assert seeds[0] == first == scenario.seed(resolved, "job", 2), resolved.scenario
        assert len(set(seeds)) == 3, resolved.scenario
        assert scenario.build(resolved, concurrency=2, tokenizer=None).config.seed == 42  # type: ignore[attr-defined]
    assert [repeat_index(p) for p in ("a", f"a{REPEAT_MARK}2", f"a{REPEAT_MARK}x", f"{REPEAT_MARK}2")] == [1, 2, 1, 1]


def _seed(workload: ResolvedWorkload, point: str, conc: int = 2) -> int:
    """The seed the workload of job `point` at `conc` samples with (`Scenario.seed`, which `build` draws with)."""
    return scenario_of(workload).seed(workload, point, conc)


def test_repeat_k_of_two_arms_draws_one_sample_and_the_points_of_a_server_their_own(trace: Path) -> None:
    """Two arms of a point (jobs of other ids that send the same workload at the same concurrency: only their
    servers differ) draw one sample in repeat k in every scenario, so `compare` between them holds no difference of
    samples; repeats still draw their own, and a point at another concurrency, or sending another workload, another
    (it may share the server). A first run keeps its seed: the job id's where the scenario salts points."""
    cases = [(_fixed(), _fixed(isl=512)), (_agentic(), _agentic(**{"warmup-per-lane": 2})),
             (_replay(trace), _replay(trace, **{"max-rows": 4}))]
    for resolved, other in cases:
        built = scenario_of(resolved).build(resolved, concurrency=2, point=f"arm-b{REPEAT_MARK}2", tokenizer=None)
        assert built.config.seed == _seed(resolved, f"arm-a{REPEAT_MARK}2")  # type: ignore[attr-defined]
        for k in (2, 3):
            paired = _seed(resolved, f"arm-a{REPEAT_MARK}{k}")
            assert paired == _seed(resolved, f"arm-b{REPEAT_MARK}{k}"), resolved.scenario
            assert paired not in {_seed(resolved, "arm-a"), _seed(resolved, "arm-b")}, resolved.scenario
            assert paired != _seed(resolved, f"arm-a{REPEAT_MARK}{5 - k}"), resolved.scenario
            assert paired != _seed(resolved, f"arm-a{REPEAT_MARK}{k}", conc=4), resolved.scenario
            assert paired != _seed(other, f"arm-a{REPEAT_MARK}{k}"), resolved.scenario
        if scenario_of(resolved).salts_points:
            assert (_seed(resolved, "arm-a"), _seed(resolved, "arm-b")) == (point_seed(42, "arm-a"),
                                                                            point_seed(42, "arm-b"))
        else:
            assert _seed(resolved, "arm-a") == _seed(resolved, "arm-b") == 42


def test_an_agentic_repeat_replays_the_same_corpus_in_another_order() -> None:
    scenario = scenario_of(_agentic())
    first = scenario.build(_agentic(), concurrency=3, point="job", tokenizer=None)
    again = scenario.build(_agentic(), concurrency=3, point="job", tokenizer=None)
    repeat = scenario.build(_agentic(), concurrency=3, point=f"job{REPEAT_MARK}2", tokenizer=None)
    assert isinstance(first, AgenticWorkload) and isinstance(again, AgenticWorkload)
    assert isinstance(repeat, AgenticWorkload)
    assert repeat.corpus_digest == first.corpus_digest  # the corpus is the point's, not the repeat's
    order = [first.trace_for(lane, play) for lane in range(3) for play in range(2)]
    assert order == [again.trace_for(lane, play) for lane in range(3) for play in range(2)]
    assert order != [repeat.trace_for(lane, play) for lane in range(3) for play in range(2)]
