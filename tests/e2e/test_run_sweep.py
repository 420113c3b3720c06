"""`llmsweep run` end to end on the built-in simulator: a small sweep leaves every artifact, shares servers, stores
and reports; secrets reach the server but no file; refusals are loud; --fail-fast stops, its absence goes on."""

from __future__ import annotations

import json
import secrets
import sqlite3
from pathlib import Path

import pytest
from support.procs import read_proc, wait_for
from test_run_support import (
    JOB_ARTIFACTS,
    RECIPES,
    cli_env,
    job_dirs,
    read_json,
    record_lines,
    run_here,
    verdict,
)

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)


def test_small_sim_sweep_runs_end_to_end_and_keeps_its_secret(tmp_path: Path) -> None:
    out, store = tmp_path / "out", tmp_path / "store.sqlite"
    secret = "llmsweep-e2e-" + secrets.token_hex(12)
    env = cli_env(tmp_path, LLMSWEEP_TEST_SECRET=secret)
    log = tmp_path / "run.log"
    stdout = tmp_path / "stdout.txt"
    # agentic-sim.yaml with 4 s windows, not 8: still smoke, still records (at 2 s, ~5 requests at conc 8: too few to
    # be sure of one on CI's loaded cores), and the secret's server runs long enough
    agentic_recipe = tmp_path / "agentic-sim.yaml"
    agentic_recipe.write_text((RECIPES / "agentic-sim.yaml").read_text().replace("duration: 8\n", "duration: 4\n"))
    assert "duration: 4\n" in agentic_recipe.read_text()
    # stdout and stderr apart: the last stdout line is the contract under test.
    with open(stdout, "wb") as out_fh, open(log, "wb") as err_fh:
        import subprocess

        from test_run_support import run_argv

        # --live: the simulator served over HTTP, so the client, the launch and the secret's route are exercised.
        proc = subprocess.Popen(run_argv(agentic_recipe, RECIPES / "fixed-sim.yaml", "--live",
                                         "--out", out),
                                env=env, stdout=out_fh, stderr=err_fh)
        try:
            # While the first (agentic, secret-env) server runs, its process environment holds the secret.
            seen = wait_for(lambda: [pid for p in (out / "servers").glob("*/server.pid")
                                     if (pid := int(read_json(p)["pid"]))
                                     and f"LLMSWEEP_TEST_SECRET={secret}".encode() in read_proc(pid, "environ")],
                            timeout=60, what="a server whose environment carries the secret", proc=proc, log=log)
            assert seen
            rc = proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = log.read_text()
    assert rc == 0, err[-4000:]

    # The last line on stdout is the dashboard, and it exists.
    lines = stdout.read_text().strip().splitlines()
    report = out / "report" / "index.html"
    assert lines[-1] == str(report)
    assert report.is_file() and "<html" in report.read_text()[:2000].lower()
    # The run writes the page, its data and summary; the PNG plots (seconds of matplotlib) come from `report`.
    assert {p.name for p in report.parent.iterdir()} == {"index.html", "data.json", "summary.md"}
    assert f"PNG plots: `llmsweep report {out}`" in log.read_text()

    # Every job: the full set of artifacts, records written; the agentic points are smoke (short windows), the
    # fixed-length ones valid (they completed their planned prompts: no window minimum, as in InferenceX).
    jobs = job_dirs(out)
    assert len(jobs) == 4  # 2 agentic arms (conc 8) + 2 fixed-length concurrencies
    for name, jdir in jobs.items():
        for artifact in JOB_ARTIFACTS:
            assert (jdir / artifact).is_file(), f"{name} lacks {artifact}"
        expected = "valid" if "_256_64_" in name else "smoke"
        assert verdict(jdir) == expected, (name, read_json(jdir / "summary.json")["validity"])
        assert record_lines(jdir / "records.jsonl") > 0
        assert read_json(jdir / "job.json")["id"] == name
        assert "sim serve" in (jdir / "server_command.txt").read_text()
        # A simulated result says whether its (engine, hardware, model class) is calibrated: MI300X here is not.
        assert read_json(jdir / "summary.json")["provenance"]["simulator"]["calibration"] == "uncalibrated"
    fixed = [j for n, j in jobs.items() if "_256_64_" in n]
    agentic = [j for n, j in jobs.items() if "_256_64_" not in n]
    assert len(fixed) == 2 and len(agentic) == 2
    # Fixed-length points measure exactly the planned prompts (4 per conc); the warm-up is spent apart from them.
    for jdir in fixed:
        conc = read_json(jdir / "job.json")["conc"]
        phases = [json.loads(line)["phase"] for line in (jdir / "records.jsonl").read_text().splitlines()]
        assert phases.count("profiling") == 4 * conc, (jdir.name, phases)
        assert phases.count("warmup") == 1

    # Identical launches share one server: the two fixed-length jobs, one launch; each agentic arm its own.
    servers = sorted(p for p in (out / "servers").iterdir() if p.is_dir())
    assert len(servers) == 3
    launches = {s.name: sorted(x.name for x in s.glob("server*.log")) for s in servers}
    assert all(logs == ["server.log"] for logs in launches.values()), launches
    commands = {(j / "server_command.txt").read_text() for j in fixed}
    assert len(commands) == 1
    assert err.count("launching sim server") == 3

    # Results are in the store the environment named, one per job, under the run's id.
    run_id = read_json(out / "run.json")["run_id"]
    with sqlite3.connect(store) as db:
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
        assert tables
    from llmsweep.results.store import Store

    with Store(store) as st:
        points = st.results(run_id)
    assert sorted(p.job_id for p in points) == sorted(jobs)
    assert sorted(p.verdict for p in points) == ["smoke", "smoke", "valid", "valid"]

    # The secret reached the server (above) but no byte of any file under --out, nor the store, carries it.
    needle = secret.encode()
    leaked = [p for p in [*out.rglob("*"), *tmp_path.glob("store.sqlite*")] if p.is_file() and needle in p.read_bytes()]
    assert leaked == []
    assert secret not in stdout.read_text() and secret not in err


def test_refusals_are_printed_with_their_reason_and_fail_the_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = [RECIPES / "eval-8k1k.yaml", RECIPES / "no-serve.yaml", RECIPES / "policy-max-conc.yaml"]
    env = cli_env(tmp_path)
    env.pop("LLMSWEEP_LM_EVAL", None)  # no lm-eval: the run-eval row cannot run its eval, so it is refused whole
    proc = run_here([*files, "--out", out], env)
    assert proc.returncode == 1, proc.stderr  # partly ran: the conc-2 job below ran beside the refusals
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    by_kind = {
        "eval": [o for i, o in outcomes.items() if "_8k1k_" in i],
        "no-serve": [o for i, o in outcomes.items() if "_128_32_" in i],
        "policy": [o for i, o in outcomes.items() if "_256_32_" in i],
    }
    assert [len(v) for v in by_kind.values()] == [1, 1, 2]
    # Every job is refused but the in-cap conc-2 point of the capped recipe, which runs.
    conc2 = next(o for o in by_kind["policy"] if "_conc2_" in o["job_id"])
    assert conc2["status"] == "valid", conc2
    assert all(o["status"] == "refused" for o in outcomes.values() if o is not conc2)
    assert "LLMSWEEP_LM_EVAL" in by_kind["eval"][0]["reasons"][0] and "--no-evals" in by_kind["eval"][0]["reasons"][0]
    assert "not runnable" in by_kind["no-serve"][0]["reasons"][0]
    assert "--simulate" in by_kind["no-serve"][0]["reasons"][0]
    conc4 = next(o for o in by_kind["policy"] if "_conc4_" in o["job_id"])
    assert "[grid.max-conc]" in conc4["reasons"][0]
    # Printed as they happen, and again in the completeness report.
    for o in outcomes.values():
        if o is conc2:
            continue
        assert f"job {o['job_id']}: refused" in proc.stderr
        assert f"refused: {o['job_id']}" in proc.stderr
    assert "grid.max-conc" in proc.stderr and "eval jobs need lm-eval" in proc.stderr
    # Nothing was launched for refused jobs: the one server is the in-cap job's.
    assert set(job_dirs(out)) == {conc2["job_id"]}


def test_a_policy_error_about_one_job_refuses_that_job_only(tmp_path: Path) -> None:
    """policy-max-conc.yaml caps conc at 2: its conc-4 job is refused, its conc-2 job of the same arm runs. The run
    partly ran, exit 1 (it exited 2, bad input, as if nothing had run, though the conc-2 result was stored); a run
    whose every job a policy error refused exits 2: nothing ran, the input is to fix."""
    out = tmp_path / "out"
    proc = run_here([RECIPES / "policy-max-conc.yaml", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 1, proc.stderr
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    assert len(outcomes) == 2
    over = next(o for i, o in outcomes.items() if "_conc4_" in i)
    in_cap = next(o for i, o in outcomes.items() if "_conc2_" in i)
    assert over["status"] == "refused" and "[grid.max-conc]" in over["reasons"][0]
    assert in_cap["status"] == "valid", in_cap
    assert set(job_dirs(out)) == {in_cap["job_id"]}
    assert verdict(job_dirs(out)[in_cap["job_id"]]) == "valid"
    # `--json` (what a script or CI reads) exits the same way, and its table says which job was refused
    as_json = run_here([RECIPES / "policy-max-conc.yaml", "--out", tmp_path / "json", "--json", "--no-report"],
                       cli_env(tmp_path))
    assert as_json.returncode == 1, as_json.stderr
    rows = {r["job"]: r for r in json.loads(as_json.stdout)["jobs"]}
    assert rows[over["job_id"]]["verdict"] == "refused" and "[grid.max-conc]" in rows[over["job_id"]]["reason"]
    # every job refused: nothing ran
    capped = tmp_path / "capped.yaml"
    capped.write_text((RECIPES / "policy-max-conc.yaml").read_text().replace("max-conc: 2", "max-conc: 1"))
    none_ran = run_here([capped, "--out", tmp_path / "none", "--no-report"], cli_env(tmp_path))
    assert none_ran.returncode == 2, none_ran.stderr
    assert "0 with a valid or smoke summary (2 refused)" in none_ran.stderr, none_ran.stderr


def test_a_recipe_without_serve_runs_on_the_simulator_with_simulate(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_here([RECIPES / "no-serve.yaml", "--simulate", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (jdir,) = job_dirs(out).values()
    assert verdict(jdir) == "valid"  # a fixed-length point that completed its prompts
    assert "sim serve" in (jdir / "server_command.txt").read_text()
    assert proc.stdout.strip().splitlines()[-1] == str(out / "report" / "index.html")


def _unready_run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, dict], Path, str]:
    """Two server groups whose servers never get ready in time (a 0.05 s readiness deadline; --live: served)."""
    out = tmp_path / "out"
    proc = run_here([RECIPES / "two-servers-sim.yaml", "--live", "--startup-timeout", "0.05", "--out", out, *extra],
                    cli_env(tmp_path))
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    return proc.returncode, outcomes, out, proc.stderr


def test_fail_fast_stops_after_the_first_failed_job(tmp_path: Path) -> None:
    rc, outcomes, out, err = _unready_run(tmp_path, "--fail-fast")
    assert rc == 1
    assert len(outcomes) == 3
    ran = [o for o in outcomes.values() if "not ready after" in (o["reasons"] or [""])[0]]
    skipped = [o for o in outcomes.values() if "stopped before this job" in (o["reasons"] or [""])[0]]
    assert len(ran) == 1 and len(skipped) == 2, outcomes
    assert "fail-fast" in err
    # Only the first server was ever launched.
    assert len([p for p in (out / "servers").iterdir() if p.is_dir()]) == 1


def test_without_fail_fast_the_sweep_goes_on_after_a_failed_job(tmp_path: Path) -> None:
    rc, outcomes, out, err = _unready_run(tmp_path)
    assert rc == 1
    assert len(outcomes) == 3
    assert all(o["status"] == "failed" and "not ready after" in o["reasons"][0] for o in outcomes.values()), outcomes
    groups = [p for p in (out / "servers").iterdir() if p.is_dir()]
    assert len(groups) == 2
    # The server that missed its deadline is not reused by the next job of its group: that job launched afresh.
    assert sorted(len(list(g.glob("server*.log"))) for g in groups) == [1, 2]
    assert not list((out / "servers").glob("*/server.pid"))
    assert err.count("failed: ") == 3  # the completeness report lists every one


def test_a_policy_error_refuses_only_the_recipe_it_names_even_when_keys_share_a_dotted_prefix(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_here([RECIPES / "dotted-keys.yaml", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 1, proc.stderr  # partly ran: the clean key ran beside the refused one
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    clean = next(o for i, o in outcomes.items() if "_96_16_" in i)
    capped = next(o for i, o in outcomes.items() if "_112_16_" in i)
    assert clean["status"] == "valid", clean
    assert capped["status"] == "refused" and "[grid.max-conc]" in capped["reasons"][0]
