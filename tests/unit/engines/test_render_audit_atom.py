"""ATOM's server parser is plain argparse over flags spelled mostly with `-` and a few with `_` (ROCm/ATOM
atom/model_engine/arg_utils.py: `--kv_cache_dtype`, `--enable_prefix_caching`, `--load_dummy`); it folds neither."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.plan import Job
from llmsweep.policy import validate_files

Plan = Callable[[str], list[Job]]

RECIPE = ("k:\n  image: rocm/atom:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3\n"
          "  model: deepseek-ai/DeepSeek-R1-0528\n  model-prefix: dsr1\n  runner: mi355x\n  precision: fp8\n"
          "  framework: atom\n  multinode: false\n  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n"
          "      search-space:\n      - { tp: 8, conc-list: [8] }\n"
          "  serve:\n    args:\n      --kv-cache-dtype: fp8\n      --gpu_memory_utilization: 0.9\n"
          "      --enable-prefix-caching: true\n")


def test_recipe_flags_reach_atom_in_its_own_spelling(plan: Plan, tmp_path: Path) -> None:
    """The policy reads `--kv-cache-dtype` as ATOM's `--kv_cache_dtype` and passes the recipe; the launch must then
    say it ATOM's way (and `--gpu_memory_utilization` as `--gpu-memory-utilization`), or ATOM refuses to start."""
    file = tmp_path / "r.yaml"
    file.write_text(RECIPE)
    assert not [f for f in validate_files([file]).findings if f.is_error]
    argv = engines.render(plan(RECIPE)[0]).argv
    assert argv[argv.index("--kv_cache_dtype") + 1] == "fp8"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.9"
    assert "--enable_prefix_caching" in argv
    assert "--kv-cache-dtype" not in argv and "--gpu_memory_utilization" not in argv


SPEC_RECIPE = ("k:\n  image: rocm/atom:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3\n"
               "  model: deepseek-ai/DeepSeek-R1-0528\n  model-prefix: dsr1\n  runner: mi355x\n  precision: fp8\n"
               "  framework: atom\n  multinode: false\n  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n"
               "      osl: 1024\n      search-space:\n      - { tp: 8, conc-list: [8], spec-decoding: mtp }\n"
               "  serve:\n    spec-decoding: {SPEC}\n")


@pytest.mark.parametrize("spec", ["{method: eagle, num-steps: 3}", "{method: ngram, num-steps: 3}",
                                  "{method: draft_model, num-steps: 3, draft-model: org/draft}",
                                  "{method: eagle3, num-steps: 3}"])
def test_a_draft_atom_cannot_start_is_refused_before_the_gpu(spec: str, tmp_path: Path) -> None:
    """ATOM's `--method` takes mtp, eagle3 and dspark only (argparse `choices`), and eagle3 only with
    `--draft-model`: any other launch dies at start-up, so `validate` must refuse it instead of passing it."""
    file = tmp_path / "r.yaml"
    file.write_text(SPEC_RECIPE.replace("{SPEC}", spec))
    errors = [f for f in validate_files([file]).findings if f.is_error]
    assert [f.rule for f in errors] == ["serve.render-failed"], [f.render() for f in errors]
    assert "ATOM" in errors[0].message


@pytest.mark.parametrize(("spec", "method"), [("{method: mtp, num-steps: 3}", "mtp"),
                                              ("{method: eagle3, num-steps: 3, draft-model: org/d}", "eagle3")])
def test_atom_methods_render_as_its_parser_takes_them(spec: str, method: str, plan: Plan) -> None:
    argv = engines.render(plan(SPEC_RECIPE.replace("{SPEC}", spec))[0]).argv
    assert argv[argv.index("--method") + 1] == method
    assert argv[argv.index("--num-speculative-tokens") + 1] == "3"
