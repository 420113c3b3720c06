"""trtllm-serve is a click command (TensorRT-LLM `tensorrt_llm/commands/serve.py`): its options are spelled with `_`,
several parameters carry two names (`--tensor_parallel_size`/`--tp_size`, `--config`/`--extra_llm_api_options`), and
click takes the last value of a parameter silently and refuses a name it does not define."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from llmsweep import engines
from llmsweep.plan import Job
from llmsweep.policy import validate_files

Plan = Callable[[str], list[Job]]


def trt_recipe(args: str) -> str:
    return ("k:\n  image: nvcr.io/nvidia/tensorrt-llm/release:1.2.0\n  model: MiniMaxAI/MiniMax-M3\n"
            "  model-prefix: minimaxm3\n  runner: h200\n  precision: fp8\n  framework: trt\n  multinode: false\n"
            "  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, spec-decoding: mtp, conc-list: [8] }\n"
            "  serve:\n    spec-decoding: { method: mtp, num-steps: 3 }\n    args:\n" + args)


def values(argv: tuple[str, ...], *names: str) -> list[str]:
    """The value after each occurrence of any of `names` (click's one parameter under its several names)."""
    return [argv[i + 1] for i, a in enumerate(argv) if a in names]


def test_a_long_parallelism_name_replaces_the_derived_one_and_is_a_conflict(plan: Plan, tmp_path: Path) -> None:
    """`--tensor_parallel_size 4` beside the rendered `--tp_size 8` ran TP4 under a TP8 job (click takes the last),
    and no rule saw it."""
    text = trt_recipe("      --tensor_parallel_size: 4\n      --pipeline_parallel_size: 1\n")
    job = plan(text)[0]
    argv = engines.render(job).argv
    assert values(argv, "--tp_size", "--tensor_parallel_size") == ["4"]
    assert values(argv, "--pp_size", "--pipeline_parallel_size") == ["1"]
    file = tmp_path / "trt.yaml"
    file.write_text(text)
    result = validate_files([file])
    rules = {f.rule for f in result.findings if f.is_error}
    assert "serve.parallelism-conflict" in rules


def test_config_is_the_llm_api_options_file_and_may_not_replace_the_rendered_one(plan: Plan,
                                                                                  tmp_path: Path) -> None:
    """`--config` is `--extra_llm_api_options` under another name: a recipe's file replaced the rendered one (the
    speculative config and the perf metrics the read-back needs) without a word."""
    text = trt_recipe("      --config: /tmp/mine.yaml\n")
    argv = engines.render(plan(text)[0]).argv
    assert values(argv, "--config", "--extra_llm_api_options") == ["/tmp/mine.yaml"]
    file = tmp_path / "trt.yaml"
    file.write_text(text)
    rules = {f.rule for f in validate_files([file]).findings if f.is_error}
    assert "serve.spec-conflict" in rules


def test_recipe_flags_reach_trtllm_serve_in_its_underscore_spelling(plan: Plan) -> None:
    """click folds no `-` into `_`: `--kv-cache-free-gpu-memory-fraction` is `No such option` to trtllm-serve, though
    the policy (which compares flags normalised) passed it."""
    text = trt_recipe("      --kv-cache-free-gpu-memory-fraction: 0.8\n      --max-num-tokens: 8192\n"
                      "      --trust-remote-code: true\n")
    argv = engines.render(plan(text)[0]).argv
    assert values(argv, "--kv_cache_free_gpu_memory_fraction") == ["0.8"]
    assert values(argv, "--max_num_tokens") == ["8192"]
    assert "--trust_remote_code" in argv
    assert not [a for a in argv if a.startswith("--") and "-" in a[2:]]
