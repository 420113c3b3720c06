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


def _mooncake(tmp_path: Path, image: str, args: str) -> list[tuple[int | None, str, str]]:
    """The recipe's HiCache arm on the mooncake storage backend, with `args` for its two HiCache settings."""
    path = tmp_path / "r.yaml"
    text = RECIPE.replace("IMAGE", image).replace("{ name: hicache }", "{ name: mooncake }").replace(
        "      --hicache-io-backend: kernel\n      --hicache-mem-layout: page_first\n", args)
    path.write_text(text, encoding="utf-8")
    return [(f.line, f.message, f.evidence or "") for f in validate_files([path]).findings
            if f.rule == "engine.known-incompatibility"]


def test_a_mooncake_hicache_arm_of_an_old_sglang_runs_the_faulting_page_first_layout(tmp_path: Path) -> None:
    """Through SGLang 0.5.13 the layout defaults to layer_first, which the mooncake storage backend does not take:
    ServerArgs._handle_hicache launches it as page_first on the kernel I/O backend, the pair that faults on ROCm
    Qwen3.5. Matched against the parser's defaults alone, the arm validated clean."""
    image = "lmsysorg/sglang-rocm:v0.5.12-rocm720-mi35x-20260101"
    found = _mooncake(tmp_path, image, "      --page-size: 1\n")
    assert len(found) == 1, found
    message = found[0][1]
    assert "kernel I/O backend and page_first" in message
    assert ("SGLang launches --hicache-mem-layout (unset: sglang 0.5.12's default layer_first) as page_first: the "
            "mooncake storage backend takes no layer_first layout") in message
    assert "--hicache-io-backend is unset, so sglang 0.5.12 launches with its default kernel" in message
    # the same arm on the host tier alone keeps layer_first, which does not fault
    path = tmp_path / "h.yaml"
    path.write_text(RECIPE.replace("IMAGE", image).replace(
        "      --hicache-io-backend: kernel\n      --hicache-mem-layout: page_first\n", "      --page-size: 1\n"),
        encoding="utf-8")
    assert not [f for f in validate_files([path]).findings if f.rule == "engine.known-incompatibility"]


def test_a_mooncake_hicache_arm_is_matched_at_the_layout_sglang_runs_not_the_one_written(tmp_path: Path) -> None:
    """direct / layer_first is rejected for Qwen3.5 on ROCm 0.5.16, but with the mooncake storage backend SGLang runs
    layer_first as page_first_direct: not the rejected pair, so not refused."""
    image = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi35x-20260730"
    pair = "      --hicache-io-backend: direct\n      --hicache-mem-layout: layer_first\n"
    assert _mooncake(tmp_path, image, pair) == []
    path = tmp_path / "h.yaml"
    path.write_text(RECIPE.replace("IMAGE", image).replace(
        "      --hicache-io-backend: kernel\n      --hicache-mem-layout: page_first\n", pair), encoding="utf-8")
    assert [f.rule for f in validate_files([path]).findings if f.rule == "engine.known-incompatibility"] == [
        "engine.known-incompatibility"]


def test_sglang_runs_page_first_on_the_direct_backend_as_page_first_direct_from_0_5_4() -> None:
    """0.5.9 rewrites the pair in HiRadixCache.__init__ (its FIXME), before it sizes the host pool; 0.5.10 on in
    ServerArgs; 0.5.4 already did in HiRadixCache; 0.5.1 has no page_first_direct layout and runs page_first."""
    from llmsweep.catalog.version import Version
    from llmsweep.engines.sglang import hicache_as_launched

    args = {"enable-hierarchical-cache": True, "hicache-io-backend": "direct", "hicache-mem-layout": "page_first"}
    for version in ("0.5.4", "0.5.9", "0.5.12"):
        launched, said = hicache_as_launched(args, Version.parse(version))
        assert launched["hicache-mem-layout"] == "page_first_direct" and list(said) == ["hicache-mem-layout"], version
    assert "HiRadixCache.__init__ through 0.5.9" in said["hicache-mem-layout"]
    assert hicache_as_launched(args, Version.parse("0.5.1"))[0] == args
    assert hicache_as_launched({k: v for k, v in args.items() if k != "enable-hierarchical-cache"},
                               Version.parse("0.5.12"))[1] == {}
