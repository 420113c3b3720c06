"""Every command that prints a result's metrics as JSON keys each one as the metric table does (`HotColumn.name`,
`llmsweep.metrics.registry`: `tput_per_gpu`, `p50_ttft`) and gives it in the table's unit (a latency in seconds), so a
script reads `run --json`, `predict --json`, `results list|show|frontier --json` and `compare --json` alike; a whole
summary (`summarize --json`, `predict --json`'s `summary`) holds the same figure at the metric's name.

`run --json` said `total_tps_per_gpu` and `ttft_p50_ms` (milliseconds) where `results list --json` said
`tput_per_gpu` and `p50_ttft` (seconds): a script reading both had to map one onto the other."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_run_support import RECIPES, cli_env, cli_here, job_dirs

from llmsweep.metrics.registry import HOT_BY_NAME, HOT_NAMES, HotColumn

FIXED = RECIPES / "fixed-sim.yaml"
"""Two fixed-length points on the simulator, in virtual time: seconds."""

METRIC_WORDS = re.compile(r"tps|tput|ttft|tpot|e2el|itl|intvty|interactivity|qps|joule|power_w|usd|hit_rate|"
                          r"kv_usage|error_ratio")
"""What a key that holds a metric's figure is spelled with (a row's other keys — ids, counts, eval scores, the
point's fields — are not), so a second spelling of a metric (`ttft_p50_ms`) is found wherever it appears."""


def _metric_keys(row: Mapping[str, Any]) -> set[str]:
    return {k for k in row if METRIC_WORDS.search(k)}


def _json(args: list[str | Path], env: dict[str, str]) -> Any:
    proc = cli_here(args, env)
    assert proc.returncode == 0, (args, proc.stderr[-3000:])
    return json.loads(proc.stdout)


def _at_name(summary: Mapping[str, Any], column: HotColumn) -> float | None:
    """The column's figure in a summary's JSON, found at its metric's name (`latency.ttft` + `p50`); None where the
    summary gives it elsewhere (a figure the metric table reads with a fallback or from a block, e.g. `qps.mean`)."""
    node: Any = summary
    for part in [*column.metric.name.split("."), *([column.stat] if column.stat else [])]:
        node = node.get(part) if isinstance(node, Mapping) else None
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def test_every_command_keys_a_metric_as_the_metric_table_does_in_one_unit(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    out = tmp_path / "out"
    ran = _json(["run", FIXED, "--out", out, "--no-report", "--json"], env)
    run_id = ran["run_id"]
    rows: dict[str, dict[str, dict[str, Any]]] = {}  # command -> job -> its row of metric figures
    rows["run --json"] = {r["job"]: r for r in ran["jobs"]}
    listed = _json(["results", "list", "--run", run_id, "--json"], env)
    rows["results list --json"] = {r["job_id"]: r for r in listed}
    rows["results show --json"] = {r["job_id"]: _json(["results", "show", r["result_id"], "--json"], env)["metrics"]
                                   for r in listed}
    jobs = set(rows["run --json"])
    assert len(jobs) == 2 and all(set(by_job) == jobs for by_job in rows.values()), rows

    # every figure keyed by the metric table's name, no metric under a second name, every metric there
    for command, by_job in rows.items():
        for job, row in by_job.items():
            assert _metric_keys(row) == set(HOT_NAMES), (command, job, _metric_keys(row) ^ set(HOT_NAMES))

    # the frontier's axes and the comparison's deltas name the metric as the table does, their figures alike
    compared = _json(["compare", run_id, str(out), "--json"], env)
    for point in compared["matched"]:
        (job,) = {p["job_id"] for p in point["a"]}
        deltas = {d["metric"]: d["a"] for d in point["deltas"]}
        assert set(deltas) <= set(HOT_NAMES), deltas
        rows.setdefault("compare --json", {})[job] = deltas
    for x in ("p90_ttft", "p90_e2e_norm_intvty"):
        fronts = _json(["results", "frontier", run_id, "--x", x, "--json"], env)
        for point in (p for series in fronts.values() for p in series):
            assert (point["x_axis"], point["y_axis"]) == (x, "tput_per_gpu"), point
            assert (point["x_unit"], point["y_unit"]) == (HOT_BY_NAME[x].unit, HOT_BY_NAME["tput_per_gpu"].unit)
            rows.setdefault(f"results frontier --x {x} --json", {}).setdefault(point["job_id"], {}).update(
                {point["x_axis"]: point["x"], point["y_axis"]: point["y"]})
    assert {"compare --json", "results frontier --x p90_ttft --json"} <= set(rows), sorted(rows)

    # one unit: each metric's figure of a job is the same number whichever command gives it (ms against s differs)
    for command, by_job in rows.items():
        for job, row in by_job.items():
            for key in _metric_keys(row):
                assert row[key] == rows["run --json"][job][key], (command, job, key, row[key])

    # a whole summary holds the figure at the metric's name, in the same unit (`summarize` recomputes it)
    for job, folder in job_dirs(out).items():
        summary = _json(["summarize", folder, "--json"], env)
        found = {c.name: v for c in HOT_BY_NAME.values() if (v := _at_name(summary, c)) is not None}
        assert {"tput_per_gpu", "p50_ttft", "p50_tpot", "p90_e2el"} <= set(found), found
        for key, value in found.items():
            assert value == pytest.approx(rows["run --json"][job][key], rel=1e-9), (job, key)


def test_predict_keys_each_point_as_run_does(tmp_path: Path) -> None:
    """`predict --json` gave a point's figures only inside its summary: a script comparing a prediction with `run
    --json` read `summary.throughput.per_gpu.total_tps` against `total_tps_per_gpu`; and it named a point's
    concurrency `concurrency` where `run --json` and `results list --json` say `conc`."""
    env = cli_env(tmp_path)
    predicted = _json(["predict", FIXED, "--json", "--processes", "1"], env)
    assert len(predicted) == 2
    ran = _json(["run", FIXED, "--out", tmp_path / "out", "--no-report", "--json"], env)
    assert sorted(r["conc"] for r in predicted) == sorted(r["conc"] for r in ran["jobs"]) == [2, 4]
    for row in predicted:
        assert "concurrency" not in row
        assert _metric_keys(row) == set(HOT_NAMES), _metric_keys(row) ^ set(HOT_NAMES)
        found = {c.name: v for c in HOT_BY_NAME.values() if (v := _at_name(row["summary"], c)) is not None}
        assert {"tput_per_gpu", "p50_ttft"} <= set(found), found
        assert all(row[key] == value for key, value in found.items()), (row, found)
