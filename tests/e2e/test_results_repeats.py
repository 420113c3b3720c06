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
from typing import Any

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
    out, run_id, env, tput = repeated
    rows = json.loads(_cli(env, "results", "export", "--run", run_id, "--format", "inferencex",
                           "--include-unpublished").stdout)
    assert sorted(r["conc"] for r in rows) == [2, 4]  # not two rows per (hw, conc, ...)
    power: dict[int, list[dict[str, Any]]] = {}  # conc -> every repeat's power block, as its summary holds it
    for job in sorted((out / "jobs").iterdir()):
        conc = int(json.loads((job / "job.json").read_text())["conc"])
        power.setdefault(conc, []).append(json.loads((job / "summary.json").read_text())["power"])
    for row in rows:
        assert row["tput_per_gpu"] == pytest.approx(mean(tput[row["conc"]]))
        assert row["llmsweep"]["repeats"]["n"] == 2
        assert row["num_requests_total"] == 2 * {2: 8, 4: 16}[row["conc"]]
        # the block's power figures are the point's, the repeats' mean as every figure of the row is (they had been
        # the first repeat's: a tokens per joule the row's own J/token contradicted)
        said, repeats = row["llmsweep"]["power"], power[row["conc"]]
        assert len({r["tokens_per_joule"] for r in repeats}) == 2  # the repeats differ
        assert said["tokens_per_joule"] == pytest.approx(mean(r["tokens_per_joule"] for r in repeats))
        assert said["cost"]["usd_per_mtok_output"] == pytest.approx(
            mean(r["cost"]["usd_per_mtok_output"] for r in repeats))
        assert said["source"] == "simulated" and said["cost"]["sku"] == "mi300x"  # what they agree on, as it is
    every = json.loads(_cli(env, "results", "export", "--run", run_id, "--format", "json").stdout)
    assert len(every["results"]) == 4  # our own export keeps every result


@pytest.fixture(scope="module")
def extended(repeated) -> tuple[Path, str, str, dict[str, str], dict[int, list[float]]]:
    """`run --reuse --repeats 3` over the two-repeat run: it stands its first two repeats of each point on that run's
    stored results and measures the third. (folder, its run id, the first run's id, environment, conc -> every
    repeat's throughput per GPU, the reused ones first)."""
    out, first, env, tput = repeated
    ext = out.parent / "extended"
    doc = json.loads(_cli(env, "run", RECIPES / "fixed-sim.yaml", "--reuse", "--repeats", "3", "--out", ext,
                          "--json").stdout)
    third: dict[int, float] = {}
    for job in sorted((ext / "jobs").iterdir()):
        if (job / "summary.json").is_file():  # the reused jobs' folders hold only what they stand on
            conc = int(json.loads((job / "job.json").read_text())["conc"])
            third[conc] = json.loads((job / "summary.json").read_text())["throughput"]["per_gpu"]["total_tps"]
    assert sorted(third) == [2, 4], third  # one measured repeat per point, two reused
    return ext, str(doc["run_id"]), first, env, {conc: [*tput[conc], third[conc]] for conc in tput}


def test_a_point_partly_reused_is_one_point_the_mean_of_every_repeat_it_stands_on(extended) -> None:
    """The repeats `run --reuse` took from the earlier run kept that run's id, so the frontier drew each point twice
    (the earlier run's two as one, the third alone) and the lucky one won; one point, the mean of all three."""
    ext, run_id, first, env, tput = extended
    for ref in (str(ext), run_id):
        (front,) = json.loads(_cli(env, "results", "frontier", ref, "--json").stdout).values()
        assert sorted(r["conc"] for r in front) == [2, 4], front
        for row in front:
            assert row["y"] == pytest.approx(mean(tput[row["conc"]]))
            repeats = row["repeats"]
            assert repeats["n"] == 3 and repeats["runs"].count(first) == 2 and repeats["runs"].count(run_id) == 1
            assert [r["run_id"] for r in repeats["reused"]] == [first, first]
    table = _cli(env, "results", "frontier", run_id).stdout
    assert table.count(f"mean of 3 repeats, 2 reused from run {first}") == 2, table


def test_the_report_of_a_partly_reused_run_draws_each_point_once_and_says_where_its_repeats_came_from(
        extended) -> None:
    ext, run_id, first, _, tput = extended
    data = json.loads((ext / "report" / "data.json").read_text())
    assert sorted(p["metrics"]["conc"] for p in data["points"]) == [2, 4]  # had been 4 points for 2 concurrencies
    for p in data["points"]:
        assert p["metrics"]["tput_per_gpu"] == pytest.approx(mean(tput[p["metrics"]["conc"]]))
        assert p["run_id"] == run_id and p["reused"] is None  # measured by this run in part: its own point
        assert p["repeats"]["n"] == 3 and len(p["repeats"]["reused"]) == 2
    assert data["counts"]["reused_drawn"] == 4 and data["verdicts"]["reused"]["count"] == 4
    summary = (ext / "report" / "summary.md").read_text()
    assert summary.count(f"(mean of 3 repeats, 2 reused from run {first})") == 2, summary


def test_compare_says_which_repeats_of_a_point_b_reused_from_a(extended) -> None:
    """`compare A B` compared B's one measured repeat with no word of the two it stood on A's results."""
    ext, _, first, env, _ = extended
    doc = json.loads(_cli(env, "compare", "--baseline", first, str(ext), "--json").stdout)
    partly = [n for n in doc["notes"] if "B stood 2 of its repeats on A's results" in n]
    assert len(partly) == 2, doc["notes"]
    assert len(doc["verdict"]["reused"]) == 4 and all(len(m["b"]) == 1 for m in doc["matched"])


def test_the_inferencex_export_of_a_partly_reused_run_publishes_the_mean_its_frontier_draws(extended) -> None:
    """The InferenceX export of the extending run published each point as the one repeat it measured, while its
    frontier and dashboard drew the mean of all three: a row now is the point the run stands on, the mean of every
    repeat; and a point reused whole stays the measuring run's row (exported once, under that run)."""
    ext, run_id, _, env, tput = extended
    rows = json.loads(_cli(env, "results", "export", "--run", run_id, "--format", "inferencex",
                           "--include-unpublished").stdout)
    assert sorted(r["conc"] for r in rows) == [2, 4], rows
    for row in rows:
        assert row["tput_per_gpu"] == pytest.approx(mean(tput[row["conc"]]))
        assert row["llmsweep"]["repeats"]["n"] == 3
    whole = ext.parent / "whole"
    doc = json.loads(_cli(env, "run", RECIPES / "fixed-sim.yaml", "--reuse", "--out", whole, "--json").stdout)
    assert all(row["reused"] for row in doc["jobs"]), doc["jobs"]
    none = json.loads(_cli(env, "results", "export", "--run", str(doc["run_id"]), "--format", "inferencex",
                           "--include-unpublished").stdout)
    assert none == [], none


def test_job_names_one_repeat_of_a_point_and_runs_only_it(tmp_path: Path) -> None:
    """`--job <id>-repeat2` (the id `run`'s table and the job folder give a repeat) was "no job matches": rerunning
    the one repeat that failed meant every repeat of the job, or another --out."""
    env = cli_env(tmp_path)
    out = tmp_path / "run"
    _cli(env, "run", RECIPES / "fixed-sim.yaml", "--repeats", "2", "--out", out)
    second = sorted(p.name for p in (out / "jobs").iterdir() if p.name.endswith("-repeat2"))[0]
    first = second.removesuffix("-repeat2")
    doc = json.loads(_cli(env, "run", RECIPES / "fixed-sim.yaml", "--repeats", "2", "--out", out, "--force",
                          "--job", second, "--json").stdout)
    assert [j["job"] for j in doc["jobs"]] == [second]  # that repeat only, run again
    assert (out / "jobs" / second / "attempts" / "1" / "summary.json").is_file()
    assert not (out / "jobs" / first / "attempts").exists()
    meta = json.loads((out / "run.json").read_text())
    assert len(meta["expected_job_ids"]) == 4 and {o["job_id"] for o in meta["outcomes"]} == set(
        meta["expected_job_ids"])  # the run still describes all of it
    # a job named whole (here by a unique prefix of its id) beside one of its repeats runs every repeat
    both = json.loads(_cli(env, "run", RECIPES / "fixed-sim.yaml", "--repeats", "2", "--out", out, "--force",
                           "--job", first[:-3], "--job", f"{first[:-3]}-repeat2", "--json").stdout)
    assert sorted(j["job"] for j in both["jobs"]) == [first, second]
    beyond = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", str(RECIPES / "fixed-sim.yaml"),
                             "--out", str(out), "--force", "--repeats", "2", "--job", f"{first}-repeat3"],
                            capture_output=True, text=True, timeout=240, env=env)
    assert beyond.returncode == 2
    assert f"--job {first}-repeat3 names repeat 3, but this run plans 2 repeats" in beyond.stderr
