"""Feature gates the engines' own sources establish: a pinned acceptance an image's engine reads as nothing."""

from __future__ import annotations

from pathlib import Path

from llmsweep.catalog.engines import check_launch
from llmsweep.policy import validate_files


def trt_agentic(image: str) -> str:
    return (f"k:\n  image: {image}\n  model: MiniMaxAI/MiniMax-M3\n  model-prefix: minimaxm3\n"
            "  runner: cluster:h200-cw\n  precision: fp8\n  framework: trt\n  multinode: false\n  scenarios:\n"
            "    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n"
            "      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [8] }\n"
            "  serve:\n    spec-decoding:\n"
            "      { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3-GQA }\n")


def test_a_fractional_forced_acceptance_is_flagged_on_a_tensorrt_llm_that_reads_it_as_an_integer(
        tmp_path: Path) -> None:
    """Before NVIDIA/TensorRT-LLM#13569 `TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=1.78` fails int() and TensorRT-LLM
    falls back to 0 with a log line: the run measures real acceptance under a pinned-AL label."""
    file = tmp_path / "trt.yaml"
    file.write_text(trt_agentic("nvcr.io/nvidia/tensorrt-llm/release:1.2.0"))
    hits = [f for f in validate_files([file]).findings if f.rule == "engine.feature-gate"]
    assert any("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS" in f.message for f in hits), [f.render() for f in hits]
    later = check_launch("trtllm", "1.3.0rc14", env={"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "1.78"}, args={},
                         speculative_config=None)
    assert all(v.honoured is not False for v in later)
