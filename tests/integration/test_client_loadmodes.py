"""Closed loop over session trees, open loop by rate, warmup, duration with drain grace, early stop, workers."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.stream_server import ServerConfig, StreamServer
from support.workloads import PausingTree, SimpleWorkload, TreeWorkload, chat_spec

from llmsweep.client import Endpoint, RunOptions, run_benchmark
from llmsweep.workload.base import LaneProgram, Send


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def server() -> Iterator[StreamServer]:
    with StreamServer(ServerConfig(ttft_s=0.01, itl_s=0.005)) as srv:
        yield srv


def test_lanes_run_whole_session_trees_one_at_a_time_while_fan_out_exceeds_concurrency(
    server: StreamServer, tmp_path: Path
) -> None:
    wl = TreeWorkload(children=3, trees_per_lane=2, background_child=True, think_s=0.02)
    res = run_benchmark(wl, Endpoint(base_url=server.url, model="m"), RunOptions(concurrency=2), tmp_path)
    recs = _records(tmp_path)
    assert len(recs) == 2 * 2 * (3 + 3 + 1)  # lanes × trees × (root turns + children + background child)
    assert res.workers[0].max_inflight > 2  # subagents fan out beyond the lane count
    trees: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for r in recs:
        trees[(r["lane"], r["session"])].append(r)
    for lane in (0, 1):
        first, second = trees[(lane, f"{lane}-0")], trees[(lane, f"{lane}-1")]
        # the next tree starts only after every request of the previous one (background child included) ended
        assert min(r["sent_at"] for r in second) >= max(r["end_at"] for r in first)
        # the final root turn was sent only after the joined children finished
        last_root = next(r for r in first if r["node"] == "" and r["turn"] == 2)
        children = [r for r in first if r["node"].startswith("sa")]
        assert last_root["sent_at"] >= max(c["end_at"] for c in children)
    assert res.summary.cache.theoretical_hit_rate is not None


def test_open_loop_constant_rate_keeps_the_schedule(server: StreamServer, tmp_path: Path) -> None:
    res = run_benchmark(
        SimpleWorkload(max_tokens=4), Endpoint(base_url=server.url, model="m"),
        RunOptions(request_rate=20.0, arrival="constant", num_requests=20), tmp_path,
    )
    recs = sorted(_records(tmp_path), key=lambda r: r["scheduled_at"])
    assert len(recs) == 20
    gaps = [b["scheduled_at"] - a["scheduled_at"] for a, b in itertools.pairwise(recs)]
    assert all(g == pytest.approx(0.05, abs=1e-6) for g in gaps)
    lag = res.summary.client_health.schedule_lag_s
    assert lag.count == 20 and lag.p50 < 0.05


def test_warmup_is_sent_first_and_excluded(server: StreamServer, tmp_path: Path) -> None:
    res = run_benchmark(
        SimpleWorkload(max_tokens=4, lanes_hint=2), Endpoint(base_url=server.url, model="m"),
        RunOptions(concurrency=2, num_requests=6, warmup_requests=4), tmp_path,
    )
    recs = _records(tmp_path)
    warm = [r for r in recs if r["phase"] == "warmup"]
    prof = [r for r in recs if r["phase"] == "profiling"]
    assert len(warm) == 4 and len(prof) == 6
    assert max(r["end_at"] for r in warm) <= min(r["sent_at"] for r in prof)  # warmup drained first
    assert res.summary.requests.warmup == 4 and res.summary.requests.successful == 6


def test_duration_stops_new_requests_and_cancels_stragglers_after_the_grace(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(itl_s=0.05)) as slow:  # 100 tokens × 50 ms: outlives the deadline
        res = run_benchmark(
            SimpleWorkload(max_tokens=100, lanes_hint=3), Endpoint(base_url=slow.url, model="m"),
            RunOptions(concurrency=3, duration_s=0.5, grace_s=0.3, max_failure_ratio=1.0), tmp_path,
        )
    recs = _records(tmp_path)
    assert len(recs) == 3 and {r["error_class"] for r in recs} == {"cancelled"}
    first_send = min(r["sent_at"] for r in recs)
    assert all(r["end_at"] >= first_send + 0.5 + 0.3 - 0.05 for r in recs)
    assert res.summary.requests.cancelled == 3 and res.summary.requests.failed == 0


def test_failure_threshold_stops_the_run_early(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(fault="http500", fault_every=1)) as bad:
        res = run_benchmark(
            SimpleWorkload(lanes_hint=2), Endpoint(base_url=bad.url, model="m"),
            RunOptions(concurrency=2, num_requests=5000, max_failure_ratio=0.1, failure_floor=10), tmp_path,
        )
    assert len(_records(tmp_path)) < 100
    assert res.verdict == "invalid"
    assert any("stopped early" in r for r in res.summary.validity.reasons)


class _EarlyOverflows(SimpleWorkload):
    """32 lanes: lanes 0 and 1 open with a context overflow (answered at once), lanes 2-11 send 2-token requests and
    lane 9's second one overflows too, while lanes 12-31 stream 60 tokens: the third failure comes among the first 20
    finished requests."""

    def _program(self, lane: int, index: int) -> LaneProgram:
        overflow = index in (0, 1, 9 + 32)
        tokens = 2 if lane < 12 else 60
        yield Send(chat_spec(lane, index, max_tokens=tokens, **({"test_fault": "overflow"} if overflow else {})))


def test_a_few_instant_failures_at_high_concurrency_do_not_stop_the_run(tmp_path: Path) -> None:
    """AgentX counts the live failure ratio only from max(concurrency, 10) finished requests: three context
    overflows among the first 15 answers used to stop a concurrency-32 run (3/15 > 0.1)."""
    with StreamServer(ServerConfig(ttft_s=0.005, itl_s=0.005)) as srv:
        res = run_benchmark(
            _EarlyOverflows(lanes_hint=32), Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=32, num_requests=96, max_failure_ratio=0.1, record_process=False), tmp_path,
        )
    recs = _records(tmp_path)
    assert sum(r["error_class"] == "context_overflow" for r in recs) == 3
    assert len(recs) == 96, res.summary.client_health.stop_reason


def test_two_worker_processes_share_the_lanes(server: StreamServer, tmp_path: Path) -> None:
    res = run_benchmark(
        SimpleWorkload(max_tokens=4, lanes_hint=4), Endpoint(base_url=server.url, model="m"),
        RunOptions(concurrency=4, num_requests=20, workers=2), tmp_path,
    )
    recs = _records(tmp_path)
    assert len(recs) == 20 and len({r["id"] for r in recs}) == 20
    assert {r["worker"] for r in recs} == {0, 1}
    assert {r["lane"] for r in recs if r["worker"] == 1} == {1, 3}
    health = res.summary.client_health
    assert len(health.workers) == 2 and all(w["cpu_s"] > 0 for w in health.workers)


def test_system_idle_cap_shortens_gaps_when_nothing_is_in_flight(server: StreamServer, tmp_path: Path) -> None:
    wl = TreeWorkload(children=0, think_s=30.0, trees_per_lane=1)  # root: send, sleep 30 s, send, send
    res = run_benchmark(wl, Endpoint(base_url=server.url, model="m"),
                        RunOptions(concurrency=1, system_idle_gap_cap_s=0.2), tmp_path)
    recs = sorted(_records(tmp_path), key=lambda r: r["sent_at"])
    assert [r["turn"] for r in recs] == [0, 1, 2]
    gap = recs[1]["sent_at"] - recs[0]["end_at"]
    assert 0.15 < gap < 5.0  # capped near 0.2 s instead of 30 s
    assert res.summary.client_health.schedule_lag_s.max < 1.0  # the shortened sleep is not counted as lag


@pytest.mark.parametrize(("child", "low", "high"), [(False, 0.35, 0.6), (True, 1.45, 1.7)])
def test_the_per_tree_idle_cap_cuts_a_pause_only_while_the_tree_is_idle(tmp_path: Path, child: bool, low: float,
                                                                       high: float) -> None:
    """AgentX's per-tree cap in wall-clock time (0.4 s here): a 1.5 s root pause in an idle tree is brought forward
    to the cap after the tree's last answer; over a child that sends every 0.1 s it is waited out."""
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.001)) as srv:
        run_benchmark(PausingTree(pause_s=1.5, cap_s=0.4, child=child, every_s=0.1, busy_s=2.5),
                      Endpoint(base_url=srv.url, model="m"), RunOptions(concurrency=1, grace_s=0.0), tmp_path)
    recs = {r["request_index"]: r for r in _records(tmp_path)}
    gap = recs[1]["sent_at"] - recs[0]["end_at"]
    assert low <= gap <= high, gap


def test_sleeps_after_the_per_tree_cap_end_at_once_not_on_the_next_tick(tmp_path: Path) -> None:
    """Once a tree has been idle for the cap, AgentX (and the predictor) end its further sleeps at once: the root's
    1.5 s pause ends 0.4 s after its answer and the eight 50 ms sleeps after it cost nothing. Applied on the client's
    50 ms supervision tick instead, each of them lasted until the next tick (~0.2 s more in all)."""
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.001)) as srv:
        run_benchmark(PausingTree(pause_s=1.5, cap_s=0.4, child=False, then_s=(0.05,) * 8),
                      Endpoint(base_url=srv.url, model="m"), RunOptions(concurrency=1, grace_s=0.0), tmp_path)
    recs = {r["request_index"]: r for r in _records(tmp_path)}
    gap = recs[1]["sent_at"] - recs[0]["end_at"]
    assert 0.38 <= gap <= 0.47, gap
