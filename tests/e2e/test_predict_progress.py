"""`predict` says how far it is on stderr (k/N, with an ETA); stdout stays the result.

In this process (`--processes 1`) a line before each point, with an ETA from the points so far; on worker processes a
first line saying how many points of how many jobs on how many workers, then a line as each point finishes, with an
ETA from the completion rate while units wait for a worker, else how many still run (tests/unit/cli/
test_predict_heartbeat.py: the ETA, and the heartbeat naming the units still running). Every line is timestamped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from test_run_support import RECIPES, cli_env


def _predict(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", *args, "--json"],
                          env=cli_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_predict_prints_one_timestamped_line_per_point(tmp_path: Path) -> None:
    proc = _predict(tmp_path, str(RECIPES / "fixed-sim.yaml"), "--duration", "3", "--processes", "1")
    assert len(json.loads(proc.stdout)) == 2
    lines = [line for line in proc.stderr.splitlines() if " point " in line]
    assert re.match(r"^\[\d\d:\d\d:\d\d\] point 1/2: \S+_conc2_\S+ conc 2$", lines[0]), lines
    assert re.match(r"^\[\d\d:\d\d:\d\d\] point 2/2: \S+ conc 4 \(ETA \d+ s\)$", lines[1]), lines


def test_predict_in_this_process_says_when_a_disaggregated_job_starts(tmp_path: Path) -> None:
    """A disaggregated job's concurrencies share one deployment and run in turn: one line names them all before
    they start, so the longest units of a matrix are not silent."""
    proc = _predict(tmp_path, str(RECIPES / "disagg-sim.yaml"), str(RECIPES / "fixed-sim.yaml"), "--duration", "3",
                    "--processes", "1")
    lines = [line for line in proc.stderr.splitlines() if re.match(r"^\[\d\d:\d\d:\d\d\] points? ", line)]
    assert re.match(r"^\[\d\d:\d\d:\d\d\] points 1-2/4: \S*disagg-true\S* conc 2, 4$", lines[0]), lines
    assert re.match(r"^\[\d\d:\d\d:\d\d\] point 3/4: \S+ conc 2 \(ETA \d+ s\)$", lines[1]), lines
    assert len(lines) == 3


def test_predict_on_worker_processes_prints_a_line_as_each_point_finishes(tmp_path: Path) -> None:
    proc = _predict(tmp_path, str(RECIPES / "fixed-sim.yaml"), str(RECIPES / "disagg-sim.yaml"), "--duration", "3",
                    "--processes", "2")
    assert len(json.loads(proc.stdout)) == 4
    lines = proc.stderr.splitlines()
    first = r"^\[\d\d:\d\d:\d\d\] predicting 4 points of 3 jobs on 2 worker processes$"
    assert re.match(first, lines[0]), lines
    done = [line for line in lines if " done: " in line]
    # the aggregated jobs' points one by one, the disaggregated job's two concurrencies (one deployment) together
    assert sorted(re.sub(r"^\[\d\d:\d\d:\d\d\] points? \S+ done: \S+ (conc [\d, ]+?)( \(.*\))?$", r"\1", line)
                  for line in done) == ["conc 2", "conc 2, 4", "conc 4"], done
    counts = [re.search(r" points? (\S+) done", line).group(1) for line in done]  # type: ignore[union-attr]
    assert counts[-1].endswith("4/4") and "(" not in done[-1], done
    # three units on two workers: once one is done, every unit left runs, and no ETA is promised for them
    assert [re.sub(r".* \((\d units?) still running\)$", r"\1", line) for line in done[:-1]] == ["2 units", "1 unit"], \
        done
