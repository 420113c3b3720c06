"""An SGLang job the simulator stands in for on an AMD GPU takes SGLang's own `--mem-fraction-static` and
`--chunked-prefill-size` when its recipe pins neither.

The simulator served every SGLang job at its own 0.88 and 8192. SGLang computes both per launch
(`python/sglang/srt/server_args.py` `ServerArgs._handle_gpu_memory_settings`, read in the PyPI wheels of 0.5.9,
0.5.12, 0.5.12.post1, 0.5.14, 0.5.15, 0.5.16 and 0.5.17): from 160 GiB of GPU memory a 16384-token chunk and a decode
CUDA-graph batch of 512, a reserve of `512 + 1.5 x max(chunk, 2048) + 2 x 512 + tp x pp / 8 x 1024` MiB (more with DP
attention, speculation in 0.5.9 and 0.5.12, DeepEP from 0.5.15; at least 10240), and `round((M - R) / M, 3)`.

Figures below are computed by hand from that source with M the hardware catalog's total in MiB (hbm_gb x 1e9 / 2^20):
MI300X 196,609, MI325X 262,146, MI355X 294,914.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.recipes import DSR1_FP8, QWEN35_FP8, one_job, write_recipe

from llmsweep import engines
from llmsweep.catalog.hardware import get_hardware
from llmsweep.engines import launch_memory_fraction
from llmsweep.engines.sglang_memory import (
    MIB,
    SglangLaunch,
    sglang_chunked_prefill_default,
    sglang_memory_fraction,
)
from llmsweep.execute.virtual import engine_config
from llmsweep.plan import Job, jobs_from_files

V0516 = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi35x-20260726"
V0516_MI30X = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730"


def _job(tmp_path: Path, image: str = V0516, runner: str = "mi355x", *, args: str = "", spec: str = "") -> Job:
    return one_job(tmp_path, key="frac", framework="sglang", image=image, runner=runner, tp=8, concs="[64]",
                   arm=f", spec-decoding: {spec}" if spec else "", args=args or None)


def _flag(argv: Sequence[str], flag: str) -> str | None:
    return argv[list(argv).index(flag) + 1] if flag in argv else None


def _launch(gpu: str, version: str, tp: int = 8, **kw: Any) -> SglangLaunch:
    spec = get_hardware(gpu)
    return SglangLaunch(version=version, gpu=gpu, gpu_mib=spec.hbm_bytes / MIB, rocm=spec.image_gpu_family is not None,
                        tp=tp, **kw)


@pytest.mark.parametrize(("gpu", "version", "tp", "kw", "value"), [
    # 512 + 1.5 x 16384 + 2 x 512 + 8 / 8 x 1024 = 27136 MiB
    ("mi355x", "0.5.16", 8, {}, 0.908),           # (294914 - 27136) / 294914 = 0.90799
    ("mi325x", "0.5.12", 8, {}, 0.896),           # (262146 - 27136) / 262146 = 0.89649
    ("mi300x", "0.5.12", 8, {}, 0.862),           # (196609 - 27136) / 196609 = 0.86198: below the simulator's 0.88
    ("mi355x", "0.5.12", 4, {}, 0.910),           # 26624 MiB at TP 4: 0.90972
    # speculation: 0.5.9 reserves 2048 MiB more, 0.5.12 4096 (STANDALONE 6144, NGRAM none), 0.5.14 on none
    ("mi355x", "0.5.9", 8, {"speculative_algorithm": "NEXTN"}, 0.901),         # 29184: 0.90104
    ("mi325x", "0.5.12", 8, {"speculative_algorithm": "NEXTN"}, 0.881),        # 31232: 0.88086
    ("mi355x", "0.5.12.post1", 8, {"speculative_algorithm": "STANDALONE"}, 0.887),  # 33280: 0.88715
    ("mi355x", "0.5.12", 8, {"speculative_algorithm": "NGRAM"}, 0.908),
    ("mi355x", "0.5.16", 8, {"speculative_algorithm": "NEXTN"}, 0.908),
    # DP attention over 8 ranks: + 3 x 512 x 8 + 1.5 x 512 x 8 (graph batch above 300) = 45568 MiB: 0.84549
    ("mi355x", "0.5.9", 8, {"dp_attention": 8}, 0.845),
    # DeepEP all-to-all: 2048 MiB more from 0.5.15 (29184: 0.90104), none in 0.5.14
    ("mi355x", "0.5.16", 8, {"moe_a2a_backend": "deepep"}, 0.901),
    ("mi355x", "0.5.14", 8, {"moe_a2a_backend": "deepep"}, 0.908),
    # a pinned 8192-token chunk: 512 + 12288 + 1024 + 1024 = 14848 MiB: 0.94965
    ("mi355x", "0.5.16", 8, {"chunked_prefill_size": 8192}, 0.950),
    # a pinned 2048-token chunk at TP 1: 512 + 3072 + 1024 + 128 = 4736, lifted to the 10240 floor: 0.96528
    ("mi355x", "0.5.17", 1, {"chunked_prefill_size": 2048}, 0.965),
    # the recipe's aiter attention backend at a context above 8192: x 0.85 after rounding
    ("mi355x", "0.5.16", 8, {"attention_backend": "aiter", "context_len": 131072}, 0.908 * 0.85),
    ("mi355x", "0.5.16", 8, {"attention_backend": "aiter", "context_len": 8192}, 0.908),
])
def test_sglang_s_fraction_by_hand(gpu: str, version: str, tp: int, kw: dict[str, Any], value: float) -> None:
    assert sglang_memory_fraction(_launch(gpu, version, tp, **kw)) == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize(("gpu", "version"), [("h200", "0.5.16"), ("b200", "0.5.12"), ("mi355x", "0.5.15.post1"),
                                              ("mi355x", "0.5.8")])
def test_not_reproduced_on_cuda_or_for_a_release_not_read(gpu: str, version: str) -> None:
    assert sglang_memory_fraction(_launch(gpu, version)) is None


def test_the_chunk_bands() -> None:
    assert [sglang_chunked_prefill_default(get_hardware(g).hbm_bytes / MIB)
            for g in ("h100", "h200", "mi300x", "mi325x", "mi355x", "b200")] == [8192, 8192, 16384, 16384, 16384, 16384]


def test_an_mi355x_sglang_0_5_16_launch_takes_sglang_s_fraction_and_chunk(tmp_path: Path) -> None:
    spec = engines.render(_job(tmp_path), simulate=True)
    assert _flag(spec.argv, "--mem-fraction-static") == "0.908", spec.argv
    assert _flag(spec.argv, "--chunked-prefill-size") == "16384", spec.argv
    config = engine_config(spec)
    assert (config.mem_fraction_static, config.chunked_prefill_size) == (0.908, 16384)
    (note,) = [n for n in spec.notes if n.startswith("memory fraction")]
    assert "SGLang 0.5.16's own when --mem-fraction-static is unset" in note, note
    assert "ServerArgs._handle_gpu_memory_settings does for mi355x (294914 MiB) at TP 8" in note, note
    assert "= 27136 MiB" in note and "not applied: SGLang's x 0.85" in note and "context 2304" in note, note
    (chunk,) = [n for n in spec.notes if n.startswith("chunked prefill size")]
    assert "chunked prefill size 16384: SGLang 0.5.16's default when --chunked-prefill-size is unset" in chunk, chunk


def test_an_mtp_job_at_0_5_12_reserves_for_its_draft(tmp_path: Path) -> None:
    """MTP is SGLang's NEXTN: 0.5.12 reserves 4096 MiB more on an MI325X at TP 8 (31232 MiB: 0.881)."""
    spec = engines.render(_job(tmp_path, "lmsysorg/sglang:v0.5.12-rocm700-mi30x", "mi325x", spec="mtp"),
                          simulate=True)
    assert _flag(spec.argv, "--mem-fraction-static") == "0.881", spec.argv


def test_the_policy_reads_the_same_fraction_and_names_its_source(tmp_path: Path) -> None:
    fraction = launch_memory_fraction(_job(tmp_path))
    assert fraction is not None and fraction.origin == "engine"
    assert fraction.describe() == ("0.908, SGLang 0.5.16's ServerArgs._handle_gpu_memory_settings for mi355x "
                                   "(294914 MiB) at TP 8")


@pytest.mark.parametrize("args", ["--mem-fraction-static: 0.8", "--mem-frac: 0.8"])
def test_a_pinned_fraction_wins(tmp_path: Path, args: str) -> None:
    spec = engines.render(_job(tmp_path, args=args), simulate=True)
    assert _flag(spec.argv, "--mem-fraction-static") == "0.8", spec.argv
    assert not [n for n in spec.notes if n.startswith("memory fraction")]


def test_a_pinned_chunk_wins_and_sizes_the_fraction(tmp_path: Path) -> None:
    """4096 tokens: 512 + 6144 + 1024 + 1024 = 8704 MiB, lifted to the 10240 floor: 0.965."""
    spec = engines.render(_job(tmp_path, args="--chunked-prefill-size: 4096"), simulate=True)
    assert _flag(spec.argv, "--chunked-prefill-size") == "4096", spec.argv
    assert _flag(spec.argv, "--mem-fraction-static") == "0.965", spec.argv
    assert not [n for n in spec.notes if n.startswith("chunked prefill size")]


@pytest.mark.parametrize(("image", "why"), [
    ("lmsysorg/sglang:latest", "for an image that names no version"),
    ("lmsysorg/sglang:v0.5.8-rocm700-mi35x", "for version 0.5.8"),
])
def test_an_unversioned_or_unread_image_keeps_0_88_and_8192(tmp_path: Path, image: str, why: str) -> None:
    job = _job(tmp_path, image)
    spec = engines.render(job, simulate=True)
    assert _flag(spec.argv, "--mem-fraction-static") is None, spec.argv
    assert _flag(spec.argv, "--chunked-prefill-size") is None, spec.argv
    assert (engine_config(spec).mem_fraction_static, engine_config(spec).chunked_prefill_size) == (0.88, 8192)
    fraction = launch_memory_fraction(job)
    assert fraction is not None and fraction.origin == "unestablished"
    assert f"SGLang's default {why}" in fraction.source and "the simulator's 0.88" in fraction.source, fraction.source


def test_an_h200_launch_keeps_0_88_and_8192_without_a_note(tmp_path: Path) -> None:
    """On CUDA the fraction is not reproduced; the chunk band there is the simulator's own 8192."""
    spec = engines.render(_job(tmp_path, "lmsysorg/sglang:v0.5.16", "h200"), simulate=True)
    assert _flag(spec.argv, "--mem-fraction-static") is None and _flag(spec.argv, "--chunked-prefill-size") is None
    assert not [n for n in spec.notes if n.startswith(("memory fraction", "chunked prefill size"))]


# `resources.hbm-fit` sizes the job as its engine launches it: the recipe's --context-length decides SGLang's aiter
# x 0.85 (context above 8192), and the rule read the fraction of the job as planned (its derived 2304-token context)
# while the simulator serves the launched one. DeepSeek-R1 at FP8 on an MI300X at TP 4: 671 GB / 4 = 168 GB of
# weights per GPU plus its MLA KV for 32768 tokens. SGLang 0.5.12 at TP 4 reserves 512 + 24576 + 1024 + 512 = 26624
# MiB of 196609: 0.865 of the GPU's 206 GB (178 GB) holds it; the 0.865 x 0.85 = 0.735 (152 GB) SGLang really keeps
# with aiter does not (the simulator cannot size a KV pool there either).
DSR1_MI300X = {"key": "big", "framework": "sglang", "image": "lmsysorg/sglang:v0.5.12-rocm700-mi30x",
               "served": DSR1_FP8, "runner": "mi300x", "tp": 4,
               "args": "--attention-backend: aiter, --context-length: 32768"}


def test_the_policy_checks_the_fraction_of_the_job_as_launched(tmp_path: Path) -> None:
    from llmsweep.engines import launched_job
    from llmsweep.policy import validate_files

    path = write_recipe(tmp_path / "big.yaml", **DSR1_MI300X)
    (job,) = jobs_from_files([path])
    launched = launch_memory_fraction(launched_job(job))
    assert launched is not None and launched.value == pytest.approx(0.865 * 0.85)
    (hit,) = [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert f"memory fraction {launched.value:g}" in hit.message, hit.message


@pytest.mark.parametrize("stated", ["0.5.16", "v0.5.16"])
def test_a_stated_version_is_found_however_the_recipe_spells_it(tmp_path: Path, stated: str) -> None:
    """Over an image that names no version, `serve.engine.version: v0.5.16` is SGLang 0.5.16 (a release read), not an
    unread `v0.5.16` that falls back to 0.88 under a label naming 0.5.16 among the releases read."""
    job = one_job(tmp_path, key="frac", framework="sglang", image="lmsysorg/sglang:latest", runner="mi355x", tp=8,
                  concs="[64]", engine=f"name: sglang, version: '{stated}'")
    fraction = launch_memory_fraction(job)
    assert fraction is not None and fraction.origin == "engine", fraction
    assert fraction.value == 0.908, fraction  # (a 2304-token context: no aiter factor)


# A multimodal checkpoint: SGLang serves Qwen3.5 and Kimi K2.5 (`…ForConditionalGeneration`, in
# `configs/model_config.py` `multimodal_model_archs` of every release read) with their vision encoder, and
# `_handle_gpu_memory_settings` multiplies the fraction it computed (not a pinned one) by
# `adjust_mem_fraction_for_vlm`'s 0.95 x (1 - 0.1 x (L x H^2 / (24 x 1024^2) - 1)), clamped to [0.8, 1.05] — unless
# `--language-only`, and from 0.5.17 not on a disaggregated decode worker. Qwen3.5's vision_config names `depth`, not
# `num_hidden_layers`: SGLang takes 24.
@pytest.mark.parametrize(("architecture", "layers", "hidden", "factor"), [
    ("Qwen3_5MoeForConditionalGeneration", None, 1152, 0.95 * (1 - 0.1 * (1152**2 / 1024**2 - 1))),  # 0.924766
    ("KimiK25ForConditionalGeneration", 27, 1152, 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))),  # 0.909736
    ("KimiK25ForConditionalGeneration", 48, 2048, 0.95 * 0.8),  # a tower 8x the baseline's: clamped at 0.8
])
def test_sglang_s_vision_headroom_by_hand(architecture: str, layers: int | None, hidden: int, factor: float) -> None:
    launch = _launch("mi300x", "0.5.16", architecture=architecture, vision_layers=layers, vision_hidden=hidden)
    assert launch.vlm_factor() == pytest.approx(factor)
    assert sglang_memory_fraction(launch) == pytest.approx(0.862 * factor)
    for kw in ({"language_only": True}, {"disaggregated": True, "version": "0.5.17"}):
        other = _launch("mi300x", str(kw.pop("version", "0.5.16")), architecture=architecture, vision_layers=layers,
                        vision_hidden=hidden, **kw)
        assert other.vlm_factor() is None and sglang_memory_fraction(other) == 0.862, kw
    text_only = _launch("mi300x", "0.5.16", architecture="LlamaForCausalLM")
    assert text_only.vlm_factor() is None and sglang_memory_fraction(text_only) == 0.862


def _qwen35(tmp_path: Path, args: str = "") -> Job:
    """Qwen3.5-397B FP8 on 8 x MI300X at SGLang 0.5.16, 1k/1k."""
    return one_job(tmp_path, key="frac", framework="sglang", image=V0516_MI30X, served=QWEN35_FP8, runner="mi300x",
                   tp=8, concs="[64]", args=args or None)


def test_a_qwen3_5_launch_leaves_sglang_s_headroom_for_its_vision_encoder(tmp_path: Path) -> None:
    """Qwen3.5-397B FP8 on 8 x MI300X at SGLang 0.5.16: 0.862 x 0.924766 = 0.7971 (the simulator and the policy)."""
    fraction = launch_memory_fraction(_qwen35(tmp_path))
    assert fraction is not None and fraction.value == pytest.approx(0.862 * 0.9247656, abs=1e-6), fraction
    spec = engines.render(_qwen35(tmp_path), simulate=True)
    assert engine_config(spec).mem_fraction_static == pytest.approx(fraction.value, abs=1e-4)
    (note,) = [n for n in spec.notes if n.startswith("memory fraction")]
    assert "x 0.9248 for Qwen3_5MoeForConditionalGeneration's vision encoder" in note, note
    assert "24 (its vision_config names no num_hidden_layers) layers x hidden 1152" in note, note


@pytest.mark.parametrize("args", ["--language-only: true", "--mem-fraction-static: 0.8"])
def test_language_only_or_a_pin_takes_no_vision_headroom(tmp_path: Path, args: str) -> None:
    fraction = launch_memory_fraction(_qwen35(tmp_path, args))
    assert fraction is not None and fraction.value == (0.862 if "language" in args else 0.8), fraction


def test_a_launch_whose_weights_leave_no_kv_is_refused_with_the_figures() -> None:
    """Qwen3.5-397B FP8 on 2 x MI325X at the fraction SGLang 0.5.16 computes for an agentic launch (0.899, x 0.9248
    for the vision encoder, x 0.85 for aiter): the weights alone overflow the share, and the refusal says by how much
    (it printed a 16-digit fraction and no figures)."""
    from llmsweep.errors import ConfigError
    from llmsweep.sim.engine import EngineConfig

    fraction = 0.899 * (0.95 * (1 - 0.1 * (1152**2 / 1024**2 - 1))) * 0.85
    config = EngineConfig(model="Qwen/Qwen3.5-397B-A17B-FP8", hardware="mi325x", tp=2, precision="fp8",
                          mem_fraction_static=fraction)
    with pytest.raises(ConfigError) as refused:
        config.sim_config()
    message = refused.value.message
    assert "does not fit 2 x mi325x at mem_fraction_static 0.7067: " in message, message
    assert "GB of weights per GPU and the simulator's 1 GiB reserve against 194.2 GB of its 274.9 GB" in message


def test_a_kv_override_below_one_block_is_refused_as_the_override() -> None:
    """`--kv-capacity-tokens` under one block: the override is the cause, not the weights against HBM."""
    from llmsweep.errors import ConfigError
    from llmsweep.sim.engine import EngineConfig

    with pytest.raises(ConfigError) as refused:
        EngineConfig(kv_capacity_tokens=10).sim_config()
    assert refused.value.message == "simulator: --kv-capacity-tokens 10 holds less than one KV block of 64 tokens"
