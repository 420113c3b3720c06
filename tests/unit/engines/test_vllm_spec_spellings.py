"""vLLM's other spellings of --speculative-config cannot slip a different acceptance length past policy.

On the H200 (examples/results/h200-vllm-0.26.0/qwen3next) a recipe's `-sc` came after the rendered
--speculative-config: vLLM ran AL 2.0 under a 3.39 pin, validation passed, and only the read-back gate caught it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmsweep.engines import render
from llmsweep.engines.vllm import VLLMAdapter
from llmsweep.plan import jobs_from_files

ROOT = Path(__file__).resolve().parents[3]
WRONG_PIN = ROOT / "examples" / "gpu" / "qwen3-next-small-bf16-h200-vllm-mtp-wrongpin.yaml"
FLEET = ROOT / "examples" / "gpu" / "fleet.yaml"
WRONG = {"method": "mtp", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
         "synthetic_acceptance_length": 2.0}


@pytest.mark.parametrize("flag", ["--speculative-config", "-sc", "--speculative_config"])
def test_the_spellings_are_one_flag(flag: str) -> None:
    assert VLLMAdapter().canonical(flag) == "--speculative-config"
    assert VLLMAdapter().canonical(f"{flag}.synthetic_acceptance_length") == "--speculative-config"


@pytest.mark.parametrize(("flag", "value"), [("-sc", WRONG), ("--speculative-config.synthetic_acceptance_length", 2.0)])
def test_a_wrong_pin_is_a_spec_conflict_and_renders_once(tmp_path: Path, flag: str, value: object) -> None:
    doc = yaml.safe_load(WRONG_PIN.read_text())
    key = next(iter(doc))
    args = {k: v for k, v in doc[key]["serve"]["args"].items() if k != "-sc"}
    doc[key]["serve"]["args"] = {**args, flag: value}
    recipe = tmp_path / "wrongpin.yaml"
    recipe.write_text(yaml.safe_dump(doc, sort_keys=False))
    (job,) = jobs_from_files([recipe], runner_config=FLEET)
    assert job.acceptance is not None and job.acceptance.value == pytest.approx(3.39)
    conflicts = VLLMAdapter().conflicts(job, "spec")
    assert [c.flag for c in conflicts] == [flag]
    argv = render(job, port=0).argv
    # the recipe's spelling replaces the rendered flag instead of silently following it
    assert sum(a in ("--speculative-config", "-sc") or a.startswith("--speculative-config.") for a in argv) == 1


def test_the_committed_negative_control_is_refused_before_launch() -> None:
    from llmsweep import policy
    from llmsweep.spec import load_recipes

    jobs = jobs_from_files([WRONG_PIN], runner_config=FLEET)
    findings = list(policy.check(load_recipes([WRONG_PIN]), jobs, simulate=False))
    assert any(f.rule == "serve.spec-conflict" and f.is_error for f in findings)


DRAFT_RECIPE = ("k:\n  image: vllm/vllm-openai-rocm:v0.27.1\n  model: MiniMaxAI/MiniMax-M3-MXFP8\n"
                "  model-prefix: minimaxm3\n  runner: mi300x\n  precision: fp8\n  framework: vllm\n"
                "  multinode: false\n  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n"
                "      search-space:\n      - { tp: 8, conc-list: [8], spec-decoding: mtp }\n"
                "  serve:\n    spec-decoding: {SPEC}\n")


@pytest.mark.parametrize("method", ["eagle", "eagle3", "draft_model", "medusa", "dspark"])
def test_a_draft_method_without_its_checkpoint_is_refused_before_the_gpu(tmp_path: Path, method: str) -> None:
    """vLLM's SpeculativeConfig takes the target as the draft only for MTP (and needs none for n-gram): any other
    method without `model` dies at start-up ("num_speculative_tokens was provided but without speculative model"),
    so `validate` must refuse it rather than pass a launch that cannot start."""
    from llmsweep.policy import validate_files

    file = tmp_path / "r.yaml"
    file.write_text(DRAFT_RECIPE.replace("{SPEC}", f"{{method: {method}, num-steps: 3}}"))
    errors = [f for f in validate_files([file]).findings if f.is_error]
    assert "serve.render-failed" in [f.rule for f in errors], [f.render() for f in errors]
    assert any("draft checkpoint" in f.message for f in errors)


@pytest.mark.parametrize(("spec", "expected"), [
    ("{method: mtp, num-steps: 3}", {"method": "mtp", "num_speculative_tokens": 3}),
    ("{method: ngram, num-steps: 3}", {"method": "ngram", "num_speculative_tokens": 3}),
    ("{method: eagle3, num-steps: 3, draft-model: org/eagle3}",
     {"method": "eagle3", "num_speculative_tokens": 3, "model": "org/eagle3"}),
])
def test_methods_vllm_can_start_render(tmp_path: Path, spec: str, expected: dict[str, object]) -> None:
    import json

    from llmsweep.plan import full_sweep
    from llmsweep.spec import loads_recipes

    (job,) = full_sweep(loads_recipes(DRAFT_RECIPE.replace("{SPEC}", spec), "t.yaml").raise_on_error().recipes)
    argv = render(job).argv
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == expected
