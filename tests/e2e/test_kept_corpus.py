"""A measured run keeps the synthetic corpus its agentic jobs replayed, and `sim calibrate` replays that file.

`llmsweep run --executor local` of the H200 recipe for the agentic calibration points
(examples/gpu/llama-1b-bf16-h200-vllm-agentic-calib.yaml, shortened), against the CPU rehearsal's `vllm` first on
PATH: a real launch path whose engine is not the simulator, so the run is measured. Its summaries record the corpus
digest, `RUN/traces/<digest>.jsonl` holds that corpus, and calibration replays it from there. A simulated run of the
same recipe keeps nothing (calibration leaves simulated points out).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from test_run_support import cli_env, cli_here, job_dirs, read_json, run_here

from llmsweep.workload.agentic import replay_corpus_digest
from llmsweep.workload.traces.kept import TRACES_DIR, kept_name

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "examples" / "gpu" / "llama-1b-bf16-h200-vllm-agentic-calib.yaml"
FLEET = REPO / "examples" / "gpu" / "fleet.yaml"
REHEARSAL = REPO / "scripts" / "gpu" / "cpu_rehearsal"


def _recipe(tmp: Path) -> Path:
    model = tmp / "llama-1b"
    synth = cli_here(["model", "synth", "llama-1b", "--out", model], cli_env(tmp))
    assert synth.returncode == 0, synth.stderr
    recipe = tmp / RECIPE.name
    text = RECIPE.read_text()
    for old, new in (("/tmp/models/llama-1b", str(model)), ("conc-list: [1, 4, 8, 16, 32]", "conc-list: [2]"),
                     ("duration: 60", "duration: 4")):
        assert old in text, old
        text = text.replace(old, new)
    recipe.write_text(text)
    return recipe


def test_a_measured_agentic_run_keeps_its_synthetic_corpus_and_calibration_replays_it(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    out = tmp_path / "out"
    here = cli_env(tmp_path)
    env = cli_env(tmp_path, PATH=f"{REHEARSAL}:{Path(sys.executable).parent}:{here['PATH']}")
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        env.pop(name, None)
    proc = run_here([recipe, "--runner-config", FLEET, "--executor", "local", "--executor-option",
                     "allow_image=true", "--out", out, "--no-report", "--power-backend", "off"], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (job,) = job_dirs(out).values()
    summary = read_json(job / "summary.json")
    assert summary["source"] == "measured"
    digest = summary["provenance"]["workload"]["corpus_digest"]
    kept = out / TRACES_DIR / kept_name(digest)
    assert kept.is_file() and [p.name for p in (out / TRACES_DIR).iterdir()] == [kept.name]
    assert replay_corpus_digest(str(kept)) == digest  # the file replays to the very traces the run recorded
    assert f"kept the synthetic trace corpus its agentic jobs replay in {kept}" in proc.stderr

    calib = cli_here(["sim", "calibrate", out, "--json", "--max-iter", "1", "--factors", "mem"], cli_env(tmp_path))
    assert calib.returncode == 0, calib.stderr[-3000:]
    (fit,) = json.loads(calib.stdout)["calibrations"]
    assert [p["label"] for p in fit["points"]] == ["agentic c2"] and not fit["left_out"]

    # the same recipe on the simulator keeps no corpus: its points are never calibrated on
    simulated = tmp_path / "simulated"
    proc = run_here([recipe, "--runner-config", FLEET, "--simulate", "--out", simulated, "--no-report"],
                    cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert job_dirs(simulated) and not (simulated / TRACES_DIR).exists()
    assert os.path.exists(simulated / "run.json")
