"""Golden acceptance-length curves: the values recipes pin and the provenance policy rules quote."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmsweep.catalog.golden import get_curve, list_curves, resolve_acceptance
from llmsweep.errors import ConfigError


def test_packaged_curves_match_the_published_reference(shared_dir: Path) -> None:
    reference = sorted((shared_dir / "reference" / "golden_al").glob("*.yaml"))
    assert len(reference) == 9
    curves = {c.id: c for c in list_curves()}
    for path in reference:
        body = yaml.safe_load(path.read_text())
        (checkpoint, modes), = body.items()
        curve = curves[path.stem]
        assert curve.checkpoint == checkpoint
        assert curve.values == {m: {int(k): float(v) for k, v in per.items()} for m, per in modes.items()}


def test_seed_recipe_value_and_its_provenance() -> None:
    r = resolve_acceptance("qwen3.5", "Qwen/Qwen3.5-397B-A17B-FP8", "fp8", "mtp", True, 3)
    assert r is not None
    assert r.value == 3.39
    assert r.curve == "qwen3.5_mtp"
    assert r.checkpoint == "qwen3.5-397b-a17b-nvfp4"
    assert r.precision_measured == "nvfp4"
    assert r.hardware == "B300" and r.engine == "vLLM"
    assert r.source == "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/27317114007"
    assert r.thinking == "thinking_on" and r.k == 3
    # the seed serves FP8 against a curve measured on NVFP4: a mismatch a policy rule must be able to flag
    assert r.precision_mismatch("fp8") is True
    assert r.precision_mismatch() is True
    assert r.precision_mismatch("fp4") is False
    assert r.precision_mismatch("nvfp4") is False


def test_an_mxfp4_checkpoint_is_not_the_nvfp4_one_the_curve_was_measured_on() -> None:
    """InferenceX's AMD master serves amd/Qwen3.5-397B-A17B-MXFP4 at precision `fp4` against the curve measured on
    the NVFP4 checkpoint: the id names the served format, and MXFP4 is not NVFP4 (block 32 with E8M0 scales, not
    block 16 with FP8 ones). A bare `fp4` says neither, so it is told apart from neither."""
    amd = resolve_acceptance("qwen3.5", "amd/Qwen3.5-397B-A17B-MXFP4", "fp4", "mtp", True, 3)
    assert amd is not None and amd.value == 3.39 and amd.precision_measured == "nvfp4"  # the job still runs with it
    assert (amd.requested_precision, amd.served_precision) == ("fp4", "mxfp4")
    assert amd.precision_mismatch() is True and amd.precision_mismatch("mxfp4") is True
    assert amd.precision_mismatch("fp4") is False
    for model, precision in (("nvidia/Qwen3.5-397B-A17B-NVFP4", "fp4"), ("qwen3.5-397b-a17b", "fp4"),
                             ("", "nvfp4"), ("", "fp4")):
        r = resolve_acceptance("qwen3.5", model, precision, "mtp", True, 3)
        assert r is not None and not r.precision_mismatch(), (model, precision)
    kimi = resolve_acceptance("kimik3", "moonshotai/Kimi-K3", "fp4", "dspark", True, 3)  # measured "fp4" (script)
    assert kimi is not None and kimi.precision_measured == "fp4" and not kimi.precision_mismatch()


@pytest.mark.parametrize("method", ["mtp", "MTP", "eagle", "EAGLE", "nextn"])
def test_sglang_spellings_of_native_mtp_read_the_mtp_curve(method: str) -> None:
    r = resolve_acceptance("qwen3.5", "", "fp8", method, "off", 2)
    assert r is not None and r.value == 2.70 and r.thinking == "thinking_off"


def test_method_without_a_curve_resolves_to_none() -> None:
    assert resolve_acceptance("qwen3.5", "", "fp8", "eagle3", True, 3) is None
    assert resolve_acceptance("qwen3.5", "", "fp8", "none", True, 3) is None
    assert resolve_acceptance("nosuchmodel", "", "fp8", "mtp", True, 3) is None


def test_missing_thinking_mode_or_draft_length_is_none_not_a_guess() -> None:
    assert resolve_acceptance("glm5.2", "", "fp8", "mtp", "on", 3).value == 2.99  # type: ignore[union-attr]
    assert resolve_acceptance("glm5.2", "", "fp8", "mtp", "off", 3) is None
    assert resolve_acceptance("glm5.2", "", "fp8", "mtp", "on", 9) is None


def test_draft_model_selects_between_eagle3_and_eagle3_gqa() -> None:
    default = resolve_acceptance("minimaxm3", "", "fp8", "eagle3", "on", 3)
    gqa_by_id = resolve_acceptance("minimaxm3", "", "fp8", "eagle3", "on", 3, "Inferact/MiniMax-M3-EAGLE3-GQA")
    gqa_by_tag = resolve_acceptance("minimaxm3", "", "fp8", "eagle3", "on", 3, "eagle3-gqa")
    assert default is not None and default.value == 2.83 and default.curve == "minimaxm3_eagle3"
    assert gqa_by_id is not None and gqa_by_id.value == 2.78 and gqa_by_id.curve == "minimaxm3_eagle3_gqa"
    assert gqa_by_tag is not None and gqa_by_tag.curve == "minimaxm3_eagle3_gqa"


def test_curve_id_selects_a_sampling_variant() -> None:
    curve_id = "kimik3_dspark_probabilistic_sample_method_block_rejection_sample_method"
    r = resolve_acceptance("kimik3", "moonshotai/Kimi-K3", "fp4", "dspark", True, 3, curve_id)
    assert r is not None and r.value == 3.00
    assert resolve_acceptance("kimik3", "moonshotai/Kimi-K3", "fp4", "dspark", True, 3).value == 2.87  # type: ignore[union-attr]


def test_model_id_alone_finds_the_family() -> None:
    r = resolve_acceptance("", "deepseek-ai/DeepSeek-V4-Pro-0813", "fp4", "dspark", True, 5)
    assert r is not None and r.value == 3.61 and r.curve == "dsv4-pro-0813-dspark"
    assert r.draft_model == "deepseek-ai/DeepSeek-V4-Pro-0813"


def test_header_sampling_is_parsed_per_thinking_mode() -> None:
    qwen = get_curve("qwen3.5_mtp")
    assert qwen is not None
    assert qwen.dataset == "coding" and qwen.output_len == 4096
    assert qwen.sampling["thinking_off"].params == {
        "temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5
    }
    assert qwen.sampling["thinking_on"].chat_template_kwargs == {"enable_thinking": True}
    kimi = get_curve("kimik2.5_eagle3")
    assert kimi is not None and kimi.sampling["thinking_off"].params["temperature"] == 0.6
    assert kimi.sampling_common == {"top_p": 0.95}
    dspark = get_curve("kimik3_dspark_probabilistic_sample_method_block_rejection_sample_method")
    assert dspark is not None and dspark.speculative_config["rejection_sample_method"] == "block"


def test_precision_basis_says_where_the_precision_came_from() -> None:
    assert get_curve("glm5.2_mtp").precision_measured == "fp8"  # type: ignore[union-attr]
    assert get_curve("glm5.2_mtp").precision_basis == "checkpoint"  # type: ignore[union-attr]
    dsv4 = get_curve("dsv4_mtp")
    assert dsv4 is not None and dsv4.precision_measured == "fp4" and dsv4.precision_basis == "script"


CURVE = """\
# Source GitHub Actions run: https://example.invalid/runs/1
# dataset: coding | temperature: 1.0 | output_len: 4096
# Measured on llama-3.1-8b-fp8 (H200, SGLang EAGLE3), per num_speculative_tokens.
llama-3.1-8b-fp8:
  thinking_off:
    1: 1.50
    2: 1.90
"""


def test_user_curve_in_catalog_dir_is_used(user_catalog: Path) -> None:
    (user_catalog / "golden_al").mkdir()
    (user_catalog / "golden_al" / "llama3.1-8b_eagle3.yaml").write_text(CURVE)
    r = resolve_acceptance("llama3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "fp8", "eagle3", False, 2)
    assert r is not None and r.value == 1.90
    assert r.hardware == "H200" and r.engine == "SGLang" and r.precision_measured == "fp8"
    assert r.precision_mismatch("fp8") is False
    assert any(c.id == "qwen3.5_mtp" for c in list_curves())  # packaged curves stay


def test_malformed_user_curve_names_the_file(user_catalog: Path) -> None:
    (user_catalog / "golden_al").mkdir()
    (user_catalog / "golden_al" / "bad_mtp.yaml").write_text("bad:\n  thinking_on:\n    2: 7.5\n")
    with pytest.raises(ConfigError, match=r"bad_mtp\.yaml"):
        list_curves()
