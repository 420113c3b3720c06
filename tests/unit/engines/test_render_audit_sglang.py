"""SGLang's server parser is plain argparse over flags spelled with `-` (sglang/srt/server_args.py: a ServerArgs field
`mem_fraction_static` is `--mem-fraction-static`): it folds no `_` into `-` and refuses `--mem_fraction_static`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.plan import Job
from llmsweep.policy import validate_files

Plan = Callable[[str], list[Job]]

RECIPE = ("k:\n  image: lmsysorg/sglang:v0.5.12-rocm720-mi30x\n  model: Qwen/Qwen3.5-397B-A17B-FP8\n"
          "  model-prefix: qwen3.5\n  runner: mi300x\n  precision: fp8\n  framework: sglang\n  multinode: false\n"
          "  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
          "      - { tp: 8, conc-list: [8] }\n"
          "  serve:\n    args:\n      --mem_fraction_static: 0.75\n      --attention_backend: triton\n"
          "      --skip_server_warmup: true\n")


def test_recipe_flags_reach_sglang_in_its_dash_spelling(plan: Plan, tmp_path: Path) -> None:
    """The policy reads `--mem_fraction_static` as `--mem-fraction-static` and passes the recipe; the launch must
    then say it that way too, or SGLang refuses to start after the job got its GPUs."""
    file = tmp_path / "r.yaml"
    file.write_text(RECIPE)
    assert not [f for f in validate_files([file]).findings if f.is_error]
    argv = engines.render(plan(RECIPE)[0]).argv
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.75"
    assert argv[argv.index("--attention-backend") + 1] == "triton"
    assert "--skip-server-warmup" in argv
    assert not [a for a in argv if a.startswith("--") and "_" in a]


def spec_recipe(spec: str) -> str:
    return ("k:\n  image: lmsysorg/sglang:v0.5.16-rocm720-mi30x\n  model: Qwen/Qwen3.5-397B-A17B-FP8\n"
            "  model-prefix: qwen3.5\n  runner: mi300x\n  precision: fp8\n  framework: sglang\n  multinode: false\n"
            "  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, spec-decoding: mtp, conc-list: [8] }\n"
            f"  serve:\n    spec-decoding: {spec}\n")


def test_a_draft_length_alone_is_launched_as_sglangs_full_chain_triple(plan: Plan) -> None:
    """SGLang takes num-steps, eagle-topk and num-draft-tokens together: `--speculative-num-steps 3` alone compares
    `None > 1` in ServerArgs and the server dies at start-up. K alone is the chain draft the golden AL is keyed on."""
    argv = engines.render(plan(spec_recipe("{ method: mtp, num-steps: 3 }"))[0]).argv
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert argv[argv.index("--speculative-eagle-topk") + 1] == "1"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"
    written = engines.render(plan(spec_recipe("{ method: eagle, num-steps: 3, topk: 1, num-draft-tokens: 4 }"))[0])
    assert written.argv == engines.render(plan(spec_recipe("{ method: eagle, num-steps: 3 }"))[0]).argv


def test_an_incomplete_triple_sglang_cannot_start_with_is_refused_at_validate(tmp_path: Path) -> None:
    for spec, words in (("{ method: mtp, topk: 1, num-draft-tokens: 4 }", "needs `num-steps`"),
                        ("{ method: eagle, num-steps: 3, topk: 4 }", "needs `num-draft-tokens`")):
        file = tmp_path / "r.yaml"
        file.write_text(spec_recipe(spec))
        errors = [f for f in validate_files([file]).findings if f.is_error]
        assert any(words in f.message for f in errors), [f.render() for f in errors]


def agentic_recipe(spec: str) -> str:
    return ("k:\n  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730\n  model: Qwen/Qwen3.5-397B-A17B-FP8\n"
            "  model-prefix: qwen3.5\n  runner: cluster:mi300x-amds\n  precision: fp8\n  framework: sglang\n"
            "  multinode: false\n  scenarios:\n    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n"
            "      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [4] }\n"
            f"  serve:\n    spec-decoding: {spec}\n")


def test_a_pinned_acceptance_on_a_draft_tree_wider_than_one_is_refused(tmp_path: Path, plan: Plan) -> None:
    """SGLang's synthetic acceptance with real draft tokens raises at the first verify step unless
    --speculative-eagle-topk is 1 ("SGLANG_SIMULATE_ACC_LEN with real draft tokens currently requires
    speculative_eagle_topk=1"): the server starts, then the first request fails."""
    file = tmp_path / "r.yaml"
    file.write_text(agentic_recipe("{ method: eagle, num-steps: 3, topk: 4, num-draft-tokens: 8 }"))
    errors = [f for f in validate_files([file]).findings if f.is_error]
    assert any("--speculative-eagle-topk is 1" in f.message for f in errors), [f.render() for f in errors]
    chain = engines.render(plan(agentic_recipe("{ method: eagle, num-steps: 3, topk: 1, num-draft-tokens: 4 }"))[0])
    assert chain.env["SGLANG_SIMULATE_ACC_TOKEN_MODE"] == "real-draft-token"


def test_an_ngram_draft_of_k_verifies_k_plus_one_tokens_as_labelled(plan: Plan, tmp_path: Path) -> None:
    """SGLang's NGRAM reads neither num-steps nor eagle-topk: unset, its verified tokens are the match window's 12, so
    an `ngram` K=3 job launched with `--speculative-num-steps 3` alone drafted 11 tokens a step under a K=3 label."""
    argv = engines.render(plan(spec_recipe("{ method: ngram, num-steps: 3 }"))[0]).argv
    assert argv[argv.index("--speculative-algorithm") + 1] == "NGRAM"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"
    assert "--speculative-eagle-topk" not in argv
    written = engines.render(plan(spec_recipe("{ method: ngram, num-steps: 3, num-draft-tokens: 8 }"))[0]).argv
    assert written[written.index("--speculative-num-draft-tokens") + 1] == "8"
    file = tmp_path / "r.yaml"
    file.write_text(spec_recipe("{ method: ngram, num-steps: 3, topk: 4 }"))
    errors = [f for f in validate_files([file]).findings if f.is_error]
    assert any("--speculative-ngram-max-bfs-breadth" in f.message for f in errors), [f.render() for f in errors]


SGLANG_DRAFT_RECIPE = ("k:\n  image: lmsysorg/sglang:v0.5.16\n  model: moonshotai/Kimi-K2.5\n"
                       "  model-prefix: kimik2.5\n  runner: h200\n  precision: fp8\n  framework: sglang\n"
                       "  multinode: false\n  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n"
                       "      search-space:\n      - { tp: 8, conc-list: [8], spec-decoding: mtp }\n"
                       "  serve:\n    engine: { name: sglang, version: 0.5.16 }\n    spec-decoding: {SPEC}\n")


@pytest.mark.parametrize("method", ["eagle", "eagle3", "draft_model", "dspark"])
def test_an_sglang_draft_method_without_its_checkpoint_is_refused_before_the_gpu(tmp_path: Path, method: str) -> None:
    """SGLang takes the target's own MTP layers as an EAGLE draft only for a model that has them: on Kimi-K2.5 (the
    catalog: no MTP layers) EAGLE/EAGLE-3 heads, a standalone draft model and DSpark heads need
    `--speculative-draft-model-path`, yet the launch rendered without it and `validate` passed (vLLM, TensorRT-LLM
    and ATOM refuse the same recipe). Refused as they are; with the checkpoint it renders the path; `ngram` needs none,
    and an EAGLE launch (`eagle`, `eagle3`, `mtp`) of a model with MTP layers (the quickstart's Qwen3.5) none either."""

    file = tmp_path / "r.yaml"
    file.write_text(SGLANG_DRAFT_RECIPE.replace("{SPEC}", f"{{method: {method}, num-steps: 3}}"))
    errors = [f for f in validate_files([file]).findings if f.is_error]
    assert "serve.render-failed" in [f.rule for f in errors], [f.render() for f in errors]
    assert any(f"SGLang's `{method}` drafting needs the draft checkpoint" in f.message for f in errors), errors

    file.write_text(SGLANG_DRAFT_RECIPE.replace(
        "{SPEC}", f"{{method: {method}, num-steps: 3, draft-model: org/draft-head}}"))
    assert not [f for f in validate_files([file]).findings if f.rule == "serve.render-failed"]
    file.write_text(SGLANG_DRAFT_RECIPE.replace("{SPEC}", "{method: ngram, num-steps: 3}"))
    assert not [f for f in validate_files([file]).findings if f.rule == "serve.render-failed"]
    file.write_text(SGLANG_DRAFT_RECIPE.replace("{SPEC}", f"{{method: {method}, num-steps: 3}}").replace(
        "moonshotai/Kimi-K2.5", "Qwen/Qwen3.5-397B-A17B-FP8").replace("kimik2.5", "qwen3.5"))
    refused = [f.message for f in validate_files([file]).findings if f.rule == "serve.render-failed"]
    assert bool(refused) == (method in ("draft_model", "dspark")), refused
    file.write_text(SGLANG_DRAFT_RECIPE.replace("{SPEC}", "{method: mtp, num-steps: 3}").replace(
        "moonshotai/Kimi-K2.5", "Qwen/Qwen3.5-397B-A17B-FP8").replace("kimik2.5", "qwen3.5"))
    assert not [f for f in validate_files([file]).findings if f.rule == "serve.render-failed"]
