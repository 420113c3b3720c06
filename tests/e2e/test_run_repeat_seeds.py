"""`run --repeats` draws each repeat's own sample: an agentic repeat replays its lanes with its own seed (lane→trace
order, t*, block text), so the simulator's figures differ between repeats and `compare` gets a real between-run
band. The first run keeps the seed a run without --repeats has (stored results and reuse keys were made with it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_run_support import RECIPES, cli_env, job_dirs, read_json, run_cli

from llmsweep.workload.scenario import REPEAT_MARK


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
