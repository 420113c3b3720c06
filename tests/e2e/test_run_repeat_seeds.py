"""`run --repeats` draws each repeat's own sample: an agentic repeat replays its lanes with its own seed (lane→trace
order, t*, block text), so the simulator's figures differ between repeats and `compare` gets a real between-run
band. The first run keeps the seed a run without --repeats has (stored results and reuse keys were made with it).
Repeat k of two arms of a point (jobs whose servers differ) draws one sample, so `compare` between the arms holds no
difference of samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_run_support import RECIPES, cli_env, job_dirs, read_json, run_cli

from llmsweep.workload.scenario import REPEAT_MARK, point_seed, repeat_of


def _one_arm(tmp_path: Path) -> Path:
    """agentic-sim.yaml with its first arm only (one point)."""
    doc = yaml.safe_load((RECIPES / "agentic-sim.yaml").read_text())
    (recipe,) = doc.values()
    entry = recipe["scenarios"]["agentic-coding"][0]
    entry["search-space"] = entry["search-space"][:1]
    path = tmp_path / "agentic-one.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _timeline(jdir: Path) -> list[tuple[Any, ...]]:
    """What the run sent and when, relative to its first send (the virtual clock starts at the wall-clock time the
    job ran): the part of the records a seed decides."""
    rows = [json.loads(line) for line in (jdir / "records.jsonl").read_text().splitlines() if line.strip()]
    assert rows
    t0 = min(float(r["sent_at"]) for r in rows)

    def rel(key: str, value: Any) -> Any:
        if key.endswith("_at") and isinstance(value, (int, float)):
            return round(value - t0, 6)
        if key == "chunk_times" and isinstance(value, list):
            return [round(v - t0, 6) for v in value]
        return value

    return [tuple((k, json.dumps(rel(k, v), sort_keys=True)) for k, v in sorted(r.items())) for r in rows]


@pytest.mark.timeout(300)
def test_agentic_repeats_differ_and_the_first_equals_a_run_without_repeats(tmp_path: Path) -> None:
    recipe = _one_arm(tmp_path)
    env = cli_env(tmp_path, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    common = ["--simulate", "--traces", "synthetic", "--no-report"]
    proc = run_cli([recipe, *common, "--repeats", "2", "--out", tmp_path / "rep"], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    proc = run_cli([recipe, *common, "--out", tmp_path / "once"], env)
    assert proc.returncode == 0, proc.stderr[-4000:]

    once = job_dirs(tmp_path / "once")
    rep = job_dirs(tmp_path / "rep")
    (job_id,) = once
    assert set(rep) == {job_id, f"{job_id}{REPEAT_MARK}2"}
    first, second = rep[job_id], rep[f"{job_id}{REPEAT_MARK}2"]

    # repeat 1 is the run without --repeats: the same sample, the same figures
    assert _timeline(first) == _timeline(once[job_id])
    s_once, s_first = read_json(once[job_id] / "summary.json"), read_json(first / "summary.json")
    assert s_first["throughput"] == s_once["throughput"] and s_first["latency"] == s_once["latency"]
    # repeat 2 drew its own: another lane→trace order and t*, so other requests at other times, other figures
    assert _timeline(second) != _timeline(first)
    s_second = read_json(second / "summary.json")
    assert s_second["throughput"] != s_first["throughput"]
    # ... from the same corpus: a repeat measures the same point
    digest = s_first["provenance"]["workload"]["corpus_digest"]
    assert s_second["provenance"]["workload"]["corpus_digest"] == digest
    assert s_second["provenance"]["workload"]["seed"] != s_first["provenance"]["workload"]["seed"]
    assert s_first["provenance"]["workload"]["seed"] == read_json(first / "job.json")["workload"]["seed"]


def _drawn(out: Path) -> dict[tuple[str, int, int], tuple[int, list[tuple[Any, ...]]]]:
    """(arm, concurrency, repeat) → the seed each job's workload sampled with, as its summary records it, and the
    requests it sent that the sample alone decides, in the order they were drawn: a fixed-length point's every prompt
    (its index and length), an agentic point's warm-up turns (each lane's trace, turn and prompt length at t*). The
    arm is the job's server side (its tensor parallelism and KV offload tier)."""
    drawn = {}
    for name, jdir in job_dirs(out).items():
        job, summary = read_json(jdir / "job.json"), read_json(jdir / "summary.json")
        rows = [json.loads(line) for line in (jdir / "records.jsonl").read_text().splitlines() if line.strip()]
        sent: list[tuple[Any, ...]]
        if job["workload"]["scenario"] == "fixed-seq-len":
            sent = sorted((r["phase"], r["request_index"], r["input_tokens_expected"]) for r in rows)
        else:
            sent = sorted((r["lane"], r["trace"], r["turn"], r["input_tokens_expected"]) for r in rows
                          if r["phase"] == "warmup")
        assert sent, name
        arm = f"tp{job['tp']}-kv{job.get('kv-offloading') or 'none'}"
        drawn[(arm, job["conc"], repeat_of(name)[1])] = (summary["provenance"]["workload"]["seed"], sent)
    return drawn


@pytest.mark.timeout(300)
def test_repeat_k_of_two_arms_replays_one_sample_and_the_points_of_a_server_their_own(tmp_path: Path) -> None:
    """The quickstart's two arms (GPU-resident, HiCache) replayed one sample in their first runs and two in repeat 2
    (conc 4: 1,584 and 1,057 tok/s/GPU, the difference of samples taken for the arms'): repeat k of every arm now
    replays one, and repeats still differ from each other. Fixed-length prompts are salted per point (the points of
    one server must not find each other's prompts in its prefix cache): a first run keeps its job id's seed, and the
    points of one server draw their own in every repeat."""
    env = cli_env(tmp_path, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    for recipe in ("agentic-sim.yaml", "two-servers-sim.yaml"):
        proc = run_cli([RECIPES / recipe, "--simulate", "--no-report", "--repeats", "2", "--out", tmp_path / recipe],
                       env)
        assert proc.returncode == 0, proc.stderr[-4000:]

    agentic = _drawn(tmp_path / "agentic-sim.yaml")
    assert set(agentic) == {(arm, 8, k) for arm in ("tp8-kvnone", "tp8-kvdram") for k in (1, 2)}
    for k in (1, 2):  # one sample per repeat, whatever the arm: the first runs' the recipe's seed, as before
        assert agentic[("tp8-kvnone", 8, k)] == agentic[("tp8-kvdram", 8, k)]
    (seed1, sent1), (seed2, sent2) = agentic[("tp8-kvnone", 8, 1)], agentic[("tp8-kvnone", 8, 2)]
    assert seed1 == 42 and seed2 != 42 and sent2 != sent1  # a repeat its own

    fixed = _drawn(tmp_path / "two-servers-sim.yaml")  # tp 8 at conc 1 and 2 on one server, tp 4 at conc 2
    assert set(fixed) == {(arm, c, k) for arm, c in (("tp8-kvnone", 1), ("tp8-kvnone", 2), ("tp4-kvnone", 2))
                          for k in (1, 2)}
    assert fixed[("tp8-kvnone", 2, 2)] == fixed[("tp4-kvnone", 2, 2)]  # repeat 2 of the two arms: one sample
    seeds = {key: seed for key, (seed, _) in fixed.items()}
    assert len({seeds[("tp8-kvnone", 2, 2)], *(seeds[key] for key in seeds if key[2] == 1),
                seeds[("tp8-kvnone", 1, 2)]}) == 5  # every other job of a server its own, a repeat its own
    for name, jdir in job_dirs(tmp_path / "two-servers-sim.yaml").items():
        if repeat_of(name)[1] == 1:  # a first run's seed is its job id's, as it always was
            assert read_json(jdir / "summary.json")["provenance"]["workload"]["seed"] == point_seed(42, name)
