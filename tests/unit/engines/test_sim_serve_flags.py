"""The simulator's launch is written in `sim serve`'s own spellings (`llmsweep.sim.serve_flags`, the one home
`sim.serve_args` declares the options with): every flag the adapter renders is one `sim serve`'s parser takes, each
value it meant is the value the parser reads, and what the adapter reads back from its own launch (the pool it sizes
defaults from, `engines.sim.launch_engine`) is what `sim serve` would serve. The adapter once wrote each spelling by
hand (`a["--hardware"]`, `args["--pinned-kv-tokens"]`): a renamed option would have left launches the server refuses,
or a launch read back under a spelling it no longer carries."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from support.recipes import DSR1_FP8, one_job

import llmsweep
from llmsweep import engines
from llmsweep.engines import launched_job
from llmsweep.engines.sim import SimAdapter, launch_engine
from llmsweep.plan import Job
from llmsweep.sim.serve_args import _parser, engine_config_from_argv

SGLANG_IMAGE = "lmsysorg/sglang:v0.5.12"
VLLM_IMAGE = "vllm/vllm-openai:v0.26.0"

POOL_FIELDS = ("model", "hardware", "tp", "ep", "dp_attention", "precision", "kv_dtype", "mem_fraction_static",
               "max_total_tokens", "pinned_kv_tokens", "kv_cache_memory_bytes", "context_length", "vllm_version")
"""The fields of the engine the adapter reads back from its launch (`launch_engine`) to size its defaults."""

JOBS: dict[str, dict[str, Any]] = {
    "plain": dict(framework="sglang", image=SGLANG_IMAGE),
    "tp-dp-attention": dict(framework="sglang", image=SGLANG_IMAGE, served=DSR1_FP8, tp=8, isl=8192, osl=1024,
                            arm=", ep: 8, dp-attn: true", args="--max-running-requests: 100"),
    "pinned-kv-vllm-version": dict(framework="vllm", image=VLLM_IMAGE, osl=256, concs="[16]",
                                   args="--num-gpu-blocks-override: 63000, --block-size: 16, "
                                        "--max-model-len: 32768"),
    "pinned-bytes": dict(framework="vllm", image=VLLM_IMAGE, osl=256, concs="[16]",
                         args="--kv-cache-memory-bytes: 21474836480, --no-enable-prefix-caching: true"),
    "context-kv-dtype-offload": dict(framework="sglang", image=SGLANG_IMAGE, isl=8192, osl=1024,
                                     args="--context-length: 16384, --kv-cache-dtype: fp8_e4m3, "
                                          "--enable-hierarchical-cache: true, --hicache-size: 64"),
    "speculative": dict(framework="sglang", image=SGLANG_IMAGE, served=DSR1_FP8, tp=8, arm=", spec-decoding: mtp"),
    "uncalibrated-trtllm": dict(framework="trt", image="nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6"),
}
"""Representative jobs: each renders a different part of the launch (TP/EP/DP attention and a split running cap, a
pool pinned in vLLM's blocks with the release it is judged in, pinned bytes and no prefix cache, a context with a KV
dtype and a DRAM tier, a pinned acceptance length, an engine no calibration was fitted on)."""


def _job(tmp_path: Path, name: str) -> Job:
    """The one job of the representative recipe `name` (written in a folder of its own under `tmp_path`), as its
    server is launched (`engines.launched_job`: the recipe's context flag is its context)."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    return launched_job(one_job(folder, **JOBS[name]))


def _parsed(argv: tuple[str, ...] | list[str]) -> tuple[click.Command, click.Context]:
    """`sim serve`'s own parser over the launch's options (what follows `serve`)."""
    args = list(argv)
    command = _parser()
    ctx = command.make_context("serve", args[args.index("serve") + 1:], resilient_parsing=False)
    return command, ctx


def _option(command: click.Command, spelling: str) -> tuple[click.Option, bool]:
    """`sim serve`'s option that `spelling` names, and whether it is the option's off spelling (`--no-...`)."""
    for p in command.params:
        if isinstance(p, click.Option) and spelling in (*p.opts, *p.secondary_opts):
            return p, spelling in p.secondary_opts
    raise AssertionError(f"the adapter renders {spelling}, which `sim serve` does not take")


@pytest.mark.parametrize("name", sorted(JOBS))
def test_each_rendered_flag_is_a_sim_serve_option_and_parses_to_the_value_the_adapter_meant(
        tmp_path: Path, name: str) -> None:
    job = _job(tmp_path, name)
    args, _ = SimAdapter().merged_args(job, 8000)
    spec = SimAdapter().render(job, port=8000)
    command, ctx = _parsed(spec.argv)
    for spelling, value in args.items():
        option, off = _option(command, spelling)
        if option.is_flag:  # a switch: its own spelling turns it on, its `--no-` spelling off
            assert option.is_bool_flag, spelling
            expected = not off
        else:
            expected = option.type_cast_value(ctx, value)
        assert ctx.params[option.name] == expected, (spelling, value, ctx.params[option.name])


@pytest.mark.parametrize("name", sorted(JOBS))
def test_the_engine_the_adapter_reads_back_is_the_engine_sim_serve_serves(tmp_path: Path, name: str) -> None:
    """`launch_engine` reads the launch the adapter wrote, by the same spellings: the pool it sizes the running cap,
    the HiCache tier and `validate`'s pinned-pool check from is the one `sim serve` serves."""
    job = _job(tmp_path, name)
    args, _ = SimAdapter().merged_args(job, 8000)
    served = engine_config_from_argv(SimAdapter().render(job, port=8000).argv)
    read_back = launch_engine(args)
    assert {f: getattr(read_back, f) for f in POOL_FIELDS} == {f: getattr(served, f) for f in POOL_FIELDS}


def test_the_jobs_render_what_they_stand_for(tmp_path: Path) -> None:
    """The check above sees each part of the launch it is meant to: the representative jobs do render them."""
    from llmsweep.sim import serve_flags as sf

    rendered = {name: set(SimAdapter().merged_args(_job(tmp_path, name), 8000)[0]) for name in JOBS}
    assert {sf.TP, sf.EP, sf.DP_ATTENTION, sf.MAX_RUNNING_REQUESTS, sf.PREFILL_BUDGET} <= rendered["tp-dp-attention"]
    assert {sf.PINNED_KV_TOKENS, sf.VLLM_VERSION, sf.CONTEXT_LENGTH} <= rendered["pinned-kv-vllm-version"]
    assert {sf.KV_CACHE_MEMORY_BYTES, sf.NO_PREFIX_CACHING} <= rendered["pinned-bytes"]
    assert {sf.CONTEXT_LENGTH, sf.KV_DTYPE, sf.KV_OFFLOAD, sf.DRAM_GB} <= rendered["context-kv-dtype-offload"]
    assert {sf.SPEC_METHOD, sf.SPEC_K, sf.ACCEPTANCE_LENGTH} <= rendered["speculative"]
    assert sf.NO_CALIBRATION in rendered["uncalibrated-trtllm"]


def test_renaming_a_sim_serve_option_in_its_home_renames_it_in_the_launch(tmp_path: Path) -> None:
    """With options renamed in `sim.serve_flags` (in a fresh process, before any room is imported), the launch
    carries the new spellings, `sim serve` parses them back to the same values, and no old spelling is left."""
    from support.recipes import write_recipe

    recipe = write_recipe(tmp_path / "r.yaml", **JOBS["pinned-kv-vllm-version"])
    renamed = {"HARDWARE": "--gpu-sku", "TP": "--tensor-ranks", "PINNED_KV_TOKENS": "--kv-pool-tokens",
               "VLLM_VERSION": "--stands-for-vllm", "CONTEXT_LENGTH": "--context-tokens",
               "MAX_RUNNING_REQUESTS": "--running-cap", "ENGINE_STYLE": "--style"}
    code = f"""
import json
import llmsweep.sim.serve_flags as sf
old = {{name: getattr(sf, name) for name in {sorted(renamed)!r}}}
for name, spelling in {renamed!r}.items():
    setattr(sf, name, spelling)
from pathlib import Path
from llmsweep import engines
from llmsweep.plan import jobs_from_files
from llmsweep.sim.serve_args import engine_config_from_argv
(job,) = jobs_from_files([Path({str(recipe)!r})])
argv = list(engines.render(job, simulate=True).argv)
config = engine_config_from_argv(argv)
print(json.dumps({{"argv": argv, "old": old, "config": config.model_dump(mode="json")}}))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    argv, config = out["argv"], out["config"]
    assert not set(out["old"].values()) & set(argv), argv
    assert set(renamed.values()) <= set(argv), argv
    fields = {*POOL_FIELDS, "max_running_requests", "engine_style"}
    served = engine_config_from_argv(engines.render(_job(tmp_path, "pinned-kv-vllm-version"), simulate=True).argv)
    assert {f: config[f] for f in fields} == served.model_dump(mode="json", include=fields)


def test_the_adapter_writes_no_sim_serve_spelling_by_hand() -> None:
    """`engines.sim` names `sim serve`'s options through `sim.serve_flags` only. Its string literals still hold the
    recipe flags of the engines it stands in for (`--max-num-seqs`, `--mem-fraction-static`), which are theirs; a
    spelling only `sim serve` takes (no real engine's parser defines it: the engines catalog's flag lists) written
    there by hand is a copy a rename would leave behind."""
    from llmsweep.catalog.engines import known_flags

    command = _parser()
    ours = {o for p in command.params for o in (*p.opts, *getattr(p, "secondary_opts", ())) if o.startswith("--")}
    real = set().union(*(known_flags(e) for e in ("vllm", "sglang", "atom", "trtllm")))
    only_ours = sorted(ours - real, key=len, reverse=True)
    assert {"--hardware", "--pinned-kv-tokens", "--dp-attention", "--vllm-version", "--engine-style"} <= set(only_ours)
    spelled = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, only_ours)) + r")(?![\w-])")
    path = Path(llmsweep.__file__).resolve().parent / "engines" / "sim.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    found = [(node.lineno, m[1]) for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
             for m in spelled.finditer(node.value)]
    assert not found, f"engines/sim.py spells `sim serve` options by hand (line, spelling): {found}"
