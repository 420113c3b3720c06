"""An eval-only job of a speculative configuration, run on the simulator with real lm-eval: what its result says
served is what served — the method at K, nothing pinned, the simulator's typical acceptance realised over the eval,
read back from its /metrics and recorded as the simulator's estimate.

Needs lm-eval[api]==0.4.13 in its own environment (`LLMSWEEP_LM_EVAL`); skips cleanly without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.recipes import Served, recipe_text

from llmsweep.execute.readback import ReadbackSettings, acceptance_allowance
from llmsweep.sim.config import typical_acceptance

LM_EVAL = os.environ.get("LLMSWEEP_LM_EVAL")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not LM_EVAL or not Path(LM_EVAL).is_file(),
                                 reason="needs lm-eval (set LLMSWEEP_LM_EVAL to a Python with lm-eval[api]==0.4.13)")]

RECIPE = (recipe_text(framework="sglang", image="lmsysorg/sglang:v0.5.16-cu129", runner="b200",
                      served=Served("llmsweep/qwen3-next-small", "qwen3-next-mini", "bf16"), key="spec-eval-sim",
                      isl=8192, osl=1024, tp=1, concs="[16]", arm=", spec-decoding: mtp", engine="name: sim")
          + "    spec-decoding: { method: eagle, num-steps: 3, topk: 1, num-draft-tokens: 4 }\n")


def test_a_speculative_eval_only_job_serves_and_records_the_simulators_estimate(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(RECIPE, encoding="utf-8")
    rows = [{"question": f"What is {i} + 3?", "answer": f"{i} + 3 = {i + 3}\n#### {i + 3}"} for i in range(8)]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env = {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", "r.yaml", "--evals-only", "--out", "out",
                           "--no-report", "--eval-dataset", "q.jsonl", "--eval-limit", "2", "--eval-max-tokens", "16"],
                          env=env, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]  # the eval ran, and its score is below the threshold
    (job_dir,) = (tmp_path / "out" / "jobs").iterdir()
    summary = json.loads((job_dir / "summary.json").read_text())
    served = (job_dir / "server_command.txt").read_text().splitlines()[-1]
    assert "--spec-method eagle --spec-k 3" in served and "--acceptance-length" not in served, served
    estimate = typical_acceptance("eagle", 3)
    assert summary["provenance"]["acceptance"]["value"] == estimate
    assert summary["provenance"]["acceptance"]["source"] == "estimate"
    read_back = summary["eval"]["acceptance_length"]  # what the server realised over the eval
    # realised over the eval's few verify steps (2 questions of at most 16 tokens): within the sampling error the
    # read-back gate allows around the estimate (a fixed 0.1 failed under load, where batching orders the draws)
    steps = summary["server_metrics"]["spec_decode"]["verify_steps"]
    assert steps, summary["server_metrics"]["spec_decode"]  # drafted: the bound below is finite
    _, allowed = acceptance_allowance(estimate, 3, steps, ReadbackSettings())
    assert read_back is not None and abs(read_back - estimate) <= allowed, (read_back, estimate, steps, allowed)
    assert summary["server_metrics"]["spec_decode"]["acceptance_length"] == read_back
