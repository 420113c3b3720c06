"""`llmsweep discover` of a Mooncake replay arm (an agentic-coding entry of a recipe whose workload names `replay`) on
the simulator: a ladder that could not measure what its concurrencies say is refused before any stage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_run_support import cli_env, cli_here

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "replay-sim.yaml"


def _replay_recipe(tmp_path: Path, rows: int, replay: str = "mooncake: {trace}") -> Path:
    """The replay recipe of `llmsweep run`'s tests over a trace of `rows` rows; `replay` spells its replay block."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 100 * i, "input_length": 700 + 10 * i, "output_length": 60,
                                         "hash_ids": [0, 1 + i % 3]}) + "\n" for i in range(rows)))
    recipe = tmp_path / "replay.yaml"
    recipe.write_text(RECIPE.read_text().replace("mooncake: TRACE", replay.format(trace=trace)))
    return recipe


def _discover(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return cli_here(["discover", *args], cli_env(tmp_path))


def test_a_replay_on_its_timestamps_is_refused_before_any_stage(tmp_path: Path) -> None:
    """Open loop, a job's concurrency is not used: every rung had replayed the same arrivals, and the discovery had
    proposed a knee at the first rung and `policy: {max-conc: 4}` from three identical points."""
    recipe = _replay_recipe(tmp_path, 40, "{{mooncake: {trace}, timestamps: true}}")
    proc = _discover(tmp_path, recipe, "--ladder-top", "16", "--refine", "0", "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "on its timestamps" in proc.stderr and "concurrency is not used" in proc.stderr
    assert "fix: set workload.replay.timestamps to false" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_replay_of_fewer_rows_than_the_ladder_top_is_refused_and_a_lower_top_runs(tmp_path: Path) -> None:
    """Closed loop, every row once: rungs above the trace's row count never hold that many requests in flight (as a
    fixed `num-prompts` below the ladder's top), and had been analysed as if they had."""
    recipe = _replay_recipe(tmp_path, 12)
    proc = _discover(tmp_path, recipe, "--refine", "0", "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "replays 12 rows" in proc.stderr and "above conc 12 (up to 64)" in proc.stderr
    assert "fix: pass --ladder-top 12 or less" in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = _discover(tmp_path, recipe, "--ladder-top", "8", "--refine", "0", "--out", tmp_path / "low")
    assert "replays 12 rows" not in proc.stderr and (tmp_path / "low" / "discovery.json").exists()
    assert [r["conc"] for r in json.loads((tmp_path / "low" / "discovery.json").read_text())["runs"]]


def test_repeats_that_measured_the_same_figures_propose_no_grid_and_say_why(tmp_path: Path) -> None:
    """A closed-loop replay on the simulator in virtual time: the workload seed only changes the prompts' text, so
    each rung's three repeats are one run three times. The zero noise had spaced the proposed grid at every
    concurrency ([4, 5, 6, …, 32]) and written it as the recipe's."""
    recipe = _replay_recipe(tmp_path, 40)
    proc = _discover(tmp_path, recipe, "--ladder-top", "32", "--out", tmp_path / "out", "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    (arm,) = found["arms"]
    assert arm["proposed"] == [] and "did not vary" in arm["error"]
    assert found["max_conc"] is None and found["min_conc_step"] is None
    assert not (tmp_path / "out" / "proposed.yaml").exists()
    # nothing refined from a noise that was not measured
    assert [s["name"] for s in found["stages"] if s["runs_planned"]] == ["ladder"]
