"""The predictor interprets lane programs as the client would: order, spawn/join, lane recycling, open loop."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from support.workloads import PausingTree

from llmsweep.errors import ConfigError
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.predict import Predictor, predict
from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.base import (
    Arrival,
    Join,
    LaneProgram,
    RequestIdentity,
    RequestSpec,
    Send,
    Sleep,
    Spawn,
    Workload,
)

CONST = EngineConfig(model="llama-1b", timing="constant", ttft_s=0.05, itl_s=0.01, kv_capacity_tokens=200_000)


def send(node: str, turn: int, session: str = "s", lane: int = 0, max_tokens: int = 10) -> Send:
    return Send(RequestSpec(api="completions", max_tokens=max_tokens, prompt="a b c d e f g h",
                            identity=RequestIdentity(session=session, node=node, turn=turn, lane=lane)))


class Tree(Workload):
    """Root: turn 0, spawn two children (each 2 turns, one sleeping), join, turn 1."""

    def __init__(self, sessions_per_lane: int = 1) -> None:
        self.per_lane = sessions_per_lane

    def child(self, name: str, session: str, sleep: float) -> LaneProgram:
        yield send(name, 0, session)
        yield Sleep(sleep)
        yield send(name, 1, session)

    def root(self, session: str, lane: int) -> LaneProgram:
        yield send("", 0, session, lane)
        a = yield Spawn(self.child("a", session, 0.0))
        b = yield Spawn(self.child("b", session, 1.0))
        yield Join((a, b))
        yield send("", 1, session, lane)

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        for i in range(self.per_lane):
            yield self.root(f"l{lane}s{i}", lane)


def test_spawned_children_run_concurrently_and_join_waits_for_both() -> None:
    records = predict(Tree(), CONST, concurrency=1, duration=100)
    by = {(r["node"], r["turn"]): r for r in records}
    assert len(records) == 6
    assert by[("a", 0)]["sent_at"] == by[("b", 0)]["sent_at"] >= by[("", 0)]["end_at"]
    assert by[("b", 1)]["sent_at"] >= by[("b", 0)]["end_at"] + 1.0  # think time honoured
    assert by[("", 1)]["sent_at"] == max(by[("a", 1)]["end_at"], by[("b", 1)]["end_at"])
    assert all(r["status"] == 200 and r["completion_tokens"] == 10 for r in records)
    r = by[("", 0)]
    assert r["first_token_at"] == r["chunk_times"][0] and sum(r["chunk_tokens"]) == 10
    assert r["first_token_at"] - r["sent_at"] == pytest.approx(0.05)  # constant TTFT, nothing else queued


def test_a_lane_takes_its_next_session_only_after_the_whole_tree_drains() -> None:
    records = predict(Tree(sessions_per_lane=3), CONST, concurrency=2, duration=1000)
    assert len(records) == 2 * 3 * 6
    for lane in (0, 1):
        sessions = [f"l{lane}s{i}" for i in range(3)]
        for prev, nxt in itertools.pairwise(sessions):
            prev_end = max(r["end_at"] for r in records if r["session"] == prev)
            next_start = min(r["sent_at"] for r in records if r["session"] == nxt)
            assert next_start == prev_end


def test_no_request_starts_after_the_duration_and_in_flight_ones_finish() -> None:
    records = predict(Tree(sessions_per_lane=1000), CONST, concurrency=4, duration=5.0)
    assert records and all(r["sent_at"] < 5.0 for r in records)
    assert all(r["end_at"] is not None for r in records)


class Open(Workload):
    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        return iter(())

    def one(self, i: int) -> LaneProgram:
        yield send("", 0, f"o{i}")

    def arrivals(self) -> Iterator[Arrival]:
        for i in range(20):
            yield Arrival(at=0.5 * i, program=self.one(i))


def test_open_loop_starts_sessions_at_their_arrival_times() -> None:
    records = predict(Open(), CONST, concurrency=1, duration=6.0)
    assert [r["sent_at"] for r in records] == [0.5 * i for i in range(12)]


def test_records_carry_exactly_the_client_record_fields() -> None:
    from dataclasses import fields

    from llmsweep.client.records import RequestRecord

    record = predict(Tree(), CONST, concurrency=1, duration=10, start_time=1_700_000_000.0)[0]
    assert set(record) == {f.name for f in fields(RequestRecord)}
    assert RequestRecord.from_dict(record).ok
    assert record["sent_at"] >= 1_700_000_000.0


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ConfigError, match="duration"):
        predict(Tree(), CONST, concurrency=1, duration=0)


def test_predicted_records_and_scrapes_summarise_like_a_measured_run() -> None:
    from llmsweep.metrics import summarise
    from llmsweep.sim.config import SpecDecodeConfig
    from llmsweep.sim.engine import build_core
    from llmsweep.sim.predict import Predictor
    from llmsweep.sim.synthetic import AgentWorkload

    config = EngineConfig(model="llama-3.1-8b", hardware="h200", spec=SpecDecodeConfig(k=3, acceptance_length=2.5))
    predictor = Predictor(build_core(config), start_time=1_700_000_000.0, scrape_interval=1.0)
    records = predictor.run(AgentWorkload(system_tokens=600, turns=5, tool_tokens=200, osl=80), concurrency=4,
                            duration=60)
    assert len(predictor.scrapes) >= 60
    summary = summarise(records, gpus=1, server_metrics=predictor.scrapes, source="predicted")
    assert summary.source == "predicted"
    server = summary.server_metrics
    assert server.present and server.adapter
    assert server.spec_decode is not None and server.spec_decode.acceptance_length is not None
    assert abs(server.spec_decode.acceptance_length - 2.5) < 0.15


def test_max_requests_stops_profiling_sends_like_the_clients_num_requests() -> None:
    records = predict(Tree(sessions_per_lane=1000), CONST, concurrency=3, duration=1e6, max_requests=20)
    assert len(records) == 20


def test_a_rendered_sim_serve_command_line_becomes_the_engine_config_it_serves() -> None:
    from llmsweep.sim.serve_args import engine_config_from_argv

    argv = ["python", "-m", "llmsweep.cli.main", "sim", "serve", "--model", "qwen3.5-397b-a17b", "--hardware",
            "h200", "--tp", "8", "--ep", "8", "--precision", "fp8", "--spec-method", "mtp", "--spec-k", "3",
            "--acceptance-length", "3.39", "--kv-offload", "dram", "--dram-gb", "512", "--engine-style", "sglang",
            "--max-running-requests", "32", "--port", "8123"]
    config = engine_config_from_argv(argv)
    assert isinstance(config, EngineConfig)
    assert (config.tp, config.ep, config.precision, config.dram_gb, config.max_running_requests) == (8, 8, "fp8",
                                                                                                     512.0, 32)
    assert config.spec is not None and config.spec.acceptance_length == 3.39
    # Nothing pinned (a run-eval row's eval server): the method's typical acceptance, MTP K=3 → 2.95.
    unpinned = engine_config_from_argv(["serve", "--spec-method", "mtp"])
    assert unpinned.spec is not None and unpinned.spec.acceptance_length == 2.95


def test_the_seed_recipe_jobs_render_to_simulated_engines_the_predictor_runs() -> None:
    from pathlib import Path

    from llmsweep import engines
    from llmsweep.plan import jobs_from_files
    from llmsweep.sim.engine import build_core
    from llmsweep.sim.serve_args import engine_config_from_argv
    from llmsweep.sim.synthetic import AgentWorkload

    seed = Path(__file__).resolve().parents[3] / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
    jobs = jobs_from_files([seed])
    assert jobs
    for job in jobs:
        config = engine_config_from_argv(engines.render(job, simulate=True).argv)
        assert isinstance(config, EngineConfig)
        assert config.hardware.startswith("mi300x") and config.tp == 8
        assert config.spec is not None and config.spec.acceptance_length == pytest.approx(3.39)
        assert build_core(config).capacity_tokens > 0
    records = predict(AgentWorkload(system_tokens=500, turns=3, tool_tokens=200, osl=40), config, concurrency=2,
                      duration=20)
    assert records and all(r["status"] == 200 for r in records)


def test_cli_predict_runs_every_job_of_the_seed_recipe_offline(tmp_path) -> None:
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from llmsweep.cli.sim import predict as predict_cmd

    seed = Path(__file__).resolve().parents[3] / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
    out = CliRunner().invoke(predict_cmd, [str(seed), "--duration", "20", "--max-requests", "15", "--traces",
                                           "synthetic", "--out", str(tmp_path), "--json"])
    assert out.exit_code == 0, out.output
    points = json.loads(out.stdout)  # stdout: the JSON; stderr: the per-point progress
    assert len(points) == 9  # the seed PR's 9 generated jobs
    for p in points:
        s = p["summary"]
        assert s["source"] == "predicted"
        assert abs(s["server_metrics"]["spec_decode"]["acceptance_length"] - 3.39) < 0.2
    written = list(tmp_path.rglob("summary.json"))
    assert len(written) == 9 and all((f.parent / "records.jsonl").stat().st_size > 0 for f in written)


class Pauses(Workload):
    """One lane: a request, a pause, a request; `config.system_idle_gap_cap_s` as an agentic workload has (None: no
    idle cap, the pause replayed as recorded)."""

    def __init__(self, pause: float = 120.0, cap: float | None = 10.0) -> None:
        self.pause = pause
        self.config = SimpleNamespace(system_idle_gap_cap_s=cap)  # the attribute interpreters read the idle cap from

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        def program() -> LaneProgram:
            yield send("", 0, "p", lane)
            yield Sleep(self.pause)
            yield send("", 1, "p", lane)
        yield program()


def test_the_system_idle_cap_brings_sleepers_forward_as_the_client_does() -> None:
    """AgentX: when nothing is in flight and every program sleeps, no idle stretch outlasts the 10 s cap."""
    first, second = predict(Pauses(), CONST, concurrency=1, duration=1000)
    assert second["sent_at"] - first["end_at"] == pytest.approx(10.0)


def test_a_program_asleep_when_the_run_stops_is_closed_then_not_waited_for() -> None:
    """A trace's recorded 1e6 s pause kept the run going to its end, a scrape per virtual second on the way (tens of
    seconds of CPU for a 20 s window); the client cancels a sleeping lane at its end."""
    import time

    predictor = Predictor(build_core(CONST), scrape_interval=1.0)
    cpu = time.process_time()
    records = predictor.run(Pauses(pause=1e6, cap=None), concurrency=1, duration=20)
    assert time.process_time() - cpu < 5.0
    assert [r["turn"] for r in records] == [0]  # the second request would be sent after the window: never
    assert predictor.stats.virtual_seconds < 21 and len(predictor.scrapes) <= 22


def test_a_flag_value_the_simulator_cannot_take_is_a_config_error_naming_it() -> None:
    """A recipe's `--mem-fraction-static: abc` reached the simulator's own command-line parser, whose usage error
    stopped `predict` and `run` whole; it is that job's refusal, naming the flag."""
    from llmsweep.errors import ConfigError
    from llmsweep.sim.serve_args import engine_config_from_argv

    with pytest.raises(ConfigError, match="Invalid value for '--mem-fraction-static': 'abc' is not a valid float"):
        engine_config_from_argv(["llmsweep", "sim", "serve", "--mem-fraction-static", "abc"])


def _warming_agents(**kw: object) -> AgenticWorkload:
    """Six AgentX lanes whose primers (up to ~260k tokens) take the 8B model on one H200 seconds to several seconds
    each: lanes finish warming up at different times (without the drain, four profiling requests went out before
    the last warm-up request ended)."""
    from llmsweep.workload.traces.synth import SynthProfile

    return AgenticWorkload(AgenticConfig(synthetic=SynthProfile(traces=8, max_isl=262144), concurrency=6,
                                         warmup_requests_per_lane=2, run_id="drain", **kw))


def test_profiling_starts_only_once_every_lanes_warm_up_has_drained() -> None:
    predictor = Predictor(build_core(EngineConfig(model="llama-3.1-8b", hardware="h200")))
    records = predictor.run(_warming_agents(), concurrency=6, duration=60.0)
    warm = [r for r in records if r["phase"] == "warmup"]
    prof = [r for r in records if r["phase"] == "profiling"]
    assert {r["lane"] for r in warm} == set(range(6)) and prof
    last_warm_end = max(r["end_at"] for r in warm)
    assert predictor.stats.warmup_drained_at == last_warm_end
    assert min(r["sent_at"] for r in prof) >= last_warm_end


def test_a_warm_up_that_outlasts_its_grace_stops_the_run_and_says_why() -> None:
    from llmsweep.metrics import summarise

    predictor = Predictor(build_core(EngineConfig(model="llama-3.1-8b", hardware="h200")))
    records = predictor.run(_warming_agents(warmup_grace_s=5.0), concurrency=6, duration=60.0)
    reason = predictor.stats.stop_reason
    assert reason is not None and reason.startswith("the warm-up did not drain within 5 s")
    assert records and all(r["phase"] == "warmup" for r in records)
    summary = summarise(records, gpus=1, source="predicted", client={"stop_reason": reason})
    assert summary.validity.verdict == "invalid"
    assert f"run stopped early: {reason}" in summary.validity.reasons


class Overflowing(Workload):
    """Each session: a small request, one longer than the KV pool, another small one."""

    def program(self, session: str) -> LaneProgram:
        yield send("", 0, session)
        yield Send(RequestSpec(api="completions", max_tokens=10, prompt="word " * 2000,
                               identity=RequestIdentity(session=session, turn=1)))
        yield send("", 2, session)

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        for i in itertools.count():
            yield self.program(f"s{i}")


def test_a_context_overflow_ends_its_session_as_the_client_ends_it() -> None:
    small_pool = EngineConfig(model="llama-1b", timing="constant", ttft_s=0.05, itl_s=0.01, kv_capacity_tokens=512)
    records = predict(Overflowing(), small_pool, concurrency=1, duration=5, max_requests=6)
    by_session: dict[str, list[dict]] = {}
    for r in records:
        by_session.setdefault(r["session"], []).append(r)
    assert len(by_session) == 3
    for recs in by_session.values():  # the turn after the overflow is never sent; the lane takes its next session
        assert [(r["turn"], r["error_class"]) for r in recs] == [(0, None), (1, "context_overflow")]


@pytest.mark.parametrize(("child", "expected_gap"), [(False, 300.0), (True, 699.0)])
def test_the_per_tree_idle_cap_cuts_a_pause_only_while_the_tree_has_nothing_in_flight(child: bool,
                                                                                       expected_gap: float) -> None:
    """AgentX's per-trajectory-tree cap (300 s): a 699 s root pause in an idle tree is brought forward to 300 s
    after the tree's last activity; over a subagent that keeps sending every 5 s it is waited out."""
    records = predict(PausingTree(pause_s=699.0, cap_s=300.0, child=child), CONST, concurrency=1, duration=3000)
    root = sorted((r for r in records if r["request_index"] in (0, 1)), key=lambda r: r["request_index"])
    assert root[1]["sent_at"] - root[0]["end_at"] == pytest.approx(expected_gap, abs=1e-6)


def test_a_root_primer_the_engine_refuses_stops_the_run_before_profiling_as_agentx_aborts_it() -> None:
    """AIPerf aborts a run whose root-stream primer fails (one attempt): the predictor stops there, and the summary
    is invalid, saying why, where the run used to go on (each lane's next play starts at turn 0, without a primer)
    and could end valid."""
    from llmsweep.metrics import summarise
    from llmsweep.metrics.gates import ROOT_PRIMER_FAILED

    small = EngineConfig(model="llama-3.1-8b", hardware="h200", kv_capacity_tokens=40_000)
    predictor = Predictor(build_core(small))
    records = predictor.run(_warming_agents(), concurrency=6, duration=60.0)
    reason = predictor.stats.stop_reason
    assert reason is not None and reason.startswith(f"{ROOT_PRIMER_FAILED} (lane "), reason
    assert "context length" in reason or "KV pool" in reason, reason  # the engine's own words, shortened
    assert all(r["phase"] == "warmup" for r in records)  # nothing was profiled
    failed = [r for r in records if r["error_class"] == "context_overflow"]
    assert failed and failed[0]["node"] == "" and failed[0]["request_index"] == 0  # a root primer
    summary = summarise(records, gpus=1, source="predicted", client={"stop_reason": reason})
    assert summary.validity.verdict == "invalid"
    assert f"run stopped early: {reason}" in summary.validity.reasons


class Lanes(Workload):
    """Each lane sends `turns` requests one after another (a closed loop of single requests)."""

    def __init__(self, turns: int) -> None:
        self.turns = turns

    def program(self, lane: int) -> LaneProgram:
        for turn in range(self.turns):
            yield send("", turn, f"l{lane}", lane, max_tokens=20)

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        yield self.program(lane)


@pytest.mark.parametrize("per_request", [0.0, 4e-3])
def test_the_front_end_latency_grows_with_the_requests_already_in_flight(per_request: float) -> None:
    """`Efficiency.frontend_per_request_s`: a request reaches the engine `frontend_s` plus that much per other request
    sent and not yet answered; alone it waits `frontend_s` only (the vLLM runs' TTFT minus queue and prefill grows
    with the streams the API server serves, docs/simulator.md "Fidelity")."""
    config = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm", calibrated=False,
                          kv_capacity_tokens=200_000, efficiency={"frontend_s": 0.01,
                                                                  "frontend_per_request_s": per_request})
    core = build_core(config)
    arrivals: list[float] = []
    new_request = core.new_request

    def seen(*args: object, now: float | None = None, **kwargs: object) -> object:
        arrivals.append(now if now is not None else core.now)
        return new_request(*args, now=now, **kwargs)  # type: ignore[arg-type]

    setattr(core, "new_request", seen)  # noqa: B010 (the engine's intake, observed)
    records = Predictor(core).run(Lanes(turns=3), concurrency=4, duration=60.0)
    # the four lanes send at 0, each seeing the ones sent before it in flight
    assert arrivals[:4] == pytest.approx([0.01 + k * per_request for k in range(4)], abs=1e-12)
    assert len(records) == 12 and all(r["status"] == 200 for r in records)
    lone = predict(Lanes(turns=3), config, concurrency=1, duration=60.0)
    base = predict(Lanes(turns=3), config.model_copy(update={"efficiency": {"frontend_s": 0.01}}), concurrency=1,
                   duration=60.0)
    assert lone == base  # alone, nothing else is in flight: the fixed latency only
