"""The bench scripts the project cites as its performance evidence run end to end at their smallest sizes and print
the lines their docstrings promise (the figures themselves are measured by running them at full size, not here).

Each runs as a user runs it, a script in a subprocess; these smokes check that the ratio or summary line is there,
parses, and holds sane values (positive, finite, consistent with the arguments), so a script broken by a change
elsewhere (a typed object it still walked as a dict) fails here rather than when someone next needs its figures.
`bench/predict_speed.py` and `bench/discover_efficiency.py` have their own tests (test_predict_speed_bench.py,
test_discover_bench.py)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_run_support import cli_env

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
NUM = r"-?[\d,]+(?:\.\d+)?"


def _bench(tmp_path: Path, script: str, *args: str | Path, timeout: float = 120) -> str:
    """Run bench/`script` with `args`; its stdout, after asserting it exited 0."""
    argv = [sys.executable, str(BENCH / script), *(str(a) for a in args)]
    proc = subprocess.run(argv, env=cli_env(tmp_path), capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


@pytest.mark.timeout(150)
def test_prompt_prepare_prints_each_mode_and_the_lazy_over_prepared_ratios(tmp_path: Path) -> None:
    out = _bench(tmp_path, "prompt_prepare.py", "--concurrency", "8", "--prompts", "16", "--repeats", "1",
                 "--isl", "128", "--osl", "8")
    for mode in ("prepared", "lazy"):
        row = re.search(rf"^{mode}\s+#0: (.*)$", out, re.M)
        assert row is not None, out
        figures = {k: _num(v) for k, v in re.findall(rf"(\w+) ({NUM})", row.group(1))}
        assert _positive(figures["output_tps"]) and _positive(figures["ttft_p50_ms"]), row.group(0)
    line = re.search(r"^ratio lazy / prepared: (.*)$", out, re.M)
    assert line is not None, out
    ratios = {k: float(v) for k, v in re.findall(rf"(\w+) ({NUM})x", line.group(1))}
    # a ratio is left out only where the prepared figure is zero (the send lag can be); these never are
    assert {"ttft_p50_ms", "tpot_p50_ms", "output_tps", "client_cpu_s", "wall_s"} <= set(ratios), line.group(0)
    assert all(_positive(r) for r in ratios.values()), line.group(0)
    assert "conc 8, chat 128/8, 16 prompts" in out


@pytest.mark.timeout(150)
def test_sim_live_timing_prints_observed_ttft_and_itl_per_concurrency(tmp_path: Path) -> None:
    out = _bench(tmp_path, "sim_live_timing.py", "--conc", "1", "4", "--tokens", "16", "--ttft-ms", "20",
                 "--itl-ms", "2")
    rows = re.findall(rf"^conc +(\d+): TTFT mean +({NUM}) ms \(configured 20\.0 \+ queueing\) \| ITL mean ({NUM}) "
                      rf"p50 ({NUM}) p99 ({NUM}) ms \(configured 2\.000\) \| (\d+)/(\d+) ok, reads stamped by the "
                      rf"kernel (\d+), by the loop (\d+) \| server CPU (\d+)%$", out, re.M)
    assert [int(r[0]) for r in rows] == [1, 4], out
    for conc, ttft, itl_mean, itl_p50, itl_p99, ok, total, kernel, loop, _cpu in rows:
        assert int(ok) == int(total) == 2 * int(conc)  # --conc c sends 2c requests, every one answered
        assert _num(ttft) >= 20 * 0.9  # the server waits its configured TTFT before the first token
        assert _positive(_num(itl_mean)) and 0 <= _num(itl_p50) <= _num(itl_p99)
        assert int(kernel) + int(loop) > 0  # every read was stamped one way or the other


@pytest.mark.timeout(330)
def test_client_ceiling_prints_a_row_per_pass_and_the_ttft_error_line(tmp_path: Path) -> None:
    # without aiperf (`--aiperf ""`, even where $LLMSWEEP_AIPERF names one): its runs cost ~30 s of CI here, and the
    # crosscheck tests already hold aiperf and our client to the same server
    rows_file = tmp_path / "rows.json"
    out = _bench(tmp_path, "client_ceiling.py", "--levels", "64", "--requests", "64", "--osl", "4", "--repeats", "1",
                 "--json", rows_file, "--aiperf", "", timeout=120)
    # one row per pass (zero compute, then TTFT 20 ms / ITL 5 ms), each at c64 with its 64 requests
    rows = re.findall(rf"^ *llmsweep\[default,w\d+\+?h?\] c64 +(\d+) req +({NUM}) req/s +({NUM}) chunk/s +client "
                      rf"+({NUM}) CPU-s .* TTFT error mean/p50/p99 +({NUM})/ *({NUM})/ *({NUM}) ms", out, re.M)
    assert len(rows) == 2, out
    for n, req_s, chunk_s, cpu, *errors in rows:
        assert int(n) == 64 and _positive(_num(req_s)) and _positive(_num(chunk_s)) and _positive(_num(cpu))
        assert all(math.isfinite(_num(e)) for e in errors)
    final = out.split("== llmsweep (default) against aiperf, TTFT 20 ms / ITL 5 ms server")
    assert len(final) == 2, out
    versus = re.fullmatch(rf"; load average [^\n]*\nc64 mean TTFT error: llmsweep ({NUM}) ms \(median of 1, "
                          rf"({NUM})-({NUM}); machine wakes late ({NUM}) ms on average\), aiperf (.*)\n", final[1])
    assert versus is not None, final[1]
    assert math.isfinite(_num(versus.group(1))) and _num(versus.group(4)) >= 0
    assert versus.group(5) == "not run"
    zero, timed = (r for r in json.loads(rows_file.read_text()) if r["client"] == "llmsweep")
    assert zero["requests"] == timed["requests"] == 64 and zero["failed"] == timed["failed"] == 0
    # what each server was told to serve: TTFT 20 ms (read on the wall clock, hence the slack), and none
    assert timed["ttft_served_mean_ms"] >= 20 * 0.95 and zero["ttft_served_mean_ms"] < timed["ttft_served_mean_ms"]
    assert timed["workers"] >= 1


@pytest.mark.timeout(150)
def test_summarize_scale_prints_the_pass_and_its_ratio_to_a_baseline(tmp_path: Path) -> None:
    # the baseline is a src directory (this tree's), so the smoke needs no git history; its ratio is then ~1
    out = _bench(tmp_path, "summarize_scale.py", "--records", "2000", "--cache", tmp_path / "cache",
                 "--baseline", ROOT / "src")
    file = re.search(rf"^file: 2,000 records, ({NUM}) GB \(({NUM}) B per record\)", out, re.M)
    assert file is not None, out
    # the default --max-isl keeps the AgentX corpus at 1/8 of its token counts, answers included: ~5 KB a record
    # (the docstring's 5.1 GB per million), not the ~39 KB of full-length answers
    assert 1_000 < _num(file.group(2)) < 10_000, file.group(0)
    this = re.search(rf"^summarise: ({NUM}) s wall, ({NUM}) CPU-s .* -> ({NUM}) MB whole", out, re.M)
    assert this is not None, out
    assert _positive(_num(this.group(1))) and _positive(_num(this.group(2))) and _positive(_num(this.group(3)))
    counts = re.search(rf"^  successful ({NUM}), ITL gaps ({NUM}) \(p50 ({NUM}) ms, p99\.9 ({NUM}) ms\), "
                       rf"mean output ({NUM}) tokens$", out, re.M)
    assert counts is not None, out
    successful, gaps, p50, p999, mean_out = (_num(g) for g in counts.groups())
    assert 0 < successful <= 2000 and gaps > successful and 0 < p50 <= p999
    assert mean_out < 1_000  # ≈ 240 at 1/8 scale
    ratio = re.search(rf"^  -> this pass is ({NUM})x as fast \(({NUM})x less CPU\) in ({NUM})x less memory$", out,
                      re.M)
    assert ratio is not None, out
    assert all(_positive(_num(g)) for g in ratio.groups())
    assert (tmp_path / "cache").is_dir() and any((tmp_path / "cache").iterdir())


def test_disagg_vs_agg_prints_the_four_deployments_per_point(tmp_path: Path) -> None:
    out = _bench(tmp_path, "disagg_vs_agg.py", "--isl", "256", "--conc", "2", "--per-lane", "1", "--osl", "16")
    assert re.search(r"^ +isl +conc +agg +1p1d_nic +1p1d_nvlink +2p1d_nic$", out, re.M), out
    row = re.search(r"^ +256 +2 (.*)$", out, re.M)
    assert row is not None, out
    cells = re.findall(rf"({NUM}) / +({NUM}), +({NUM})(?: \[({NUM})\])?", row.group(1))
    assert len(cells) == 4, row.group(0)
    for ttft, tpot, tps, _transfer in cells:
        assert _positive(_num(ttft)) and _positive(_num(tpot)) and _positive(_num(tps))
    transfers = [_num(c[3]) for c in cells[1:]]
    assert cells[0][3] == "" and all(_positive(t) for t in transfers)  # only the disaggregated ones move KV
    assert transfers[1] < transfers[0]  # over the scale-up link sooner than over the NIC
