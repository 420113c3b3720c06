"""`llmsweep sim calibrate` says so, loudly, when the points of one calibration key come from runs whose recorded
machines differ (the server's host CPU, its GPUs' power limits): one set of factors fits their average, neither
machine (three "NVIDIA H100 80GB HBM3" hosts of one driver measured one vLLM recipe up to 42 % apart, 2026-12-05).
A warning line on stderr before the fit, one under its table, and `mixed_machines` in `--json`, each naming the runs
and the values; points that recorded neither (evidence older than the fields) are not flagged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llmsweep.cli.sim import _config_for_job
from llmsweep.cli.sim import calibrate as calibrate_cmd
from llmsweep.sim.calibrate import measured_groups, mixed_machines

REPO = Path(__file__).resolve().parents[3]
REHEARSAL = REPO / "tests" / "data" / "calib-rehearsal-qwen3next"  # measured over HTTP (source: measured)
XEON = "Intel(R) Xeon(R) Platinum 8480+"
EPYC = "AMD EPYC 9654 96-Core Processor"
KEY = "vllm/h200/hybrid-moe-tiny+mtp/bf16/tp1/kv-bf16"

pytestmark = pytest.mark.usefixtures("user_catalog")


def _copy(tmp_path: Path, name: str, hardware: dict[str, Any] | None) -> Path:
    """The committed rehearsal run's conc 1 and 4 points copied as run `name` (its own run id), each summary's
    recorded hardware updated with `hardware` (None: as committed, before the fields existed)."""
    run = tmp_path / name
    for job in sorted((REHEARSAL / "jobs").glob("qwen3.5_*_conc[14]_*")):
        shutil.copytree(job, run / "jobs" / job.name)
        if hardware is not None:
            path = run / "jobs" / job.name / "summary.json"
            summary = json.loads(path.read_text())
            summary["provenance"]["hardware"].update(hardware)
            path.write_text(json.dumps(summary))
    doc = json.loads((REHEARSAL / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**doc, "run_id": f"run-{name}"}))
    return run


def _host(cpu: str, limit_w: float = 700.0) -> dict[str, Any]:
    return {"host": {"cpu_model": cpu, "logical_cpus": 16, "usable_cpus": 16, "load_avg_1m": 0.4},
            "gpu_state": [{"index": 0, "power_limit_w": limit_w, "sm_clock_max_mhz": 1980.0}]}


def test_a_fit_over_two_host_cpus_warns_naming_the_runs_and_both_cpus(tmp_path: Path) -> None:
    a, b = _copy(tmp_path, "a", _host(XEON)), _copy(tmp_path, "b", _host(EPYC))
    res = CliRunner().invoke(calibrate_cmd, [str(a), str(b), "--factors", "step_s", "--max-iter", "1", "--json"])
    assert res.exit_code == 0, res.output
    (fit,) = json.loads(res.stdout)["calibrations"]
    assert len(fit["points"]) == 6  # one key: both runs fitted together, as before, but not silently
    (line,) = fit["mixed_machines"]  # the CPUs differ; the power limits (700 W both) do not
    assert line == (f"the host CPU differs between its points: {XEON} in run-a at {a} (3 points); "
                    f"{EPYC} in run-b at {b} (3 points)")
    (said,) = [s for s in res.stderr.splitlines() if "warning:" in s]
    assert f"warning: {KEY}: {line}; one set of factors fits the machines' average" in said
    # said before the fit starts, not only after it
    lines = res.stderr.splitlines()
    assert lines.index(said) < next(i for i, s in enumerate(lines) if "calibrating " in s)

    text = CliRunner().invoke(calibrate_cmd, [str(a), str(b), "--factors", "step_s", "--max-iter", "1"])
    assert text.exit_code == 0, text.output
    assert f"  warning: {line}; one set of factors fits the machines' average" in text.stdout


def test_different_gpu_power_limits_are_flagged_and_older_evidence_is_not(tmp_path: Path) -> None:
    capped = _copy(tmp_path, "capped", _host(XEON, limit_w=500.0))
    full = _copy(tmp_path, "full", _host(XEON))
    older = _copy(tmp_path, "older", None)  # committed evidence: no host, no GPU state recorded

    def lines(*runs: Path) -> list[str]:
        groups, skipped = measured_groups(list(runs), _config_for_job)
        (key,) = groups
        assert not skipped and key.label == KEY
        return mixed_machines(groups[key])

    (line,) = lines(capped, full)
    assert line.startswith("the GPU power limit differs between its points: 500 W in run-capped")
    assert "700 W in run-full" in line
    assert lines(full, older) == []  # absence is no difference
    assert lines(full, _copy(tmp_path, "same", _host(XEON))) == []
    two = _host(XEON)  # a point on two of the machine's GPUs, at the same limit as the one-GPU points
    two["gpu_state"] = [{**two["gpu_state"][0], "index": i} for i in (0, 1)]
    assert lines(full, _copy(tmp_path, "two", two)) == []
