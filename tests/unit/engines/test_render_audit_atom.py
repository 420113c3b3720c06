"""ATOM's server parser is plain argparse over flags spelled mostly with `-` and a few with `_` (ROCm/ATOM
atom/model_engine/arg_utils.py: `--kv_cache_dtype`, `--enable_prefix_caching`, `--load_dummy`); it folds neither."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
