"""What `llmsweep run` tells a user at its end, as the README promises it: a resumed job's real verdict (not
`skipped`), what the figures are (simulated, in virtual time), an option clash said once as bad input, and
`predict`'s verdicts in its table. (Warnings of a job a real engine would refuse:
test_simulated_despite_engine_rules.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.cli import run_main
from test_run_support import RECIPES, cli_env, read_json, run_cli

from llmsweep.cli.main import cli
from llmsweep.metrics.model import DONE_VERDICTS

AGENTIC = RECIPES / "agentic-sim.yaml"
"""Two agentic points on the simulator with an 8-s window: `smoke` (the 900 s minimum), in seconds."""
FIXED = RECIPES / "fixed-sim.yaml"
"""Two fixed-length points on the simulator: `valid`."""


def test_resume_shows_each_finished_jobs_verdict_marked_resumed(tmp_path: Path) -> None:
    """A resumed job's row said verdict `skipped` and hid the real one in its reason ("summary already smoke")."""
    out, env = tmp_path / "out", cli_env(tmp_path)
    first = run_cli([AGENTIC, "--out", out, "--no-report", "--json"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    ran = {r["job"]: r for r in json.loads(first.stdout)["jobs"]}
    assert {r["verdict"] for r in ran.values()} == {"smoke"} and not any(r["resumed"] for r in ran.values())
    again = run_cli([AGENTIC, "--out", out, "--no-report", "--resume", "--json"], env)
    assert again.returncode == 0, again.stderr[-4000:]
    rows = json.loads(again.stdout)["jobs"]
    assert len(rows) == 2
    for row in rows:
        # the summary's verdict and its reason, as the run that made it showed them, marked resumed
        assert row["verdict"] == "smoke" and row["resumed"] is True, row
        assert row["reason"] == ran[row["job"]]["reason"] and row["reason"].startswith("smoke run: profile window")
        assert row["tput_per_gpu"] == ran[row["job"]]["tput_per_gpu"]
    # what reads run.json (the sweep's success rate, `ci collect`) still finds the jobs skipped, and done
    outcomes = read_json(out / "run.json")["outcomes"]
    assert {o["status"] for o in outcomes} == {"skipped"} and all(o["resumed"] for o in outcomes)
    assert "2 with a valid or smoke summary (2 resumed)" in again.stderr


def test_the_end_table_says_the_figures_are_simulated_in_virtual_time(tmp_path: Path) -> None:
    """It showed power and tok/J with no word that no GPU ran; `predict` titles its table as predicted."""
    out, env = tmp_path / "out", cli_env(tmp_path)
    table = run_cli([FIXED, "--out", out, "--no-report"], env)
    assert table.returncode == 0, table.stderr[-4000:]
    assert "llmsweep run — simulated, virtual time" in table.stdout, table.stdout
    rows = json.loads(run_cli([FIXED, "--out", out, "--no-report", "--resume", "--json"], env).stdout)["jobs"]
    assert [(r["source"], r["clock"]) for r in rows] == [("simulated", "virtual")] * 2, rows


def test_an_executor_that_places_no_job_is_bad_input_said_once(tmp_path: Path) -> None:
    """`--executor slurm` on simulated jobs in virtual time refused each job with the same line (9× for the seed
    recipe), exited 1 and left a run of no result in the store."""
    out, store = tmp_path / "out", tmp_path / "store.sqlite"
    proc = run_cli([AGENTIC, "--executor", "slurm", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert proc.stderr.count("would place no server") == 1, proc.stderr
    assert "none of the 2 jobs can run" in proc.stderr and "--live" in proc.stderr
    assert not out.exists() and not store.exists()  # nothing planned into --out or the store


def test_resume_help_names_the_summaries_it_keeps() -> None:
    """The help said "valid summary" while the run keeps smoke ones too (and its refusal and the README say so)."""
    res = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200)
    assert res.exit_code == 0
    line = " ".join(res.output.split("--resume", 1)[1].split())
    assert f"{' or '.join(DONE_VERDICTS)} summary" in line, line


def test_predict_table_shows_each_points_verdict_and_why(tmp_path: Path) -> None:
    """`smoke` (a window under 900 s) was visible only in --json."""
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", str(AGENTIC), str(FIXED),
                           "--processes", "1"], env=cli_env(tmp_path), capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 4, proc.stdout
    agentic, fixed = rows[:2], rows[2:]
    assert all("│ smoke " in r and "smoke run: profile window 8 s is shorter than 900 s" in r for r in agentic), rows
    assert all("│ valid " in r for r in fixed), rows
    assert "verdict" in proc.stdout and "reason" in proc.stdout


def test_summarize_keeps_a_predict_point_folders_labels_and_refuses_one_without_run_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A `predict --out` point folder had no run.json: `summarize` rewrote its `predicted / virtual / valid` summary as
    `measured / (no clock) / smoke` (the source and the gates it fell back to), and `report` called it a `bench`
    folder. It now holds run.json, so the files summarise to the summary predict wrote; without one, nothing is
    invented and the summary stays as it is."""
    out = tmp_path / "pred"
    code, _, err = run_main(capsys, "predict", FIXED, "--processes", "1", "--out", out)
    assert code == 0, err
    points = sorted(out.glob("*/conc*"))
    assert len(points) == 2, points
    for point in points:
        written = read_json(point / "summary.json")
        as_written = (point / "summary.json").read_bytes()
        assert (written["source"], written["provenance"]["clock"], written["validity"]["verdict"]) == (
            "predicted", "virtual", "valid")
        code, stdout, err = run_main(capsys, "summarize", point, "--json")
        assert code == 0, err
        assert json.loads(stdout) == written == read_json(point / "summary.json")
        assert (point / "summary.json").read_bytes() == as_written  # the README: "the same bytes"
    point = points[0]
    code, _, err = run_main(capsys, "report", point, "--no-png")
    assert code == 2 and f"{point} is a point folder of `llmsweep predict --out`, not a run" in err, err
    (point / "run.json").unlink()
    kept = (point / "summary.json").read_bytes()
    code, _, err = run_main(capsys, "summarize", point)
    assert code == 2 and f"{point} has no run.json" in err, err
    assert (point / "summary.json").read_bytes() == kept
    code, _, err = run_main(capsys, "report", point, "--no-png", "--store", tmp_path / "absent.sqlite")
    assert code == 2 and "is a point folder" not in err and "bench" not in err, err


def test_bench_refuses_an_out_of_another_commands_folder_even_with_force(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """README: a folder of `llmsweep run` (its root or a job) or a `predict --out` point is refused as `bench --out`
    even with `--force`, before the endpoint is asked (exit 2, its files untouched): a bench there would replace a
    result's records, summary and run.json with another measurement's."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, _, err = run_main(capsys, "predict", FIXED, "--processes", "1", "--out", tmp_path / "pred")
    assert code == 0, err
    code, _, err = run_main(capsys, "run", FIXED, "--out", tmp_path / "run", "--no-report")
    assert code == 0, err
    point = sorted((tmp_path / "pred").glob("*/conc*"))[0]
    job = sorted((tmp_path / "run" / "jobs").iterdir())[0]
    nobody = "http://127.0.0.1:9"  # nothing answers there: the refusal comes first, or the error would be that
    for folder, what in ((point, "a point of `llmsweep predict --out`"), (job, "a job folder of `llmsweep run`"),
                         (tmp_path / "run", "a run of `llmsweep run`")):
        files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        code, _, err = run_main(capsys, "bench", "fixed", "--url", nobody, "--model", "m", "--isl", "8", "--osl", "4",
                                "--concurrency", "1", "--num-prompts", "1", "--out", folder, "--force")
        assert code == 2 and f"--out {folder} is {what}" in err and "nothing answers" not in err, err
        assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == files


def test_a_recipes_serve_port_is_the_port_its_server_is_launched_on(tmp_path: Path) -> None:
    """`serve.port` says "Server port (default: chosen by executor)", and a port taken says to delete it: `run`
    launched on a free port of its own whatever the recipe asked (port 0 passed over it). The server listens where the
    recipe says, and a port something else holds fails the job with the fix, before any load."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    recipe = tmp_path / "port.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text().replace(
        "    engine: { name: sim }", f"    engine: {{ name: sim }}\n    port: {port}"))
    env = cli_env(tmp_path)
    res = run_cli([recipe, "--live", "--out", tmp_path / "run"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"launching sim server for 2 jobs on port {port}" in res.stderr
    commands = list((tmp_path / "run" / "jobs").glob("*/server_command.txt"))
    assert len(commands) == 2 and all(f"--port {port}" in c.read_text() for c in commands)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the first run's connections may linger
        holder.bind(("127.0.0.1", port))
        holder.listen()
        res = run_cli([recipe, "--live", "--out", tmp_path / "taken"], env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in res.stdout + res.stderr
    assert "delete the recipe's `serve.port`" in res.stdout + res.stderr
