"""`llmsweep run --require-power` on the simulator: every job's summary carries a valid, simulated power block
computed from the `gpu_metrics.jsonl` beside its records, tokens per joule rise with concurrency, the store keeps
the power columns, and `summarize` on the folder reproduces the block."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import pytest
from test_run_support import RECIPES, cli_env, cli_here, job_dirs, read_json, run_here

from llmsweep.metrics import summarise
from llmsweep.power.samples import GPU_METRICS_FILE, read_gpu_metrics


def test_simulated_sweep_reports_valid_power_rising_tokens_per_joule(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = cli_env(tmp_path)
    proc = run_here([RECIPES / "fixed-sim.yaml", "--live", "--out", out, "--no-report", "--require-power", "--json"],
                    env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The end-of-run table speaks power too.
    table = json.loads(proc.stdout)["jobs"]
    assert all(r["tokens_per_joule"] > 0 and r["avg_power_w"] > 0 for r in table)

    by_conc: dict[int, dict[str, object]] = {}
    for name, jdir in job_dirs(out).items():
        assert (jdir / "gpu_metrics.jsonl").is_file(), name
        header = json.loads((jdir / "gpu_metrics.jsonl").read_text().splitlines()[0])
        assert header["backend"] == "sim" and header["source"] == "simulated" and header["require"] is True
        assert header["interval_s"] == 0.25  # the README: 1 Hz, 4 Hz on the simulator
        summary = read_json(jdir / "summary.json")
        power = summary["power"]
        assert power["power_valid"] is True, power["reasons"]
        assert power["source"] == "simulated" and power["backend"] == "sim"
        assert power["expected_gpus"] == power["observed_gpus"] == 8  # TP 8 in the recipe
        assert power["counter_check"]["within_tolerance"] is True  # the modelled energy counter agrees
        assert power["cost"]["assumption"] is True and power["cost"]["sku"] == "mi300x"
        assert power["avg_power_w"] > 0 and power["joules_per_output_token"] > 0
        assert summary["validity"]["verdict"] == "valid"  # power did not make it invalid
        by_conc[int(name.split("_conc")[1].split("_")[0])] = power
    assert sorted(by_conc) == [2, 4]
    assert by_conc[4]["tokens_per_joule"] > by_conc[2]["tokens_per_joule"]  # type: ignore[operator]

    # The server folder keeps every sample of the launch.
    assert list((out / "servers").glob("*/gpu_metrics.jsonl"))

    # The store holds the power columns the metric table declares.
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        rows = db.execute("SELECT tokens_per_joule, joules_per_output_token, avg_power_w, usd_per_mtok_output "
                          "FROM results").fetchall()
    assert len(rows) == 2 and all(all(v is not None and v > 0 for v in row) for row in rows)

    # `summarize` on a job folder reads the same samples and gives the same block.
    jdir = next(iter(job_dirs(out).values()))
    before = read_json(jdir / "summary.json")["power"]
    done = cli_here(["summarize", jdir], env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert read_json(jdir / "summary.json")["power"] == before


def test_virtual_time_sweep_carries_the_live_paths_power_block(tmp_path: Path) -> None:
    """The default simulated run (virtual time, no server) models power over virtual time: the job's
    `gpu_metrics.jsonl` has the live sampler's form, and the summary's block is valid, simulated, and rises in
    tokens per joule with concurrency."""
    out = tmp_path / "out"
    proc = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--require-power", "--json"],
                    cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    by_conc: dict[int, dict[str, object]] = {}
    for name, jdir in job_dirs(out).items():
        summary = read_json(jdir / "summary.json")
        assert summary["provenance"]["clock"] == "virtual"
        lines = (jdir / "gpu_metrics.jsonl").read_text().splitlines()
        header = json.loads(lines[0])
        assert header["backend"] == "sim" and header["source"] == "simulated" and header["require"] is True
        assert len({json.loads(line)["gpu"] for line in lines[1:]}) == 8
        # read at every virtual second (and once more where the run ends)
        times = sorted({json.loads(line)["t"] for line in lines[1:]})
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert header["interval_s"] == 1.0 and gaps and all(abs(g - 1.0) < 1e-6 for g in gaps[:-1]), gaps
        assert 0 < gaps[-1] <= 1.0 + 1e-6, gaps
        power = summary["power"]
        assert power["power_valid"] is True, power["reasons"]
        assert power["source"] == "simulated" and power["observed_gpus"] == 8
        # (the energy counter is checked on full-length windows in the quickstart test: over a window of about a
        # second, 1 Hz samples of a stepwise model cannot match it within 5 %)
        assert power["counter_check"]["energy_j"] > 0
        assert 0 < power["avg_power_w"] <= 750  # between the MI300X's idle and maximum board watts
        by_conc[int(name.split("_conc")[1].split("_")[0])] = power
    assert sorted(by_conc) == [2, 4]
    assert by_conc[4]["tokens_per_joule"] > by_conc[2]["tokens_per_joule"]  # type: ignore[operator]


def test_virtual_time_sweep_without_power(tmp_path: Path) -> None:
    """`--power-backend off`: no samples, no power figure and no source (nothing claimed that was not modelled); the
    assumed cost per million output tokens, which needs only the throughput and the catalog's price, stays (it was
    dropped with the power block), in the summary and `run --json` alike."""
    out = tmp_path / "out"
    proc = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--power-backend", "off", "--json"],
                    cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    for jdir in job_dirs(out).values():
        assert not (jdir / "gpu_metrics.jsonl").exists()
        power = read_json(jdir / "summary.json")["power"]
        assert power["source"] is None and power["backend"] is None and power["reasons"] == ["not_sampled"], power
        assert power.get("energy_j") is None and power.get("tokens_per_joule") is None, power
        assert power["cost"]["assumption"] is True and power["cost"]["usd_per_mtok_output"] > 0, power
    rows = json.loads(proc.stdout)["jobs"]
    assert rows and all(r["power_source"] is None and r["tokens_per_joule"] is None and r["usd_per_mtok_output"] > 0
                        for r in rows), rows
    assert "power will not be recorded" not in proc.stderr and "power not valid" not in proc.stderr


def test_recipe_require_power_refuses_jobs_without_power_unless_the_run_overrides_it(tmp_path: Path) -> None:
    """`require-power: true` in the recipe with sampling off: every job is refused before it runs, saying why and how
    to get power (virtual time models power unless sampling is off, and judges it up front as the live path does
    before its server starts: the jobs ran, and were stored invalid); the run's `--no-require-power` overrides the
    recipe (the jobs are valid and claim no power)."""
    recipe = tmp_path / "required.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text().replace(
        "  multinode: false\n", "  multinode: false\n  require-power: true\n"))
    out = tmp_path / "out"
    proc = run_here([recipe, "--out", out, "--no-report", "--power-backend", "off", "--json"], cli_env(tmp_path))
    assert proc.returncode == 1, proc.stderr[-4000:]
    rows = json.loads(proc.stdout)["jobs"]
    assert len(rows) == 2 and all(r["verdict"] == "refused" and r["summary_file"] is None for r in rows), rows
    assert all("power sampling is off" in r["reason"] and "--power-backend auto" in r["reason"]
               and "--no-require-power" in r["reason"] for r in rows)
    assert not list(out.glob("jobs/*/summary.json"))  # nothing ran

    out2 = tmp_path / "out2"
    proc = run_here([recipe, "--out", out2, "--no-report", "--power-backend", "off", "--no-require-power"],
                    cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert all(read_json(j / "summary.json")["power"]["source"] is None for j in job_dirs(out2).values())


def test_predict_carries_the_power_block_a_virtual_time_run_computes(tmp_path: Path) -> None:
    """`predict` models power as `run` in virtual time does (no job folder: the samples are integrated in memory):
    each point's block is valid and simulated and agrees with the run's, aggregated and disaggregated alike — and so
    do the points themselves (a disaggregated job's concurrencies draw their own prompts in both, as `run`'s one job
    per concurrency does)."""
    recipes = [RECIPES / "fixed-sim.yaml", RECIPES / "disagg-sim.yaml"]
    env = cli_env(tmp_path)
    out = tmp_path / "out"
    proc = run_here([*recipes, "--out", out, "--no-report"], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ran = {}
    for jdir in job_dirs(out).values():
        summary = read_json(jdir / "summary.json")
        (conc,) = read_json(jdir / "job.json")["conc"] if "disagg-true" in jdir.name else [
            read_json(jdir / "job.json")["conc"]]  # a disaggregated job's folder per point holds that point's
        ran[(conc, "disagg-true" in jdir.name)] = summary
    pout = tmp_path / "predicted"
    pred = cli_here(["predict", *recipes, "--json", "--out", pout], env)
    assert pred.returncode == 0, pred.stderr[-4000:]
    rows = json.loads(pred.stdout)
    assert len(rows) == len(ran) == 4
    for row in rows:
        power = row["summary"]["power"]
        run_summary = ran[(row["conc"], "disagg-true" in row["job"])]
        run_power = run_summary["power"]
        assert row["summary"]["throughput"]["output_tps"] == pytest.approx(run_summary["throughput"]["output_tps"],
                                                                           rel=1e-6)
        # the engine's calibration as run records it (a deployment: each pool's)
        assert row["calibration"] == run_summary["provenance"]["simulator"]["calibration"]
        assert power["power_valid"] is True and power["source"] == "simulated", power["reasons"]
        assert power["observed_gpus"] == run_power["observed_gpus"] == row["summary"]["throughput"]["gpus"]
        for figure in ("energy_j", "avg_power_w", "tokens_per_joule"):
            assert power[figure] == pytest.approx(run_power[figure], rel=1e-6), (row["job"], figure)
        # and the cost its SKU's rate gives (predict's provenance names the hardware, as run's does)
        assert power["cost"] is not None and power["cost"]["sku"] == run_power["cost"]["sku"]
        assert power["cost"]["usd_per_mtok_output"] == pytest.approx(run_power["cost"]["usd_per_mtok_output"],
                                                                    rel=1e-6)
        assert row["summary"]["provenance"]["hardware"]["sku"] == run_summary["provenance"]["hardware"]["sku"]
        # --out keeps the modelled samples beside the records, as a run's job folder does: summarised from the files,
        # the point has the same power block
        (point_dir,) = [d for d in pout.glob("*/conc*") if d.parent.name == row["job"]
                        and d.name == f"conc{row['conc']}"]
        header, samples, problems = read_gpu_metrics(point_dir / GPU_METRICS_FILE)
        assert header is not None and header.backend == "sim" and samples and not problems
        again = summarise(point_dir / "records.jsonl", gpus=row["summary"]["throughput"]["gpus"])
        assert again.power is not None and again.power.power_valid
        assert again.power.energy_j == pytest.approx(power["energy_j"], rel=1e-9)


def _pipeline_parallel(tmp_path: Path) -> Path:
    """fixed-sim.yaml at tp 4, pp 2: a job whose power the simulator does not model (it covers the TP GPUs)."""
    recipe = tmp_path / "pp.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("tp: 8,", "tp: 4, pp: 2,", 1))
    return recipe


@pytest.mark.parametrize("clock", ["virtual", "live"])
def test_a_pipeline_parallel_jobs_simulated_power_says_it_is_not_modelled(tmp_path: Path, clock: str) -> None:
    """The simulator's power model covers the tensor-parallel GPUs: a pp 2 job's block was invalid for
    `expected_gpu_count_mismatch` (served live), or `telemetry_unavailable, telemetry_file_empty` (in virtual time),
    as if samples had gone missing. It says that power is not modelled for it, in a reason of its own."""
    out = tmp_path / "out"
    live = ["--live"] if clock == "live" else []
    proc = run_here([_pipeline_parallel(tmp_path), "--out", out, "--no-report", *live], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    # said at the run's start, as power no backend can sample is
    assert "power will not be recorded for 2 jobs on " in proc.stderr and ": not modelled: the simulator's power " \
        "model covers one engine's 4 tensor-parallel GPUs" in proc.stderr, proc.stderr[-4000:]
    assert job_dirs(out)
    for jdir in job_dirs(out).values():
        summary = read_json(jdir / "summary.json")
        power = summary["power"]
        assert summary["validity"]["verdict"] == "valid"  # power was not required of it
        assert power["power_valid"] is False and power["reasons"] == ["not_modelled"], power
        assert power["error"].startswith("not modelled: the simulator's power model covers one engine's 4 "), power


@pytest.mark.parametrize("clock", ["virtual", "live"])
def test_required_power_the_simulator_does_not_model_is_refused_before_the_job_runs(tmp_path: Path,
                                                                                   clock: str) -> None:
    """The README: required power is judged before any server starts. A pp 2 simulated job under `--require-power`
    ran, and was then judged invalid (`required power not valid: telemetry_unavailable, telemetry_file_empty (not
    modelled: …)`): it is refused up front, with why and the fix, as `--power-backend off --require-power` is."""
    out = tmp_path / "out"
    proc = run_here([_pipeline_parallel(tmp_path), "--out", out, "--no-report", "--require-power", "--json",
                     *(["--live"] if clock == "live" else [])], cli_env(tmp_path))
    assert proc.returncode == 1, proc.stderr[-4000:]
    rows = json.loads(proc.stdout)["jobs"]
    assert len(rows) == 2 and all(r["verdict"] == "refused" and r["summary_file"] is None for r in rows), rows
    assert all("the simulator does not model it" in r["reason"] and "4 tensor-parallel GPUs, not the 8" in r["reason"]
               and "--no-require-power" in r["reason"] for r in rows), rows
    assert not list(out.glob("jobs/*/summary.json")) and not list(out.glob("servers/*"))  # nothing ran
