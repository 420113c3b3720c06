"""The side-by-side table: how a difference between the clients splits into definition and measurement, and when the
repeats call it a disagreement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmsweep.metrics.model import Summary
from llmsweep.peers.crosscheck import (
    ClientRun,
    CrossCheck,
    compare,
    levels,
    load_crosscheck,
    markdown,
    write_crosscheck,
)


def summary(ttft_p50: float, tpot_p50: float, output_tps: float, *, ok: int = 32) -> Summary:
    return Summary.model_validate({
        "requests": {"successful": ok, "failed": 0, "output_length_mismatch": 0},
        "latency": {"ttft": {"p50": ttft_p50}, "tpot": {"p50": tpot_p50}},
        "throughput": {"output_tps": output_tps, "request_rps": output_tps / 256},
        "tokens": {"input": {"mean": 1029.0}, "output": {"mean": 256.0}},
        "cache": {"observed_hit_rate": 0.0},
        "client_health": {"schedule_lag_s": {"p50": 0.001}},
    })


def own(ttft_p50: float, tpot_p50: float, output_tps: float) -> dict[str, Any]:
    return {"latency": {"ttft": {"p50": ttft_p50}, "tpot": {"p50": tpot_p50}, "itl": {}, "e2el": {}},
            "throughput": {"output_tps": output_tps, "request_rps": None}}


def run(client: str, repeat: int, s: Summary | None, o: dict[str, Any] | None = None, **kw: Any) -> ClientRun:
    return ClientRun(client=client, concurrency=8, repeat=repeat, seed=repeat, out_dir=f"c8/{client}-{repeat}",  # type: ignore[arg-type]
                     summary=s, own=o, **kw)


def row(rows: list[Any], figure: str) -> Any:
    return next(r for r in rows if r.figure == figure)


def test_a_difference_in_definitions_is_not_a_difference_in_measurement() -> None:
    runs = [run("llmsweep", 0, summary(0.050, 0.0030, 2000)), run("aiperf", 0, summary(0.051, 0.0030, 1990),
                                                                  own(0.051, 0.0030, 1900)),
            run("llmsweep", 1, summary(0.052, 0.0031, 2020)), run("aiperf", 1, summary(0.050, 0.0031, 2010),
                                                                  own(0.050, 0.0031, 1920))]
    rows = compare(runs)
    tput = row(rows, "output tok/s")
    assert tput.llmsweep == pytest.approx(2010) and tput.aiperf_ours == pytest.approx(2000)
    assert tput.aiperf_own == pytest.approx(1910)
    assert tput.definition_pct == pytest.approx(100 * (1910 - 2000) / 2000)  # aiperf's own vs its records, ours
    assert tput.measurement_pct == pytest.approx(100 * (2000 - 2010) / 2010)  # its records vs our client
    assert tput.verdict == "agree"  # -0.5 % against repeats that move by 1 %
    ttft = row(rows, "TTFT p50")
    assert ttft.llmsweep == pytest.approx(51.0) and ttft.unit == "ms" and ttft.definition_pct == pytest.approx(0)
    assert row(rows, "TTFT mean").verdict == "not measured"  # no client reported it


def test_the_servers_own_figures_show_how_much_of_a_gap_the_server_made() -> None:
    def srv(tpot: float) -> dict[str, Any]:
        return {"ttft_mean_s": None, "tpot_mean_s": tpot, "itl_mean_s": None, "e2el_mean_s": None}

    runs = [run("llmsweep", r, summary(0.05, 0.0020, 2000), server=srv(0.0020)) for r in range(2)]
    runs += [run("aiperf", r, summary(0.05, 0.0022, 1900), own(0.05, 0.0022, 1900), server=srv(0.00218))
             for r in range(2)]
    for r in runs:
        assert r.summary is not None
        r.summary.latency.tpot.mean = r.summary.latency.tpot.p50
    tpot = row(compare(runs), "TPOT mean")
    assert tpot.measurement_pct == pytest.approx(10.0) and tpot.server_pct == pytest.approx(9.0)
    assert (tpot.server_llmsweep, tpot.server_aiperf) == (pytest.approx(2.0), pytest.approx(2.18))
    assert row(compare(runs), "TTFT p50").server_pct is None  # the server keeps means only


def test_a_gap_the_repeats_cannot_explain_is_a_disagreement() -> None:
    runs = [run("llmsweep", r, summary(0.050 + 0.0002 * r, 0.0030, 2000 + r)) for r in range(3)]
    runs += [run("aiperf", r, summary(0.080 + 0.0002 * r, 0.0030, 2000 - r), own(0.080, 0.0030, 2000))
             for r in range(3)]
    ttft = row(compare(runs), "TTFT p50")
    assert ttft.measurement_pct == pytest.approx(100 * (80.2 - 50.2) / 50.2)
    assert ttft.band_pct is not None and ttft.band_pct < 5 and ttft.verdict == "differ"


def test_one_run_each_has_no_band_and_a_failed_run_is_left_out_but_reported(tmp_path: Path) -> None:
    runs = [run("llmsweep", 0, summary(0.05, 0.003, 2000)),
            run("aiperf", 0, summary(0.05, 0.003, 2000), own(0.05, 0.003, 2000)),
            run("aiperf", 1, None, error="aiperf exited 1 (see aiperf.log)")]
    rows = compare(runs)
    assert {r.verdict for r in rows if r.llmsweep is not None} == {"no repeats"}
    lv = {x["client"]: x for x in levels(runs)}
    assert lv["aiperf"]["runs"] == 2 and lv["aiperf"]["successful"] == 32
    assert lv["aiperf"]["errors"] == ["aiperf exited 1 (see aiperf.log)"]
    check = CrossCheck(config={"endpoint": {"base_url": "http://h", "model": "m"}, "isl": 1024, "osl": 256,
                               "repeats": 2}, runs=runs)
    write_crosscheck(check, tmp_path)
    again = load_crosscheck(tmp_path)
    assert again.rows == check.rows and again.levels == check.levels  # the table is recomputed from the runs
    text = (tmp_path / "crosscheck.md").read_text()
    assert text == markdown(again) and "aiperf exited 1" in text and "| 8 | TTFT p50 (ms) | 50.00 |" in text


def test_a_cross_check_file_saved_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    """A cross-check folder copied through a Windows editor: crosscheck.json starts with a UTF-8 byte-order mark,
    which had made it 'not JSON'. It reads as the file without the mark."""
    check = _check(4)
    write_crosscheck(check, tmp_path)
    path = tmp_path / "crosscheck.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_crosscheck(tmp_path).rows == check.rows


def test_the_committed_h200_cross_check_is_its_own_table() -> None:
    """examples/results/h200-crosscheck-vllm-0.26.0: the table in the repository is what its runs give today."""
    evidence = Path(__file__).resolve().parents[3] / "examples" / "results" / "h200-crosscheck-vllm-0.26.0"
    check = load_crosscheck(evidence)
    assert len(check.runs) == 24 and [r.client for r in check.runs if r.error] == ["aiperf"]  # cut by the deadline
    assert markdown(check) == (evidence / "crosscheck.md").read_text()


def _check(n_runs: int) -> CrossCheck:
    runs = [run("llmsweep" if i % 2 == 0 else "aiperf", i // 2, summary(0.05, 0.003, 2000),
                own(0.05, 0.003, 2000) if i % 2 else None) for i in range(n_runs)]
    return CrossCheck(config={"endpoint": {"base_url": "http://h", "model": "m"}, "isl": 1024, "osl": 256,
                              "repeats": 2}, runs=runs)


def test_a_damaged_cross_check_file_is_named_with_a_fix_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.cli import run_main

    write_crosscheck(_check(2), tmp_path)
    whole = (tmp_path / "crosscheck.json").read_text()
    for damage in (whole[: len(whole) // 2], "[]", '{"config": {}, "runs": [{"x": 1}]}', '{"config": {}, "runs": []}',
                   whole.replace('"schema_version": 2', '"schema_version": 99')):
        (tmp_path / "crosscheck.json").write_text(damage)
        code, out, err = run_main(capsys, "peer", "table", tmp_path, "--json")
        assert code == 2 and out == "", err
        assert "crosscheck.json: not " in err and "fix:" in err, err


KILLED_WRITER = """
import pathlib, sys, time
sys.path.insert(0, sys.argv[2])
from test_crosscheck_compare import _check
from llmsweep.peers.crosscheck import write_crosscheck

class SlowFile:  # a slow disk: half the text is on it when the kill comes
    def __init__(self, fh):
        self.fh = fh
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.fh.close()
    def write(self, data):
        self.fh.write(data[: len(data) // 2])
        self.fh.flush()
        print("half", flush=True)
        time.sleep(60)
        return self.fh.write(data[len(data) // 2:])

real_open = pathlib.Path.open
pathlib.Path.open = lambda self, mode="r", *a, **k: (SlowFile(real_open(self, mode, *a, **k)) if "w" in mode
                                                     else real_open(self, mode, *a, **k))
write_crosscheck(_check(4), pathlib.Path(sys.argv[1]))
"""


def test_a_cross_check_killed_while_writing_keeps_a_readable_table(tmp_path: Path) -> None:
    """crosscheck.json is rewritten after every run ("a cross-check stopped half way keeps its table"); a kill while
    it was being written (the GPU script's `timeout -k`, an OOM kill) left it cut short and the cross-check
    unreadable. Now the old table stays until the new one is whole."""
    import os
    import subprocess
    import sys

    here = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                       os.environ.get("PYTHONPATH", "")])}
    write_crosscheck(_check(2), tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path), here], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "half"
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert len(load_crosscheck(tmp_path).runs) == 2  # the table of the runs before, whole
    assert (tmp_path / "crosscheck.md").read_text() == markdown(load_crosscheck(tmp_path))


def test_a_run_without_a_successful_request_says_so_in_the_errors_column() -> None:
    """The progress line said `no successful request` of a run every request of which failed, while the table's errors
    column said `—`: the two now say the same."""
    runs = [run("llmsweep", 0, summary(0.0, 0.0, 0.0, ok=0)), run("aiperf", 0, summary(0.05, 0.003, 2000))]
    assert runs[0].problem == "no successful request" and runs[1].problem is None
    lv = {x["client"]: x for x in levels(runs)}
    assert lv["llmsweep"]["errors"] == ["no successful request"] and lv["aiperf"]["errors"] == []
    check = CrossCheck(config={"endpoint": {"base_url": "http://h", "model": "m"}, "isl": 1, "osl": 1, "repeats": 1},
                       runs=runs)
    assert "| 8 | llmsweep | 0 / 0 |" in markdown(check) and "| no successful request |" in markdown(check)


def test_an_interrupted_cross_check_says_which_runs_never_ran_and_reads_back_the_same(tmp_path: Path) -> None:
    """Stopped during llmsweep's second run at conc 8 of levels 8 and 16, 2 repeats: that run is compared with nothing
    (its summary is invalid), and the runs never started are counted as not run, per level and client."""
    stopped = run("llmsweep", 1, summary(0.07, 0.005, 1000, ok=3), interrupted=True, error="interrupted by SIGINT: …")
    runs = [run("llmsweep", 0, summary(0.05, 0.003, 2000)),
            run("aiperf", 0, summary(0.05, 0.003, 2000), own(0.05, 0.003, 2000)), stopped]
    assert not stopped.ok
    check = CrossCheck(config={"endpoint": {"base_url": "http://h", "model": "m"}, "isl": 1, "osl": 1, "repeats": 2,
                               "concurrencies": [8, 16]}, runs=runs, interrupted="SIGINT")
    lv = {(x["concurrency"], x["client"]): x for x in check.levels}
    order = ((8, "llmsweep"), (8, "aiperf"), (16, "llmsweep"), (16, "aiperf"))
    assert [lv[k]["not_run"] for k in order] == [0, 1, 2, 2]
    assert lv[(8, "llmsweep")]["successful"] == 32 + 3  # the stopped run's requests are counted, as it measured them
    assert row(check.rows, "TTFT p50").llmsweep == pytest.approx(50.0)  # the first run's alone
    assert {r.verdict for r in check.rows if r.concurrency == 16} == {"not run"}
    text = markdown(check)
    assert "Interrupted by SIGINT: 3 of 8 runs started, 5 not run;" in text
    assert "| 8 | aiperf | 32 / 0 |" in text and "| 1 of 2 runs not run |" in text and "| 16 | aiperf | 0 / 0 |" in text
    write_crosscheck(check, tmp_path)
    again = load_crosscheck(tmp_path)
    assert again.interrupted == "SIGINT" and again.runs[2].interrupted and markdown(again) == text
