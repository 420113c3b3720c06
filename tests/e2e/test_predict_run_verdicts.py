"""`predict`'s summaries are those of `run` in virtual time: the same point earns the same verdict from both. A short
agentic window is `smoke` (below the 900 s minimum); predict had judged it `invalid`, its coverage gate counting the
replay's whole idle tail, since the provenance it summarised with lacked the workload block that names AgentX's
idle cap."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import RECIPES, cli_env, cli_here, run_here


def test_predict_and_run_judge_a_short_agentic_point_alike(tmp_path: Path) -> None:
    text = (RECIPES / "agentic-sim.yaml").read_text()
    text = text.replace("conc-list: [8] }\n      - { tp: 8, spec-decoding: mtp, kv-offloading: dram, "
                        "kv-offload-backend: { name: hicache }, conc-list: [8] }", "conc-list: [2] }")
    text = text.replace("duration: 8", "duration: 30")
    recipe = tmp_path / "short.yaml"
    recipe.write_text(text)
    env = cli_env(tmp_path)
    predicted = cli_here(["predict", recipe, "--json", "--processes", "1"], env)
    assert predicted.returncode == 0, predicted.stderr
    ran = run_here([recipe, "--out", tmp_path / "run", "--no-report", "--json"], env)
    assert ran.returncode == 0, ran.stderr
    p = {r["job"]: r["summary"]["validity"] for r in json.loads(predicted.stdout)}
    r = {row["job"]: row["verdict"] for row in json.loads(ran.stdout)["jobs"]}
    assert p.keys() == r.keys() and len(r) == 1, (p, r)
    for job, verdict in r.items():
        assert verdict == "smoke" and p[job]["verdict"] == verdict, (p[job], verdict)


def test_a_virtual_time_run_says_which_requests_outlived_the_request_timeout(tmp_path: Path) -> None:
    """Virtual time cuts no request at --request-timeout: a point whose requests ran longer says so on its row
    (they had counted as served, valid, with the timeout recorded as applied); `--live` applies it."""
    env = cli_env(tmp_path)
    ran = run_here([RECIPES / "fixed-sim.yaml", "--out", tmp_path / "run", "--no-report", "--json",
                    "--request-timeout", "0.05"], env)
    assert ran.returncode == 0, ran.stderr
    rows = json.loads(ran.stdout)["jobs"]
    assert rows and all(any("ran longer than --request-timeout 0.05 s" in w for w in r["warnings"]) for r in rows), rows
    ran = run_here([RECIPES / "fixed-sim.yaml", "--out", tmp_path / "again", "--no-report", "--json"], env)
    assert not any("request-timeout" in w for r in json.loads(ran.stdout)["jobs"] for w in r["warnings"])


def test_a_hicache_points_summary_has_its_host_pools_peak_fill(tmp_path: Path) -> None:
    """SGLang's HiCache host pool, as the simulator exports it (`sglang:hicache_host_used/total_tokens`), is the
    summary's `kv_cache.cpu_usage_max`; it had been None for every SGLang point, so a CPU tier that held blocks read
    as one that held none."""
    ran = run_here([RECIPES / "agentic-sim.yaml", "--out", tmp_path / "run", "--no-report", "--json"],
                   cli_env(tmp_path))
    assert ran.returncode == 0, ran.stderr
    fills = {}
    for job in (tmp_path / "run" / "jobs").iterdir():
        kv = json.loads((job / "summary.json").read_text())["server_metrics"]["kv_cache"]
        fills["kvdram" in job.name] = kv["cpu_usage_max"]
    assert fills[False] is None  # the resident arm has no host pool
    assert isinstance(fills[True], float) and 0.0 < fills[True] <= 1.0, fills


def test_run_says_its_own_warnings_and_names_an_out_that_is_a_file(tmp_path: Path) -> None:
    """`--traces` on a fixed-length run is a `warning:` line as every other (it was a `WARNING llmsweep.plan.point:`
    log record); an `--out` that is a file is said to be one (it was 'cannot be written: File exists')."""
    env = cli_env(tmp_path)
    ran = run_here([RECIPES / "fixed-sim.yaml", "--out", tmp_path / "run", "--no-report", "--traces", "synthetic"],
                   env)
    assert ran.returncode == 0, ran.stderr
    assert "warning: --traces synthetic changes nothing: no job of this run is an agentic replay" in ran.stderr
    file = tmp_path / "a-file"
    file.write_text("")
    refused = run_here([RECIPES / "fixed-sim.yaml", "--out", file, "--no-report"], env)
    assert refused.returncode == 2 and f"--out {file} is a file, not a folder" in refused.stderr, refused.stderr


def test_predicts_table_marks_what_the_simulator_does_not_model_as_runs_does(tmp_path: Path) -> None:
    """A point whose job sets what the simulator does not model (DP attention in a prefill pool) is marked on
    predict's table with the note under it, as run's table marks it; it was said only in the JSON's provenance."""
    from llmsweep.sim_warnings import not_modelled

    shown = cli_here(["predict", RECIPES / "disagg-sim.yaml", "--processes", "1"], cli_env(tmp_path))
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    # (its image is a mi30x build on mi355x, a rule the simulator softens: a real engine would refuse it, note 1)
    assert "valid ⚠1,2,3" in text and "⚠2 the simulator does not model DP attention" in text, text[-2000:]
    assert "⚠1 a real engine would refuse them: [image.hardware-fit]" in text, text[-2000:]
    assert not_modelled(["x"]).split("x")[0].strip() in text


def test_virtual_time_server_series_start_at_the_window_as_the_live_clients_do(tmp_path: Path) -> None:
    """The live client takes a base scrape when its profiling window opens; virtual time scraped only on its 1-s grid
    from t=0, so the server series' window held the warm-up (GPU hit rate 0.661 against the 0.872 the client saw and
    the live run's server reported). Both now read the same window."""
    env = cli_env(tmp_path)
    for out, extra in ((tmp_path / "virtual", []), (tmp_path / "live", ["--live"])):
        ran = run_here([RECIPES / "agentic-sim.yaml", "--out", out, "--no-report", *extra], env)
        assert ran.returncode == 0, ran.stderr[-2000:]
    rates = {}
    for mode in ("virtual", "live"):
        for job in (tmp_path / mode / "jobs").iterdir():
            s = json.loads((job / "summary.json").read_text())
            rates[(mode, job.name)] = (s["server_metrics"]["cache"]["gpu_hit_rate"], s["cache"]["observed_hit_rate"])
            if mode == "virtual":  # the interval it scraped at, not the live client's default it had recorded
                run = json.loads((job / "run.json").read_text())
                assert run["provenance"]["options"]["scrape_interval_s"] == 1.0
    for (mode, name), (server, client) in rates.items():
        assert server is not None and abs(server - client) < 0.02, (mode, name, server, client)


def test_a_whole_resume_retires_the_jobs_the_recipe_no_longer_has(tmp_path: Path) -> None:
    """A --resume over a recipe that dropped a concurrency had kept the dropped job's folder and stored result in the
    run (its point still on the dashboard, 'stored 3 result(s)' for 2 expected). A whole run's plan now retires it:
    its files move to retired/, its stored result goes, and that is said; a narrower --job run leaves the rest."""
    from llmsweep.results.store import Store

    env = cli_env(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text())
    out = tmp_path / "run"
    first = run_here([recipe, "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-2000:]
    dropped = next(p.name for p in (out / "jobs").iterdir() if "_conc2_" in p.name)
    recipe.write_text(recipe.read_text().replace("conc-list: [2, 4]", "conc-list: [4]"))
    again = run_here([recipe, "--out", out, "--resume", "--no-report"], env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"job {dropped}: no job of the recipe as it is now" in again.stderr, again.stderr[-2000:]
    assert (out / "retired" / dropped / "summary.json").is_file() and not (out / "jobs" / dropped).exists()
    with Store(tmp_path / "store.sqlite", readonly=True) as store:
        run_id = json.loads((out / "run.json").read_text())["run_id"]
        assert [p.job_id for p in store.results(run_id)] == [p.name for p in (out / "jobs").iterdir()]
    # planned again, then taken out again: the second retirement is kept beside the first (it had crashed with a
    # traceback, 'Directory not empty', and so did every later --resume or --force of the folder)
    recipe.write_text(recipe.read_text().replace("conc-list: [4]", "conc-list: [2, 4]"))
    assert run_here([recipe, "--out", out, "--resume", "--no-report"], env).returncode == 0
    assert (out / "jobs" / dropped / "summary.json").is_file()
    recipe.write_text(recipe.read_text().replace("conc-list: [2, 4]", "conc-list: [4]"))
    twice = run_here([recipe, "--out", out, "--resume", "--no-report"], env)
    assert twice.returncode == 0 and "Traceback" not in twice.stderr, twice.stderr[-2000:]
    assert f"files are kept in {out / 'retired' / f'{dropped}.2'}" in twice.stderr, twice.stderr[-2000:]
    assert (out / "retired" / dropped / "summary.json").is_file()
    assert (out / "retired" / f"{dropped}.2" / "summary.json").is_file() and not (out / "jobs" / dropped).exists()


def test_a_whole_resume_under_other_eval_flags_keeps_the_jobs_they_do_not_plan(tmp_path: Path) -> None:
    """`--resume --evals-only` over a `--no-evals` run (adding the evals to a throughput run) plans only eval jobs, and
    the whole-run retirement took every throughput job for one "taken out of the recipe": its valid result moved to
    retired/, dropped from the store, said with a false reason. A job the recipes plan under other eval flags stays,
    the rest of the run (as under --job), expected and stored; the lm-eval-less eval job is refused as before."""
    from llmsweep.results.store import Store

    env = cli_env(tmp_path)
    env.pop("LLMSWEEP_LM_EVAL", None)
    recipe, out = RECIPES / "eval-8k1k.yaml", tmp_path / "run"
    first = run_here([recipe, "--out", out, "--no-report", "--no-evals"], env)
    assert first.returncode == 0, first.stderr[-2000:]
    (throughput,) = [p.name for p in (out / "jobs").iterdir()]
    for flags in (["--resume", "--evals-only"], ["--force", "--all-evals"]):
        again = run_here([recipe, "--out", out, "--no-report", "--json", *flags], env)
        assert again.returncode == 1, again.stderr[-2000:]  # the eval job is refused: no lm-eval here
        assert "no job of the recipe as it is now" not in again.stderr and not (out / "retired").exists(), \
            again.stderr[-2000:]
        assert (out / "jobs" / throughput / "summary.json").is_file()
        meta = json.loads((out / "run.json").read_text())
        assert throughput in meta["expected_job_ids"] and len(meta["expected_job_ids"]) == 2, meta["expected_job_ids"]
        assert {o["job_id"]: o["status"] for o in meta["outcomes"]}[throughput] == "valid"
        assert json.loads(again.stdout)["counts"]["run"]["by_status"] == {"refused": 1, "valid": 1}
        with Store(tmp_path / "store.sqlite", readonly=True) as store:
            assert [p.job_id for p in store.results(meta["run_id"])] == [throughput]
    # the recipe's own throughput jobs, resumed under their own flags: the eval job of the other flags stays too
    back = run_here([recipe, "--out", out, "--no-report", "--resume", "--no-evals"], env)
    assert back.returncode == 0 and not (out / "retired").exists(), back.stderr[-2000:]
    assert len(json.loads((out / "run.json").read_text())["expected_job_ids"]) == 2


def test_a_disaggregated_points_completed_requests_are_its_decode_workers(tmp_path: Path) -> None:
    """A prefill worker counts each request too, as its prefill ends: summed over the roles, requests_completed read
    18 for 9 requests served (and SGLang's acceptance formula took twice the requests)."""
    ran = run_here([RECIPES / "disagg-sim.yaml", "--out", tmp_path / "run", "--no-report"], cli_env(tmp_path))
    assert ran.returncode == 0, ran.stderr[-2000:]
    for job in (tmp_path / "run" / "jobs").iterdir():
        s = json.loads((job / "summary.json").read_text())
        records = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines() if line.strip()]
        tokens = s["server_metrics"]["tokens"]
        assert tokens["requests_completed"] <= len(records), (job.name, tokens)
        # ... and the first token of each, which its prefill worker counts, is not output twice (the decode worker
        # counts every token the client receives)
        received = sum(r["completion_tokens"] or 0 for r in records)
        assert tokens["generation_total"] <= received, (job.name, tokens, received)


def test_a_resume_after_a_multinode_list_grew_supersedes_its_points_it_does_not_retire_them(tmp_path: Path) -> None:
    """A multi-node point's id holds its deployment's concurrency list, so adding a concurrency renames every point.
    A --resume had read the points measured before as concurrencies 'taken out since': retired, their stored results
    dropped, said falsely. They are the same points (as `changes` and --reuse see them): each is superseded by its
    point under the new list, its files kept in that point's attempts/, and said so."""
    from llmsweep.results.store import Store

    env = cli_env(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text((RECIPES / "disagg-sim.yaml").read_text())
    out = tmp_path / "run"
    first = run_here([recipe, "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-2000:]
    before = sorted(p.name for p in (out / "jobs").iterdir())
    assert len(before) == 2, before
    recipe.write_text(recipe.read_text().replace("conc-list: [2, 4]", "conc-list: [2, 4, 8]"))
    again = run_here([recipe, "--out", out, "--resume", "--no-report"], env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "no job of the recipe as it is now" not in again.stderr and not (out / "retired").exists(), again.stderr
    now = sorted(p.name for p in (out / "jobs").iterdir())
    assert len(now) == 3 and not set(now) & set(before), now
    for old in before:
        conc = old.rpartition("-conc")[2]
        new = next(n for n in now if n.endswith(f"-conc{conc}"))
        assert f"job {old}: superseded by job {new}, the same point of its multi-node deployment" in again.stderr
        assert (out / "jobs" / new / "attempts" / "1" / "summary.json").is_file()
        assert (out / "jobs" / new / "summary.json").is_file()
    with Store(tmp_path / "store.sqlite", readonly=True) as store:
        run_id = json.loads((out / "run.json").read_text())["run_id"]
        assert sorted(p.job_id for p in store.results(run_id)) == now


def test_run_and_predict_mark_a_point_modelled_with_catalog_estimates_alike(tmp_path: Path) -> None:
    """predict marked a point modelled with catalog figures the catalog marks as estimates `valid ⚠1 modelled with
    catalog estimates: …` (words of its own); run of the same recipe showed plain `valid` in its table, outcome.json,
    `--json` rows and dashboard, though every summary recorded `provenance.estimated`. Both now say the one warning
    (`sim_warnings.catalog_estimates`), run for its virtual-time and live points alike."""
    from llmsweep.engines.sim import estimated_figures
    from llmsweep.plan import jobs_from_files
    from llmsweep.sim_warnings import catalog_estimates

    recipe = RECIPES / "fixed-sim.yaml"
    estimated = estimated_figures(jobs_from_files([recipe])[0])
    assert estimated  # the model's and MI300X's estimated figures: what the point stands on
    said = catalog_estimates(estimated)
    env = cli_env(tmp_path, COLUMNS="500")
    predicted = cli_here(["predict", recipe, "--processes", "1"], env)
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    ran = run_here([recipe, "--out", tmp_path / "virtual"], env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    for shown in (predicted.stdout, ran.stdout):  # each table: the mark on its verdicts, the words under it
        text = " ".join(shown.split())
        assert text.count("valid ⚠1") == 2 and f"⚠1 {said}" in text, text[-3000:]
    assert f"  2 jobs ran on the simulator, {said}" in ran.stderr, ran.stderr[-2000:]
    data = json.loads((tmp_path / "virtual" / "report" / "data.json").read_text())
    banner = data["verdicts"]["catalog-estimates"]  # the dashboard's banner, its explanation in dashboard.js
    assert banner["count"] == 2 and [g["reason"] for g in banner["reasons"]] == [said], banner
    assert all(p["warnings"] == [said] for p in data["points"]), data["points"]
    summary_md = (tmp_path / "virtual" / "report" / "summary.md").read_text()
    assert said in summary_md and "Modelled with catalog figures the catalog marks as estimates" in summary_md
    live = run_here([recipe, "--live", "--out", tmp_path / "live", "--no-report", "--json"], env)
    assert live.returncode == 0, live.stderr[-2000:]
    rows = json.loads(live.stdout)["jobs"]
    assert len(rows) == 2 and all(r["warnings"] == [said] for r in rows), rows
    for out in (tmp_path / "virtual", tmp_path / "live"):
        for job in (out / "jobs").iterdir():
            assert json.loads((job / "outcome.json").read_text())["warnings"] == [said], job
            assert json.loads((job / "summary.json").read_text())["provenance"]["estimated"] == estimated
