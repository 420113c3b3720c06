"""Every command that prints a result's metrics as JSON keys each one as the metric table does (`HotColumn.name`,
`llmsweep.metrics.registry`: `tput_per_gpu`, `p50_ttft`) and gives it in the table's unit (a latency in seconds), so a
script reads `run --json`, `predict --json`, `results list|show|frontier --json` and `compare --json` alike; a whole
summary (`summarize --json`, `predict --json`'s `summary`) holds the same figure at the metric's name.

`run --json` said `total_tps_per_gpu` and `ttft_p50_ms` (milliseconds) where `results list --json` said
`tput_per_gpu` and `p50_ttft` (seconds): a script reading both had to map one onto the other. A figure the store does
not hold is keyed from the table all the same (`MetricDef.json_key`): `sim calibrate --json` said `ttft_p50`,
`tpot_p50` and `output_tps`, and `peer crosscheck --json` `lag_p50_ms` (milliseconds)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_run_support import RECIPES, cli_env, cli_here, job_dirs

from llmsweep.metrics.registry import HOT_BY_NAME, HOT_NAMES, OUTPUT_TPUT, HotColumn, MetricDef, all_metrics

FIXED = RECIPES / "fixed-sim.yaml"
"""Two fixed-length points on the simulator, in virtual time: seconds."""
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "results"

METRIC_WORDS = re.compile(r"tps|(^|_)tput|ttft|tpot|e2el|itl|intvty|interactivity|qps|joule|power_w|usd|hit_rate|"
                          r"kv_usage|error_ratio|(^|_)lag(_|$)")
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

    # one row for one point: every key a run's row has, a prediction's has, for the same fact (`point_row`), but
    # those only a run has (kept by --resume/--reuse, its eval's failure, its time, its summary file) or only a
    # prediction (its calibration and whole summary; a refused point's refusal); `predict --json` had no `source`,
    # `clock`, `requests_ok`, `power_error`, `verdict`, and neither said its power's source
    by_conc = {r["conc"]: r for r in ran["jobs"]}
    for row in predicted:
        twin = by_conc[row["conc"]]
        assert set(twin) - RUN_ONLY == set(row) - PREDICT_ONLY, (set(twin) - RUN_ONLY) ^ (set(row) - PREDICT_ONLY)
        assert (twin["source"], row["source"]) == ("simulated", "predicted")
        same = ("job", "conc", "verdict", "reason", "clock", "requests_ok", "requests_failed", "power_source",
                "power_error", "eval_task", "eval_score", "eval_verdict")
        assert {k: row[k] for k in same} == {k: twin[k] for k in same}, (row, twin)
        assert (row["verdict"], row["clock"], row["power_source"]) == ("valid", "virtual", "simulated"), row
        assert row["requests_ok"] == row["summary"]["requests"]["successful"] > 0, row
        assert row["power_source"] == row["summary"]["power"]["source"] and row["tokens_per_joule"] is not None
    # a refused point's row has the same keys, its figures null, its refusal its reason
    from llmsweep.execute.predict_pool import Outcome

    refused = Outcome(job="j", concurrency=None, refused="policy error [x]: why").doc()
    assert set(refused) - PREDICT_ONLY == set(predicted[0]) - PREDICT_ONLY, set(refused) ^ set(predicted[0])
    assert "refused" in refused and "summary" not in refused and "refused" not in predicted[0]
    assert (refused["verdict"], refused["reason"], refused["source"], refused["tput_per_gpu"]) == (
        "refused", "policy error [x]: why", None, None)


RUN_ONLY = frozenset({"resumed", "reused", "eval_failure", "seconds", "summary_file"})
"""The keys of `run --json`'s job row that a prediction has no fact for: a prediction is never resumed nor reused, runs
no eval and times no job; and `summary_file`, the path of the job's summary file (`summary`, in a prediction's row, is
the whole summary: one key, one meaning)."""
PREDICT_ONLY = frozenset({"calibration", "refused", "summary"})
"""The keys of `predict --json`'s point row a run has no fact for: the calibration it was predicted with, a refused
point's refusal (its row has no summary nor calibration); and `summary`, the whole summary itself."""


STATS = ("p50", "p75", "p90", "p99", "mean", "max")


def _metric_of(key: str) -> tuple[MetricDef, str | None] | None:
    """The metric (and statistic) the metric table keys `key` for, None where no metric's `json_key` is `key`."""
    for m in all_metrics():
        for stat in (None, *STATS):
            if (m.column or m.key) is not None and m.json_key(stat) == key:
                return m, stat
    return None


def test_sim_calibrate_keys_its_figures_as_the_metric_table_does(tmp_path: Path) -> None:
    """`sim calibrate --json` keyed a point's measured / before / after figures `ttft_p50` and `tpot_p50` where every
    other command says `p50_ttft` and `p50_tpot`, and the endpoint's output throughput `output_tps`: each is now the
    metric table's key, its measured figure the summary's at the metric's name, in the metric's unit."""
    run = tmp_path / "run"
    llama = EXAMPLES / "h200-vllm-0.26.0" / "llama"
    summaries: dict[int, Any] = {}
    for conc in (1, 4):  # two committed fixed-length points of a measured run, one factor, one iteration: seconds
        (job,) = (llama / "jobs").glob(f"llama-1b_1024_256_*_conc{conc}_*")
        shutil.copytree(job, run / "jobs" / job.name)
        summaries[conc] = json.loads((job / "summary.json").read_text())
    shutil.copy(llama / "run.json", run / "run.json")
    (tmp_path / "catalog").mkdir()
    env = cli_env(tmp_path, LLMSWEEP_CATALOG_DIR=str(tmp_path / "catalog"))
    (fit,) = _json(["sim", "calibrate", run, "--json", "--factors", "mem", "--max-iter", "1"], env)["calibrations"]
    assert len(fit["points"]) == 2
    for point in fit["points"]:
        for side in ("measured", "before", "after", "weights"):
            assert set(point[side]) == {"p50_ttft", "p50_tpot", OUTPUT_TPUT.json_key()}, (side, point[side])
            assert all(_metric_of(k) is not None for k in _metric_keys(point[side])), point[side]
        summary = summaries[point["concurrency"]]
        for key, value in point["measured"].items():
            found = _metric_of(key)
            assert found is not None, key
            metric, stat = found
            node: Any = summary
            for part in [*metric.name.split("."), *([stat] if stat else [])]:
                node = node[part]
            assert value == pytest.approx(node, rel=1e-9), (key, value, node)  # seconds, not ms; tok/s of the whole


def test_peer_crosscheck_keys_the_schedule_lag_as_the_metric_table_does_in_seconds(tmp_path: Path) -> None:
    """`peer crosscheck --json` (and `peer table --json`, which recomputes it) gave each level's send lag as
    `lag_p50_ms`, in milliseconds, where a latency is in seconds everywhere else: it is the metric table's
    `p50_schedule_lag`, in seconds, the mean of the level's runs' medians."""
    check = _json(["peer", "table", EXAMPLES / "h200-crosscheck-vllm-0.26.0", "--json"], cli_env(tmp_path))
    assert check["levels"]
    for level in check["levels"]:
        assert all(_metric_of(k) is not None for k in _metric_keys(level)), level
        runs = [r["summary"] for r in check["runs"] if r["summary"] is not None and
                (r["concurrency"], r["client"]) == (level["concurrency"], level["client"])]
        lags = [s["client_health"]["schedule_lag_s"]["p50"] for s in runs]
        assert level["p50_schedule_lag"] == pytest.approx(sum(lags) / len(lags), rel=1e-9), level
        assert level["p50_schedule_lag"] < 0.01, level  # seconds: the H200 run's lags were 0.1-1.6 ms
