"""A point a run measured N times (`run --repeats N`) is one point: frontiers, the report and the InferenceX export
take the mean of its repeats (and say so), never the luckiest repeat, never N rows.

A real run on the simulator in virtual time (seconds): fixed-sim.yaml, conc 2 and 4, two repeats each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest
from test_run_support import RECIPES, cli_env


def _cli(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *(str(a) for a in args)], capture_output=True,
                          text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.fixture(scope="module")
def repeated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str], dict[int, list[float]]]:
    """(run folder, run id, environment, conc -> every repeat's throughput per GPU)."""
    tmp = tmp_path_factory.mktemp("repeats")
    env = cli_env(tmp)
    out = tmp / "run"
    doc = json.loads(_cli(env, "run", RECIPES / "fixed-sim.yaml", "--repeats", "2", "--out", out, "--json").stdout)
    tput: dict[int, list[float]] = {}
    for job in sorted((out / "jobs").iterdir()):
        summary = json.loads((job / "summary.json").read_text())
        conc = json.loads((job / "job.json").read_text())["conc"]
        tput.setdefault(int(conc), []).append(summary["throughput"]["per_gpu"]["total_tps"])
    assert sorted(tput) == [2, 4] and all(len(v) == 2 and v[0] != v[1] for v in tput.values())  # repeats differ
    return out, str(doc["run_id"]), env, tput


def test_the_frontier_holds_each_point_once_as_the_mean_of_its_repeats(repeated) -> None:
    out, run_id, env, tput = repeated
    for ref in (str(out), run_id):  # a run folder and the stored run alike
        (front,) = json.loads(_cli(env, "results", "frontier", ref, "--json").stdout).values()
        assert len(front) == 2  # conc 2 and conc 4, each once: neither repeat of conc 4 dropped as "dominated"
        by_y = sorted(front, key=lambda r: r["y"])
        for row, conc in zip(by_y, (2, 4), strict=True):
            assert row["y"] == pytest.approx(mean(tput[conc]))
            assert row["repeats"]["n"] == 2 and len(row["repeats"]["job_ids"]) == 2
            assert row["repeats"]["sd"]["tput_per_gpu"] > 0
    table = _cli(env, "results", "frontier", run_id).stdout
    assert table.count("mean of 2 repeats") == 2


def test_the_report_draws_and_publishes_the_mean_of_the_repeats(repeated) -> None:
    out, _, _, tput = repeated
    data = json.loads((out / "report" / "data.json").read_text())
    assert len(data["points"]) == 2 and data["counts"]["repeated"] == 2 and data["counts"]["repeat_results"] == 4
    (front,) = data["frontiers"]["p90_e2e_norm_intvty"].values()
    by_id = {p["id"]: p for p in data["points"]}
    assert sorted(by_id[i]["metrics"]["tput_per_gpu"] for i in front) == pytest.approx(
        sorted(mean(v) for v in tput.values()))
    assert all(by_id[i]["repeats"]["n"] == 2 for i in front)
    assert "mean of their repeats" in data["headline"]
    summary = (out / "report" / "summary.md").read_text()
    assert summary.count("(mean of 2 repeats)") == 2


def test_the_inferencex_export_writes_one_row_per_point(repeated) -> None:
    _, run_id, env, tput = repeated
    rows = json.loads(_cli(env, "results", "export", "--run", run_id, "--format", "inferencex",
                           "--include-unpublished").stdout)
    assert sorted(r["conc"] for r in rows) == [2, 4]  # not two rows per (hw, conc, ...)
    for row in rows:
        assert row["tput_per_gpu"] == pytest.approx(mean(tput[row["conc"]]))
        assert row["llmsweep"]["repeats"]["n"] == 2
        assert row["num_requests_total"] == 2 * {2: 8, 4: 16}[row["conc"]]
    every = json.loads(_cli(env, "results", "export", "--run", run_id, "--format", "json").stdout)
    assert len(every["results"]) == 4  # our own export keeps every result
