"""The ROCm HiCache kernel / page_first fault for Qwen3.5 outlived SGLang 0.5.16.

InferenceX kept its ROCm Qwen3.5 HiCache arms on direct / page_first_direct through the 0.5.17 and 0.5.18 images
(SemiAnalysisAI/InferenceX#2693, #2972), sgl-project/sglang#39358 (2026-09-14) still called kernel / page_first
"not a safe default on the current ROCm AgentX path (TP2 HiCache IMA during first prefill)", and only
SemiAnalysisAI/InferenceX#3118 (0.5.19, image 20260915) went back to it. The entry stopped at 0.5.16 and said
0.5.17 was untested, so a 0.5.18 recipe with that layout validated clean and faulted on its first prefill."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.policy import validate_files

RECIPE = """k:
  image: IMAGE
  model: amd/Qwen3.5-397B-A17B-MXFP4
  model-prefix: qwen3.5
  runner: cluster:mi355x-amds
  precision: fp4
  framework: sglang
  multinode: false
  scenarios:
    agentic-coding:
    - dram-utilization: 0.80
      search-space:
      - { tp: 4, spec-decoding: mtp, kv-offloading: dram, kv-offload-backend: { name: hicache }, conc-list: [40] }
  serve:
    spec-decoding: { method: eagle, num-steps: 3, topk: 1, num-draft-tokens: 4, thinking: "on" }
    env:
      SGLANG_ENABLE_SPEC_V2: "1"
    args:
      --hicache-io-backend: kernel
      --hicache-mem-layout: page_first
"""


def _hits(tmp_path: Path, image: str) -> list[str]:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.replace("IMAGE", image), encoding="utf-8")
    return [f.message for f in validate_files([path]).findings
            if f.rule == "engine.known-incompatibility" and "kernel I/O backend and page_first" in f.message]


@pytest.mark.parametrize("image", ["lmsysorg/sglang-rocm:v0.5.17-rocm720-mi35x-20260818",
                                   "lmsysorg/sglang-rocm:v0.5.18-rocm720-mi35x-20260829"])
def test_kernel_page_first_hicache_is_refused_on_the_0_5_17_and_0_5_18_rocm_images(tmp_path: Path,
                                                                                   image: str) -> None:
    assert _hits(tmp_path, image)


def test_kernel_page_first_hicache_is_allowed_on_the_0_5_19_image_inferencex_runs_it_on(tmp_path: Path) -> None:
    assert not _hits(tmp_path, "lmsysorg/sglang-rocm:v0.5.19-rocm720-mi35x-20260915")


def _findings(tmp_path: Path, image: str, args: str) -> list[tuple[int | None, str, str]]:
    path = tmp_path / "r.yaml"
    text = RECIPE.replace("IMAGE", image).replace(
        "      --hicache-io-backend: kernel\n      --hicache-mem-layout: page_first\n", args)
    path.write_text(text, encoding="utf-8")
    return [(f.line, f.message, f.evidence or "") for f in validate_files([path]).findings
            if f.rule == "engine.known-incompatibility"]


def test_hicache_arm_without_io_backend_or_layout_is_refused_on_0_5_18(tmp_path: Path) -> None:
    """SGLang 0.5.14-0.5.19 launch HiCache as kernel / page_first when the recipe sets neither: the faulting pair,
    which validated clean when only written flags were matched. The finding says the defaults it assumed."""
    found = _findings(tmp_path, "lmsysorg/sglang-rocm:v0.5.18-rocm720-mi35x-20260829", "      --page-size: 1\n")
    assert len(found) == 1, found
    _, message, evidence = found[0]
    assert "kernel I/O backend and page_first" in message
    assert "--hicache-io-backend is unset, so sglang 0.5.18 launches with its default kernel" in message
    assert "--hicache-mem-layout is unset, so sglang 0.5.18 launches with its default page_first" in message
    assert "ServerArgs.hicache_mem_layout" in evidence


def test_direct_io_without_layout_is_refused_where_the_default_layout_is_layer_first(tmp_path: Path) -> None:
    """Through SGLang 0.5.13 the layout defaults to layer_first: direct I/O alone is the rejected direct / layer_first
    pair, reported at the flag the recipe wrote."""
    found = _findings(tmp_path, "lmsysorg/sglang-rocm:v0.5.12-rocm720-mi35x-20260101",
                      "      --hicache-io-backend: direct\n")
    assert [(line, "direct I/O backend and layer_first" in m, "default layer_first" in m) for line, m, _ in found] \
        == [(19, True, True)]
