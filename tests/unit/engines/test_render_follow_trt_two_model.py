"""TensorRT-LLM's two-model speculative paths read TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS with int() even after
NVIDIA/TensorRT-LLM#13569 (tensorrt_llm/_torch/speculative/interface.py, get_force_num_accepted_tokens: "the two-model
path in TorchSampler"): a fractional pin there is read as 0 and real acceptance is measured under the pinned label.
Such a job is refused at validate; an integral AL − 1 and the one-model paths still launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.errors import ConfigError
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files


def trt(tmp_path: Path, method: str, al: float, *, arm: str = "draft_model", draft: str = "Qwen/Qwen3-0.6B") -> Path:
    draft_line = f", draft-model: {draft}" if draft else ""
    file = tmp_path / f"{method}-{al}.yaml"
    file.write_text(
        "k:\n  image: nvcr.io/nvidia/tensorrt-llm/release:1.3.0\n  model: MiniMaxAI/MiniMax-M3\n"
        "  model-prefix: minimaxm3\n  runner: cluster:h200-cw\n  precision: fp8\n  framework: trt\n"
        "  multinode: false\n  scenarios:\n    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n"
        f"      - {{ tp: 8, spec-decoding: {arm}, kv-offloading: none, conc-list: [8] }}\n  serve:\n"
        f"    spec-decoding: {{ method: {method}, num-steps: 3{draft_line}, acceptance-length: {al}, "
        "acceptance-length-source: 'https://example.org/run' }\n")
    return file


@pytest.mark.parametrize(("method", "draft"), [("draft_model", "Qwen/Qwen3-0.6B"), ("ngram", "")])
def test_a_fractional_pin_on_a_two_model_path_is_refused(tmp_path: Path, method: str, draft: str) -> None:
    file = trt(tmp_path, method, 2.5, draft=draft)
    hits = [f for f in validate_files([file]).findings if f.rule == "serve.render-failed"]
    assert len(hits) == 1 and hits[0].severity.value == "error", [f.render() for f in hits]
    assert "as an integer" in hits[0].message and "1.5" in hits[0].message
    (job,) = jobs_from_files([file])
    with pytest.raises(ConfigError, match="two-model"):
        engines.render(job)


def test_a_whole_forced_count_and_the_one_model_paths_launch(tmp_path: Path) -> None:
    (job,) = jobs_from_files([trt(tmp_path, "draft_model", 3.0)])
    assert engines.render(job).env["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"] == "2"
    (eagle,) = jobs_from_files([trt(tmp_path, "eagle3", 2.5, arm="mtp")])
    assert engines.render(eagle).env["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"] == "1.5"
