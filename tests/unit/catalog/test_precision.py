"""Weight formats have one table: the recipe check, model bytes, golden-AL families and the simulator agree on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.catalog.models import WEIGHT_BYTES_PER_PARAM, checkpoint_precision
from llmsweep.catalog.precision import FORMATS, families_agree, precision_family, served_format, weight_format
from llmsweep.plan import full_sweep
from llmsweep.spec import loads_recipes


@pytest.mark.parametrize(("hf_id", "expected"), [
    ("Qwen/Qwen3.5-397B-A17B-FP8", "fp8"), ("nvidia/DeepSeek-R1-0528-NVFP4-v2", "nvfp4"),
    ("amd/DeepSeek-R1-0528-MXFP4-Preview", "mxfp4"), ("org/Model-W4A16", "int4"), ("org/Model-INT8", "int8"),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16"),
])
def test_a_checkpoint_suffix_names_its_format(hf_id: str, expected: str) -> None:
    assert checkpoint_precision(hf_id) == expected
    assert weight_format(expected) is not None


def test_every_table_reads_the_same_formats() -> None:
    assert set(WEIGHT_BYTES_PER_PARAM) == set(FORMATS)
    assert precision_family("NVFP4") == "nvfp4" != precision_family("mxfp4") != precision_family("fp4") == "fp4"
    assert precision_family("fp16") == "bf16" and precision_family("fp8") != precision_family("fp4")
    assert weight_format(" FP8 ") is FORMATS["fp8"] and weight_format("fp9") is None


AGREE = [
    ("nvfp4", "mxfp4", False),  # NVIDIA's block-16/FP8-scale checkpoint is not AMD's block-32/E8M0 one
    ("NVFP4", "fp4", True), ("fp4", "mxfp4", True),  # a bare fp4 may be either: it cannot be told apart
    ("nvfp4", "nvfp4", True), ("mxfp4", "mxfp4", True), ("fp4", "fp4", True),
    ("fp8", "fp8", True), ("fp8", "mxfp8", True), ("fp16", "bf16", True),
    ("nvfp4", "fp8", False), ("fp4", "fp8", False), ("mxfp4", "int4", False), ("fp8", "house-blend", False),
]


def test_a_golden_curve_fits_the_precisions_of_its_family_and_a_bare_fp4_fits_both_block_formats() -> None:
    got = [(a, b, families_agree(a, b), families_agree(b, a)) for a, b, _ in AGREE]
    assert got == [(a, b, agree, agree) for a, b, agree in AGREE]


SERVED = [
    ("amd/Qwen3.5-397B-A17B-MXFP4", "fp4", "mxfp4"), ("nvidia/DeepSeek-R1-0528-NVFP4-v2", "fp4", "nvfp4"),
    ("amd/DeepSeek-R1-0528-MXFP4-Preview", "FP4", "mxfp4"), ("Qwen/Qwen3.5-397B-A17B-FP8", "fp8", "fp8"),
    ("moonshotai/Kimi-K3", "fp4", "fp4"), ("meta-llama/Llama-3.1-8B-Instruct", " BF16 ", "bf16"), ("", "fp8", "fp8"),
]


def test_the_served_format_is_the_one_the_model_id_names_else_the_recipes_precision() -> None:
    assert [served_format(model, precision) for model, precision, _ in SERVED] == [s for _, _, s in SERVED]
    # a local folder given with its trailing slash names the same format as without it
    assert served_format("/models/Qwen3.5-397B-A17B-MXFP4/", "fp4") == "mxfp4"


RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.mark.parametrize(("precision", "compute"), [("nvfp4", "fp4"), ("MXFP8", "fp8"), ("int4", "bf16"),
                                                    ("fp16", "bf16"), ("int8", "fp8")])
def test_the_simulator_serves_a_format_at_its_compute_class(precision: str, compute: str) -> None:
    text = RECIPE.read_text().replace("precision: fp8", f"precision: {precision}")
    assert text != RECIPE.read_text()
    job = full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes)[0]
    argv = engines.render(job, simulate=True, port=0).argv
    assert argv[argv.index("--precision") + 1] == compute


def test_a_recipe_with_an_unknown_precision_is_refused_before_anything_is_planned() -> None:
    text = RECIPE.read_text().replace("precision: fp8", "precision: fp9")
    result = loads_recipes(text, "t.yaml")
    [finding] = [f for f in result.errors if f.rule == "schema.precision"]
    assert "did you mean `fp8`" in finding.message and finding.fix and finding.line
    assert not result.recipes


@pytest.mark.parametrize(("value", "expected"), [("FP8", "fp8"), ("e4m3", "fp8"), ("NVFP4", "nvfp4"),
                                                 ("W4A16_AWQ", "int4"), ("mxfp4", "mxfp4"), ("bf16", None)])
def test_a_quantisation_configs_spelling_names_a_format_of_the_table(value: str, expected: str | None) -> None:
    from llmsweep.catalog.precision import format_named_in

    assert format_named_in(value) == expected
    assert expected is None or weight_format(expected) is not None


def test_a_block_format_refines_the_bare_fp4_and_nothing_else() -> None:
    from llmsweep.catalog.precision import refines

    assert refines("mxfp4", "fp4") and refines("NVFP4", "fp4")
    assert not refines("fp4", "mxfp4") and not refines("mxfp4", "mxfp4") and not refines("fp8", "fp4")
    assert not refines("mxfp4", "nvfp4")
