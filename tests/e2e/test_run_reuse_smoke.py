"""`run --reuse` stands a job on a stored smoke result too: the same job earns the same kind of verdict (a short
window's point is smoke again), as the README says; it measured every smoke job again, silently."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import RECIPES, cli_env, run_cli


def test_a_stored_smoke_result_is_reused_by_the_same_job(tmp_path: Path) -> None:
    env = cli_env(tmp_path, LLMSWEEP_TEST_SECRET="s3cret")
    first = run_cli([RECIPES / "agentic-sim.yaml", "--out", tmp_path / "a", "--no-report", "--json"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    done = json.loads(first.stdout)
    measured = {row["job"]: row for row in done["jobs"]}
    assert measured and {row["verdict"] for row in measured.values()} == {"smoke"}
    again = run_cli([RECIPES / "agentic-sim.yaml", "--out", tmp_path / "b", "--no-report", "--json", "--reuse"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    rows = {row["job"]: row for row in json.loads(again.stdout)["jobs"]}
    assert rows.keys() == measured.keys()
    # counted as the table marks them, `reused` (as a --resume skip is `resumed`), not a bare `skipped`
    assert json.loads(again.stdout)["counts"]["by_status"] == {"reused": len(rows)}
    assert f"with a valid or smoke summary ({len(rows)} reused)" in again.stderr, again.stderr[-2000:]
    for job, row in rows.items():
        assert row["reused"] is True and row["verdict"] == "smoke", row
        # the figures it stands on are the first run's
        assert row["tput_per_gpu"] == measured[job]["tput_per_gpu"], (row, measured[job])
        assert row["reason"].startswith(f"reused: smoke result of run {done['run_id']} (job {job})"), row


def test_reuse_stands_on_a_result_judged_under_the_other_power_gate_by_its_power_block(tmp_path: Path) -> None:
    """A result's reuse key holds whether power was required of it, so `--reuse --require-power` measured again every
    job a run without that flag had measured — valid power and all — and said nothing. A job that requires power now
    stands on such a result when its power block is valid, and says why it does not when it is not; a run that does
    not require power stands on one judged with it."""
    env = cli_env(tmp_path)
    said: list[str] = []

    def run(out: str, store: str, *extra: str) -> dict[str, dict[str, object]]:
        proc = run_cli([RECIPES / "fixed-sim.yaml", "--out", tmp_path / out, "--store", tmp_path / store,
                        "--no-report", "--json", *extra], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        said.append(proc.stderr)
        return {row["job"]: row for row in json.loads(proc.stdout)["jobs"]}

    # judged without power required, and with none recorded: a run that requires it measures again, and says why
    unpowered = run("off", "a.sqlite", "--power-backend", "off")
    again = run("required", "a.sqlite", "--reuse", "--require-power")
    assert not any(row["reused"] for row in again.values()), again
    for job in unpowered:
        assert f"not reused: job {job}: the valid result of run" in said[-1] and "no valid power" in said[-1], said[-1]
    # modelled power, valid, judged without power required: stood on by a run that requires it
    plain = run("plain", "b.sqlite")
    stood = run("stood", "b.sqlite", "--reuse", "--require-power")
    assert stood.keys() == plain.keys() and all(row["reused"] for row in stood.values()), stood
    # judged with power required, stood on by a run that does not require it
    strict = run("strict", "c.sqlite", "--require-power")
    lax = run("lax", "c.sqlite", "--reuse")
    assert lax.keys() == strict.keys() and all(row["reused"] for row in lax.values()), lax


def test_reuse_by_the_power_gate_passes_over_a_newer_result_without_valid_power(tmp_path: Path) -> None:
    """A run that requires power looked at the newest result judged without that requirement only: one without valid
    power measured the job again, though an older result of it had valid power to stand on."""
    env = cli_env(tmp_path)
    runs: dict[str, str] = {}
    for out, extra in (("plain", []), ("off", ["--power-backend", "off"])):  # `off` stored last: the newest
        proc = run_cli([RECIPES / "fixed-sim.yaml", "--out", tmp_path / out, "--no-report", *extra], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[out] = json.loads((tmp_path / out / "run.json").read_text())["run_id"]
    proc = run_cli([RECIPES / "fixed-sim.yaml", "--out", tmp_path / "required", "--no-report", "--json", "--reuse",
                    "--require-power"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout)["jobs"]
    assert rows and all(row["reused"] and runs["plain"] in row["reason"] for row in rows), rows
    assert "no valid power" not in proc.stderr, proc.stderr[-3000:]


def test_reuse_stands_on_the_newest_result_of_either_power_gate_and_draws_it(tmp_path: Path) -> None:
    """A run without power, then one that required (and recorded) it, then a plain `--reuse`: the last stood on the
    first run's result without power, the older one, and said nothing. Of the results found under either power gate
    the newest stands, its figures in the rows and its points drawn on the dashboard (a result stood on across the
    gate was not drawn, and its rows had no figure)."""
    env = cli_env(tmp_path)
    run_ids: dict[str, str] = {}

    def run(out: str, *extra: str) -> tuple[dict[str, dict[str, object]], str]:
        proc = run_cli([RECIPES / "fixed-sim.yaml", "--out", tmp_path / out, "--store", tmp_path / "s.sqlite",
                        "--json", *extra], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        run_ids[out] = json.loads((tmp_path / out / "run.json").read_text())["run_id"]
        return {str(row["job"]): row for row in json.loads(proc.stdout)["jobs"]}, proc.stderr

    run("off", "--no-report", "--power-backend", "off")
    required, _ = run("required", "--no-report", "--reuse", "--require-power")
    assert not any(row["reused"] for row in required.values())
    plain, said = run("plain", "--reuse")
    assert plain.keys() == required.keys()
    for job, row in plain.items():
        assert row["reused"] and run_ids["required"] in str(row["reason"]), row
        assert row["power_source"] == "simulated" and row["tokens_per_joule"] == required[job]["tokens_per_joule"]
        assert row["tput_per_gpu"] == required[job]["tput_per_gpu"] is not None, row
    assert "power will not be recorded" not in said, said[-2000:]
    data = json.loads((tmp_path / "plain" / "report" / "data.json").read_text())
    assert data["counts"]["points"] == len(plain) and not data["missing"] and data["power_unrecorded"] == []


def test_a_job_reused_from_a_result_without_power_says_it_has_none(tmp_path: Path) -> None:
    """A plain `--reuse` stood on a stored result that recorded no power (its run sampled none) said nothing: its
    rows and dashboard had no power and no line said why, as a run that cannot record power says it. It is said at
    the start and among the end lines, and the dashboard's data lists the points (`power_unrecorded`); the assumed
    cost, which needs no power, stays. A run that samples no power itself is told nothing."""
    env = cli_env(tmp_path)
    store = tmp_path / "s.sqlite"
    first = run_cli([RECIPES / "fixed-sim.yaml", "--out", tmp_path / "off", "--store", store, "--no-report",
                     "--power-backend", "off"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    off_id = json.loads((tmp_path / "off" / "run.json").read_text())["run_id"]
    proc = run_cli([RECIPES / "fixed-sim.yaml", "--out", tmp_path / "plain", "--store", store, "--json", "--reuse"],
                   env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout)["jobs"]
    assert rows and all(r["reused"] and r["tokens_per_joule"] is None and r["usd_per_mtok_output"] for r in rows)
    why = (f"--reuse stands on run {off_id}'s stored result, which recorded no power (its run sampled none: "
           "--power-backend off); run without --reuse to record it")
    assert f"power will not be recorded for 2 jobs: {why}: " in proc.stderr, proc.stderr[-3000:]
    assert f"  power not recorded for 2 jobs: {why}" in proc.stderr, proc.stderr[-3000:]
    data = json.loads((tmp_path / "plain" / "report" / "data.json").read_text())
    assert [(g["reason"], g["count"]) for g in data["power_unrecorded"]] == [(why, 2)]
    quiet = run_cli([RECIPES / "fixed-sim.yaml", "--out", tmp_path / "quiet", "--store", store, "--no-report",
                     "--reuse", "--power-backend", "off"], env)
    assert quiet.returncode == 0 and "power will not be recorded" not in quiet.stderr, quiet.stderr[-3000:]


def test_a_job_reused_whose_power_the_simulator_does_not_model_is_not_told_to_run_again(tmp_path: Path) -> None:
    """A pp2 job's power is not modelled by the simulator: its stored result has none, and `--reuse` said "run without
    --reuse to record it", which would record none either. The reused job says the result's own reason."""
    env = cli_env(tmp_path)
    store = tmp_path / "s.sqlite"
    recipe = tmp_path / "pp.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text(encoding="utf-8").replace("tp: 8,", "tp: 4, pp: 2,"),
                      encoding="utf-8")
    first = run_cli([recipe, "--out", tmp_path / "first", "--store", store, "--no-report"], env)
    assert first.returncode == 0 and "not modelled" in first.stderr, first.stderr[-3000:]
    again = run_cli([recipe, "--out", tmp_path / "again", "--store", store, "--no-report", "--reuse"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "not modelled" in again.stderr and "run without --reuse to record it" not in again.stderr, \
        again.stderr[-3000:]
