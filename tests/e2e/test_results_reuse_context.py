"""`run --reuse` reuses a stored result only for the corpus and the clock this run would replay and run in.

Real runs on the simulator in virtual time into one store: an agentic point replaying a trace file (`--traces
PATH`) that is regenerated in place, and a fixed-length point looked up as a `--live` (wall-clock) run would.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from test_run_support import cli_exits

from llmsweep.changes.reuse import reuse_keys
from llmsweep.plan import jobs_from_files
from llmsweep.results.store import Store

DATA = Path(__file__).resolve().parents[1] / "data" / "recipes"
RECIPE = DATA / "results" / "reuse-traces.yaml"


_cli = cli_exits


def _synth(path: Path, seed: int) -> None:
    _cli("traces", "synth", "--out", path, "--num-traces", "6", "--seed", str(seed), "--max-isl", "4096")


def _run(out: Path, store: Path, corpus: Path, *extra: str) -> tuple[dict[str, Any], str]:
    proc = _cli("run", RECIPE, "--traces", corpus, "--out", out, "--store", store, "--no-report", "--json", *extra)
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc, proc.stderr


def test_a_corpus_regenerated_at_the_same_path_is_run_again_and_run_says_why(tmp_path: Path) -> None:
    store, corpus = tmp_path / "store.sqlite", tmp_path / "traces.jsonl"
    _synth(corpus, 1)
    first, _ = _run(tmp_path / "first", store, corpus)
    assert [r["verdict"] for r in first["jobs"]] == ["valid"]

    _synth(corpus, 2)  # another corpus at the same path
    second, err = _run(tmp_path / "second", store, corpus, "--reuse")
    assert [r["verdict"] for r in second["jobs"]] == ["valid"]  # measured again, not the first run's result
    assert "not reused" in err and f"run {first['run_id']}" in err and "regenerated since" in err

    third, _ = _run(tmp_path / "third", store, corpus, "--reuse")  # the same corpus again: the second run stands
    (row,) = third["jobs"]
    assert row["reused"] and row["verdict"] == "valid" and f"run {second['run_id']}" in row["reason"]


def test_a_virtual_time_result_does_not_stand_for_a_wall_clock_run(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    store = tmp_path / "store.sqlite"
    recipe = DATA / "run" / "fixed-sim.yaml"
    doc = json.loads(_cli("run", recipe, "--out", tmp_path / "virtual", "--store", store, "--no-report",
                          "--json").stdout)
    jobs = jobs_from_files([recipe])
    virtual, live = reuse_keys(jobs, simulate=False), reuse_keys(jobs, simulate=False, live=True)
    with Store(store) as st:
        assert {r.run_id for r in st.reusable(virtual.values()).values()} == {doc["run_id"]}
        with caplog.at_level(logging.WARNING, logger="llmsweep.results.store"):
            assert st.reusable(live.values()) == {}
    assert "ran in virtual time, this run's would run in wall time" in caplog.text


def test_run_live_reruns_what_a_virtual_time_run_stored(tmp_path: Path) -> None:
    """End to end: `run --reuse --live` after a virtual-time run of the same recipe serves the simulator over HTTP
    and measures again, rather than take the virtual-time result for a wall-clock one."""
    store, recipe = tmp_path / "store.sqlite", DATA / "run" / "fixed-sim.yaml"
    first = json.loads(_cli("run", recipe, "--out", tmp_path / "virtual", "--store", store, "--no-report",
                            "--json").stdout)
    again = _cli("run", recipe, "--out", tmp_path / "live", "--store", store, "--no-report", "--json", "--reuse",
                 "--live")
    rows = json.loads(again.stdout)["jobs"]
    assert rows and not any(r["reused"] for r in rows), rows
    assert f"run {first['run_id']}" in again.stderr and "virtual time" in again.stderr
    # said as run's other lines are (timestamped), not as a raw log record (`WARNING llmsweep.results.store: …`)
    said = [line for line in again.stderr.splitlines() if "not reused: " in line and first["run_id"] in line]
    assert said and all(re.match(r"^\[\d\d:\d\d:\d\d\] not reused: ", line) for line in said), said
