"""Which golden curve a recipe pins: a drafter no curve measured gets none (it had been given the default
drafter's value), and `golden-curve` chooses among the variants of one drafter without touching the launch."""

from __future__ import annotations

import json
from pathlib import Path

from support.recipes import engine_recipe, flag

from llmsweep import engines
from llmsweep.catalog.golden import resolve_acceptance
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files

K3 = dict(model="moonshotai/Kimi-K3", prefix="kimik3")


def test_a_drafter_no_curve_measured_has_no_golden_al() -> None:
    named = resolve_acceptance("minimaxm3", "MiniMaxAI/MiniMax-M3", "fp8", "eagle3", "on", 3,
                               draft_model="SomeOrg/MiniMax-M3-EAGLE3-Other")
    assert named is None
    known = resolve_acceptance("minimaxm3", "MiniMaxAI/MiniMax-M3", "fp8", "eagle3", "on", 3,
                               draft_model="Inferact/MiniMax-M3-EAGLE3-GQA")
    assert known is not None and known.curve == "minimaxm3_eagle3_gqa"


def test_golden_curve_picks_a_variant_and_the_launch_keeps_its_drafter(tmp_path: Path) -> None:
    serve = ("    spec-decoding: { method: dspark, num-steps: 2, draft-model: Inferact/Kimi-K3-DSpark, "
             "golden-curve: probabilistic-block }\n")
    path = tmp_path / "r.yaml"
    path.write_text(engine_recipe("vllm", "vllm/vllm-openai:v0.27.1", arm="{ tp: 8, spec-decoding: mtp, "
                                  "kv-offloading: none, conc-list: [4] }", serve=serve, runner="cluster:mi355x-amds",
                                  **K3))
    (job,) = jobs_from_files([path])
    assert job.acceptance is not None and job.acceptance.value == 2.51  # InferenceX's kimik3 pin
    config = json.loads(flag(engines.render(job).argv, "--speculative-config") or "{}")
    assert config["model"] == "Inferact/Kimi-K3-DSpark" and config["synthetic_acceptance_length"] == 2.51
    assert not [f for f in validate_files([path]).findings if f.rule in ("golden-al.variant", "golden-al.missing")]


MM3 = dict(model="amd/MiniMax-M3-MXFP4", prefix="minimaxm3", runner="cluster:mi355x-amds")


def _mm3(tmp_path: Path, spec: str) -> Path:
    path = tmp_path / "mm3.yaml"
    path.write_text(engine_recipe("vllm", "vllm/vllm-openai-rocm:v0.27.1", arm="{ tp: 4, spec-decoding: mtp, "
                                  "kv-offloading: none, conc-list: [4] }",
                                  serve=f"    spec-decoding: {{ method: eagle3, num-steps: 3, {spec} }}\n", **MM3))
    return path


def test_golden_curve_never_pins_another_drafters_al_for_the_launched_one(tmp_path: Path) -> None:
    """`golden-curve: gqa` with the non-GQA EAGLE3 heads launched had pinned the GQA curve's 2.78 (their own curve:
    2.83) with no finding: refused, naming both drafters, and nothing is pinned."""
    assert resolve_acceptance("minimaxm3", "amd/MiniMax-M3-MXFP4", "fp4", "eagle3", "on", 3, draft_model="gqa",
                              served_draft="Inferact/MiniMax-M3-EAGLE3") is None
    path = _mm3(tmp_path, "draft-model: Inferact/MiniMax-M3-EAGLE3, golden-curve: gqa")
    (job,) = jobs_from_files([path])
    assert job.acceptance is None
    config = json.loads(flag(engines.render(job).argv, "--speculative-config") or "{}")
    assert "synthetic_acceptance_length" not in config
    hits = [f for f in validate_files([path]).findings if f.rule.startswith("golden-al.")]
    assert [(f.rule, f.is_error) for f in hits] == [("golden-al.curve-drafter", True)], [f.render() for f in hits]
    assert "Inferact/MiniMax-M3-EAGLE3-GQA" in hits[0].message and "minimaxm3_eagle3" in (hits[0].fix or "")


def test_golden_curve_names_the_curve_of_a_drafter_at_a_local_path(tmp_path: Path) -> None:
    """A draft model at a path names no hub drafter: the recipe's `golden-curve` says which curve it is."""
    path = _mm3(tmp_path, "draft-model: /models/MiniMax-M3-EAGLE3-GQA, golden-curve: gqa")
    (job,) = jobs_from_files([path])
    assert job.acceptance is not None and job.acceptance.value == 2.78
    assert not [f for f in validate_files([path]).findings if f.is_error and f.rule.startswith("golden-al.")]


def test_golden_curve_of_the_launched_drafter_pins_its_value(tmp_path: Path) -> None:
    path = _mm3(tmp_path, "draft-model: Inferact/MiniMax-M3-EAGLE3-GQA, golden-curve: minimaxm3_eagle3_gqa")
    (job,) = jobs_from_files([path])
    assert job.acceptance is not None and job.acceptance.value == 2.78
    assert not [f for f in validate_files([path]).findings if f.rule.startswith("golden-al.")]


def _missing(path: Path) -> list[tuple[str, str]]:
    return [(f.message, f.fix or "") for f in validate_files([path]).findings if f.rule == "golden-al.missing"]


def test_a_drafter_at_a_path_is_told_to_name_its_curve_and_naming_it_pins(tmp_path: Path) -> None:
    """`draft-model: /models/MiniMax-M3-EAGLE3` (the schema's "HF id or path") matches no curve header: the fix had
    said to pick another K or collect a curve; it names `golden-curve: <curve id>` and the family's curves."""
    ((message, fix),) = _missing(_mm3(tmp_path, "draft-model: /models/MiniMax-M3-EAGLE3"))
    assert "no curve measured that drafter" in message
    assert "`serve.spec-decoding.golden-curve: <curve id>`" in fix, fix
    assert "minimaxm3_eagle3 (Inferact/MiniMax-M3-EAGLE3), minimaxm3_eagle3_gqa" in fix, fix
    (job,) = jobs_from_files([_mm3(tmp_path, "draft-model: /models/MiniMax-M3-EAGLE3, golden-curve: minimaxm3_eagle3")])
    assert job.acceptance is not None and job.acceptance.value == 2.83


def test_a_hub_drafter_no_curve_measured_is_told_the_drafters_that_were(tmp_path: Path) -> None:
    ((_, fix),) = _missing(_mm3(tmp_path, "draft-model: SomeOrg/MiniMax-M3-EAGLE3-Other"))
    assert "Inferact/MiniMax-M3-EAGLE3, Inferact/MiniMax-M3-EAGLE3-GQA" in fix and "golden-curve" not in fix, fix


def test_a_named_drafter_whose_curve_lacks_the_k_is_not_called_unmeasured(tmp_path: Path) -> None:
    path = _mm3(tmp_path, "draft-model: Inferact/MiniMax-M3-EAGLE3").read_text().replace("num-steps: 3",
                                                                                          "num-steps: 12")
    (tmp_path / "k12.yaml").write_text(path)
    ((message, fix),) = _missing(tmp_path / "k12.yaml")
    assert "no curve measured that drafter" not in message and "pick a K the curve has" in fix, (message, fix)
