"""A serve flag's value the engine's argparse refuses (`choices`) is refused at validate with a did-you-mean, before
the job waits for its node: SGLang's `--kv-cache-dtype` never takes vLLM's `fp8` (vLLM's fp8 is fp8_e4m3)."""

from __future__ import annotations

from pathlib import Path

from llmsweep.catalog.engines import flag_values
from llmsweep.findings import Severity
from llmsweep.policy import validate_files


def sglang(tmp_path: Path, image: str, value: str, flag: str = "--kv-cache-dtype") -> list:
    file = tmp_path / "r.yaml"
    file.write_text(
        f"k:\n  image: {image}\n  model: Qwen/Qwen3.5-397B-A17B-FP8\n  model-prefix: qwen3.5\n"
        "  runner: cluster:mi300x-amds\n  precision: fp8\n  framework: sglang\n  multinode: false\n  scenarios:\n"
        "    agentic-coding:\n    - dram-utilization: 0.80\n      search-space:\n"
        "      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [4] }\n  serve:\n"
        "    spec-decoding: { method: eagle, num-steps: 3, topk: 1, num-draft-tokens: 4, thinking: 'on' }\n"
        f"    args:\n      {flag}: {value}\n")
    return [f for f in validate_files([file]).findings if f.rule == "serve.flag-value"]


RELEASE = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730"


def test_vllms_fp8_on_sglang_is_refused_with_sglangs_spelling(tmp_path: Path) -> None:
    (hit,) = sglang(tmp_path, RELEASE, "fp8")
    assert hit.severity is Severity.ERROR and "did you mean `fp8_e4m3`?" in hit.message and "fp8_e4m3" in hit.fix
    (typo,) = sglang(tmp_path, RELEASE, "fp8_e4m2")
    assert "fp8_e4m3" in typo.message
    (written_joined,) = sglang(tmp_path, RELEASE, "true", flag="--kv-cache-dtype=fp8")
    assert "fp8_e4m3" in written_joined.message


def test_accepted_values_pass_and_an_unknown_version_only_warns(tmp_path: Path) -> None:
    for value in flag_values("sglang")["--kv-cache-dtype"].choices:
        assert sglang(tmp_path, RELEASE, value) == [], value
    (hit,) = sglang(tmp_path, "lmsysorg/sglang:nightly", "fp8")
    assert hit.severity is Severity.WARNING and "unknown" in hit.message


def vllm(tmp_path: Path, image: str, value: str) -> list:
    file = tmp_path / "v.yaml"
    file.write_text(
        f"k:\n  image: {image}\n  model: MiniMaxAI/MiniMax-M3\n  model-prefix: minimaxm3\n"
        "  runner: h200\n  precision: fp8\n  framework: vllm\n  multinode: false\n  scenarios:\n"
        "    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
        "      - { tp: 8, spec-decoding: none, conc-list: [4] }\n"
        f"  serve:\n    args:\n      --kv-cache-dtype: {value}\n")
    return [f for f in validate_files([file]).findings if f.rule == "serve.flag-value"]


def test_sglangs_bf16_on_vllm_names_bfloat16_and_a_later_vllm_only_warns(tmp_path: Path) -> None:
    (old,) = vllm(tmp_path, "vllm/vllm-openai:v0.11.0", "bf16")
    assert old.severity is Severity.ERROR and "did you mean `bfloat16`?" in old.message
    (later,) = vllm(tmp_path, "vllm/vllm-openai:v0.26.0", "bf16")
    assert later.severity is Severity.WARNING and "newer than 0.16.0" in later.message
    assert vllm(tmp_path, "vllm/vllm-openai:v0.26.0", "fp8") == []
