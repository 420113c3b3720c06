"""Serving settings of a recipe reach the simulated engine as the engine the job stands in for reads them, or the
result says the simulator left them out. Each case here was once ignored without a word: the prediction carried the
recipe's label (`--disable-radix-cache`, ...) while the simulator ran the engine's default."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import one_job, recipe_text

from llmsweep import engines
from llmsweep.plan import Job, jobs_from_files
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.serve_args import engine_config_from_argv

IMAGES = {"sglang": "lmsysorg/sglang:v0.5.9-cu129", "vllm": "vllm/vllm-openai:v0.26.0",
          "atom": "rocm/atom:v0.1.0"}


def job_of(tmp_path: Path, framework: str, args: str, *, sim_engine: bool = False) -> Job:
    """The one job of a Llama-8B 1k/256 recipe on `framework` whose `serve.args` are `args` (a flow map), served by
    the simulator under `--simulate`, or named `engine: sim` (`sim_engine`)."""
    return one_job(tmp_path, framework=framework, image=IMAGES[framework], osl=256, concs="[16]",
                   engine="name: sim" if sim_engine else None, args=args.strip()[1:-1].strip())


def served(job: Job) -> EngineConfig:
    """The engine `run --simulate` / `predict` serves the job with: its rendered `sim serve` command line."""
    return engine_config_from_argv(engines.render(job, simulate=True).argv)


@pytest.mark.parametrize("sim_engine", [False, True], ids=["--simulate", "engine-sim"])
@pytest.mark.parametrize(("framework", "args", "on"), [
    ("sglang", "{ --disable-radix-cache: true }", False),
    ("sglang", "{ --disable-radix-cache: false }", True),
    ("vllm", "{ --no-enable-prefix-caching: true }", False),
    ("vllm", "{ --enable-prefix-caching: true }", True),
    ("vllm", "{}", True),
])
def test_a_recipe_that_turns_the_prefix_cache_off_is_served_without_one(
        tmp_path: Path, framework: str, args: str, on: bool, sim_engine: bool) -> None:
    """SGLang's `--disable-radix-cache` and vLLM's `--no-enable-prefix-caching` ran with the simulator's prefix
    cache on: an agentic replay of such a recipe predicted a 95 % hit rate for a server that reuses nothing."""
    config = served(job_of(tmp_path, framework, args, sim_engine=sim_engine))
    assert config.prefix_caching is on
    assert config.sim_config().prefix_caching is on


def test_an_engine_served_without_a_prefix_cache_reuses_no_prompt_block() -> None:
    """`sim serve --no-prefix-caching` (what the launch renders) serves a multi-turn conversation with no cached
    prompt tokens; the same engine with its cache reuses the earlier turns."""
    from llmsweep.sim.predict import predict
    from llmsweep.sim.synthetic import AgentWorkload

    def cached(*flags: str) -> int:
        config = engine_config_from_argv(["serve", "--model", "llama-3.1-8b", "--hardware", "h200", *flags])
        records = predict(AgentWorkload(system_tokens=600, turns=4, tool_tokens=200, osl=20), config,
                          concurrency=2, duration=20)
        return sum(int(r.get("cached_tokens") or 0) for r in records)

    assert cached("--no-prefix-caching") == 0
    assert cached() > 0


@pytest.mark.parametrize("sim_engine", [False, True], ids=["--simulate", "engine-sim"])
@pytest.mark.parametrize(("args", "budget"), [
    ("{ --max-prefill-tokens: 32768 }", 32768),
    ("{ --max-prefill-tokens: 4096, --chunked-prefill-size: 4096 }", 4096),
    ("{}", 16384),
])
def test_sglangs_prefill_budget_is_the_steps_budget(tmp_path: Path, args: str, budget: int, sim_engine: bool) -> None:
    """SGLang's `--max-prefill-tokens` (a step's prefill tokens, `PrefillAdder`'s `rem_input_tokens`; 16384 by
    default) was dropped: a recipe that raised or lowered it was served at the simulator's 16384."""
    config = served(job_of(tmp_path, "sglang", args, sim_engine=sim_engine))
    assert config.max_prefill_tokens == budget
    assert config.sim_config().max_prefill_tokens == budget


@pytest.mark.parametrize(("framework", "args", "named"), [
    ("sglang", "{ --schedule-policy: lpm }", ["`--schedule-policy lpm` (it admits waiting requests first come, "
                                             "first served)"]),
    # SGLang's --max-total-tokens is modelled (a cap on the pool: below); a page size other than 64 is not
    ("sglang", "{ --page-size: 16, --max-total-tokens: 100000 }",
     ["`--page-size 16` (its KV and prefix-hash blocks are 64 tokens)"]),
    # vLLM's pinned pools are modelled (below); a block size other than 64 is not
    ("vllm", "{ --block-size: 16, --kv-cache-memory-bytes: 8000000000 }",
     ["`--block-size 16` (its KV and prefix-hash blocks are 64 tokens)"]),
    ("vllm", "{ --scheduling-policy: priority, --no-enable-chunked-prefill: true, --num-gpu-blocks-override: 900 }",
     ["`--scheduling-policy priority` (it admits waiting requests first come, first served)",
      "`--no-enable-chunked-prefill` (it chunks every prompt at its prefill chunk)"]),
    # what the simulator does itself is no gap: FCFS, 64-token blocks, SGLang's default conservativeness
    ("sglang", "{ --schedule-policy: fcfs, --page-size: 64, --schedule-conservativeness: 1 }", []),
    ("vllm", "{ --no-enable-chunked-prefill: false }", []),
])
def test_a_serving_setting_the_simulator_runs_without_is_named_in_the_result_and_by_validate(
        tmp_path: Path, framework: str, args: str, named: list[str]) -> None:
    """A real engine's recipe served by the simulator (`run --simulate`, `predict`) that sets a scheduling or
    memory setting the simulator does not model ran as if it were absent, and said nothing: `validate --simulate`
    gave no warning and the result's `provenance.unmodelled` was empty, so the point carried the recipe's label.
    Both say the setting as the recipe wrote it, one spelling: `--page-size 16`."""
    from llmsweep.engines.sim import unmodelled
    from llmsweep.execute.lifecycle import simulator_provenance
    from llmsweep.policy import validate_files

    job = job_of(tmp_path, framework, args)
    assert unmodelled(job) == named
    assert simulator_provenance(job).get("unmodelled", []) == named
    path = tmp_path / "r.yaml"
    warned = [f.message for f in validate_files([path], simulate=True).findings if f.rule == "serve.sim-ignored"]
    # in the same words (`engines.sim.setting_said`): the result's `--page-size` `16` read apart from validate's
    # `--page-size 16`, and a series label built from it spelt the flag a third way to stderr's
    assert sorted(warned) == sorted(f"the simulator does not model {n}: the prediction runs as if it were absent"
                                    for n in named)
    # on its own engine nothing is ignored
    assert not [f for f in validate_files([path]).findings if f.rule == "serve.sim-ignored"]


@pytest.mark.parametrize("sim_engine", [False, True], ids=["--simulate", "engine-sim"])
def test_sglangs_max_total_tokens_caps_the_kv_pool_it_serves(tmp_path: Path, sim_engine: bool) -> None:
    """SGLang's `--max-total-tokens` caps its KV pool (`min(profiled, cap)`, per rank); the simulator only warned it
    did not model it and served the whole HBM-sized pool, so a recipe that shrinks the pool to put the cache under
    pressure was predicted without any."""
    from llmsweep.sim.engine import sglang_running_cap

    uncapped = served(job_of(tmp_path, "sglang", "{}", sim_engine=sim_engine))
    sized = uncapped.kv_pool_tokens()
    assert uncapped.max_total_tokens is None and sized > 200_000  # Llama-3.1-8B on an H200: ~0.9 M tokens
    capped = served(job_of(tmp_path, "sglang", "{ --max-total-tokens: 6000 }", sim_engine=sim_engine))
    assert capped.max_total_tokens == 6000
    assert capped.sim_config().kv_capacity_tokens == 6000
    if not sim_engine:  # SGLang's own running cap is sized from the pool it keeps (2048 at T / C x 512 < 2048)
        context = capped.context_length
        assert context is not None and capped.max_running_requests == sglang_running_cap(6000, context) == 2048
        assert uncapped.max_running_requests == 4096
    # a cap above the pool HBM leaves binds nothing (SGLang warns and keeps the profiled pool)
    loose = served(job_of(tmp_path, "sglang", f"{{ --max-total-tokens: {10 * sized} }}", sim_engine=sim_engine))
    assert loose.sim_config().kv_capacity_tokens == sized
    # each DP-attention rank takes the cap: the engine's pool is the ranks' together
    assert capped.model_copy(update={"tp": 2, "dp_attention": 2}).kv_pool_tokens() == 12_000


def test_a_draft_tree_is_named_as_verified_as_a_chain(tmp_path: Path) -> None:
    """SGLang's EAGLE tree (top-k 4, 8 draft tokens) is served as a chain of K + 1 verified tokens."""
    from llmsweep.engines.sim import unmodelled

    path = tmp_path / "r.yaml"
    text = recipe_text(framework="sglang", image=IMAGES["sglang"], osl=256, concs="[16]", arm=", spec-decoding: mtp",
                       args="")
    path.write_text(text.replace("    args: {  }\n", "    spec-decoding: { method: eagle, num-steps: 3, topk: 4, "
                                 "num-draft-tokens: 8 }\n"), encoding="utf-8")
    (job,) = jobs_from_files([path])
    assert unmodelled(job) == ["a draft tree (top-k 4, 8 draft tokens; it verifies a chain of K + 1 = 4)"]


@pytest.mark.parametrize(("args", "ratio"), [
    ("{ --enable-hierarchical-cache: true }", 2),
    ("{ --enable-hierarchical-cache: true, --hicache-ratio: 4 }", 4),
])
def test_hicache_without_a_size_gets_sglangs_host_pool_of_ratio_times_the_device_pool(
        tmp_path: Path, args: str, ratio: int) -> None:
    """SGLang with `--enable-hierarchical-cache` and no `--hicache-size` gives each rank a host pool of
    `--hicache-ratio` (2.0) device pools. The simulator refused the job instead, telling the user to add
    `--dram-gb`, a flag of its own no recipe writes."""
    config = served(job_of(tmp_path, "sglang", args))
    sized = config.sim_config()
    assert sized.host_capacity_tokens == ratio * sized.kv_capacity_tokens


@pytest.mark.parametrize("sim_engine", [False, True], ids=["--simulate", "engine-sim"])
@pytest.mark.parametrize(("args", "pool"), [
    # vLLM's default block is 16 tokens: 900 blocks hold 14,400, whatever the memory fraction
    ("{ --num-gpu-blocks-override: 900 }", 900 * 16),
    # the recipe's block size counts (the simulator's own blocks stay 64: `unmodelled` names it)
    ("{ --num-gpu-blocks-override: 900, --block-size: 32 }", 900 * 32),
    # the block override replaces the count the bytes would give, as vLLM's may_override_num_blocks does
    ("{ --num-gpu-blocks-override: 900, --kv-cache-memory-bytes: 8000000000 }", 900 * 16),
    # bytes on each GPU over Llama-3.1-8B's 131,072 KV bytes a token (bf16)
    ("{ --kv-cache-memory-bytes: 8000000000 }", 8_000_000_000 // 131_072),
    # beyond the memory fraction (0.92 of 150.8 GB leaves ~121 GB beside the weights) but within the GPU: served
    ("{ --kv-cache-memory-bytes: 130000000000 }", 130_000_000_000 // 131_072),
])
def test_vllms_pinned_kv_pool_is_the_pool_it_serves(tmp_path: Path, args: str, pool: int, sim_engine: bool) -> None:
    """vLLM's `--num-gpu-blocks-override` and `--kv-cache-memory-bytes` pin its KV pool whatever
    `--gpu-memory-utilization`; the simulator only warned it did not model them and served the pool it sized from
    HBM (~0.9 M tokens here), so a recipe that shrinks the pool to put the cache under pressure was predicted
    without any, and `validate --simulate` said so."""
    from llmsweep.policy import validate_files
    from llmsweep.sim.engine import build_core

    job = job_of(tmp_path, "vllm", args, sim_engine=sim_engine)
    config = served(job)
    assert config.kv_pool_tokens() == config.sim_config().kv_capacity_tokens == pool
    assert build_core(config).capacity_tokens == pool // 64 * 64  # the core's whole 64-token blocks
    assert any(note.startswith("KV pool pinned at ") for note in engines.render(job, simulate=True).notes)
    findings = validate_files([tmp_path / "r.yaml"], simulate=True).findings
    assert not [f for f in findings if f.rule == "serve.sim-ignored" and ("blocks-override" in f.message
                                                                          or "memory-bytes" in f.message)]


def test_each_vllm_data_parallel_rank_takes_the_pinned_blocks(tmp_path: Path) -> None:
    """vLLM's block override is each DP engine's (each rank's) block count: eight ranks hold eight times the blocks.
    DeepSeek-R1's MLA attention backend may force a larger block, which the note says is not modelled."""
    from support.recipes import DSR1_FP8

    job = one_job(tmp_path, framework="vllm", image=IMAGES["vllm"], served=DSR1_FP8, tp=8, isl=8192, osl=1024,
                  arm=", ep: 8, dp-attn: true", args="--num-gpu-blocks-override: 1000")
    spec = engines.render(job, simulate=True)
    config = engine_config_from_argv(spec.argv)
    assert (config.dp_attention, config.kv_pool_tokens()) == (8, 8 * 1000 * 16)
    (note,) = [n for n in spec.notes if n.startswith("KV pool pinned at ")]
    assert "on each of the 8 DP ranks: 128000 tokens" in note and "MLA" in note
    # and the result says it (`provenance.unmodelled`), not only the launch's note; a pinned --block-size closes it
    from llmsweep.engines.sim import unmodelled

    assert any("MLA model" in gap for gap in unmodelled(job)), unmodelled(job)
    (tmp_path / "pinned").mkdir()
    pinned = one_job(tmp_path / "pinned", framework="vllm", image=IMAGES["vllm"], served=DSR1_FP8, tp=8, isl=8192,
                     osl=1024, arm=", ep: 8, dp-attn: true",
                     args="--num-gpu-blocks-override: 1000, --block-size: 64")
    assert not any("MLA model" in gap for gap in unmodelled(pinned))


@pytest.mark.parametrize(("args", "said"), [
    ("{ --kv-cache-memory-bytes: 200000000000 }", "a pinned KV pool of 200000000000 bytes a GPU"),
    ("{ --num-gpu-blocks-override: 100000000 }", "a pinned KV pool of 1600000000 tokens"),
])
def test_a_pinned_kv_pool_that_does_not_fit_the_gpu_is_refused(tmp_path: Path, args: str, said: str) -> None:
    """vLLM allocates a pinned pool on each GPU whatever its memory fraction; one larger than the GPU leaves beside
    the weights fails at start-up (CUDA out of memory) and the engine never serves: the simulator refuses the job
    (`predict` and `run --simulate` list it as not modelled), naming the most that fits, rather than serve a pool the
    engine never had."""
    from llmsweep.errors import ConfigError
    from llmsweep.execute.virtual import NotModelled, engine_config

    spec = engines.render(job_of(tmp_path, "vllm", args), simulate=True)
    with pytest.raises(ConfigError, match=said) as raised:
        engine_config_from_argv(spec.argv).kv_pool_tokens()
    assert "CUDA out of memory" in raised.value.message and raised.value.fix is not None
    assert "pin at most 1019487 tokens" in raised.value.fix  # (150.76 GB - 1 GiB - 16.06 GB) / 131,072
    with pytest.raises(NotModelled, match=said):
        engine_config(spec)


@pytest.mark.parametrize(("pin", "unit"), [("--kv-cache-memory-bytes: 20G", "bytes"),
                                         ("--kv-cache-memory-bytes: -1", "bytes"),
                                         ("--num-gpu-blocks-override: -900", "blocks"),
                                         ("--num-gpu-blocks-override: 0", "blocks")])
def test_a_pinned_kv_pool_that_is_no_whole_number_is_refused(tmp_path: Path, pin: str, unit: str) -> None:
    """vLLM reads `--kv-cache-memory-bytes 20G` (its releases read the suffixes differently); the simulator asks for
    the bytes rather than guess or serve the sized pool under the recipe's label. A negative count passed as one
    (`--pinned-kv-tokens -14400`), which `sim serve` then failed on without the recipe's flag or a fix."""
    from llmsweep.errors import ConfigError

    flag = pin.split(":")[0]
    with pytest.raises(ConfigError, match=f"{flag} as a positive whole number") as raised:
        engines.render(job_of(tmp_path, "vllm", f"{{ {pin} }}"), simulate=True)
    assert raised.value.fix is not None and f"whole number of {unit}" in raised.value.fix


@pytest.mark.parametrize("block", ["16k", "0"])
def test_a_pinned_block_count_of_a_block_size_that_is_no_whole_number_is_refused(tmp_path: Path, block: str) -> None:
    """`--num-gpu-blocks-override` counts blocks of the recipe's `--block-size`. One that is no positive whole number
    was read as unset by the pool (900 blocks of vLLM's default 16 tokens, the note naming vLLM's default) and as
    pinned by the launch's KV-block note: two readings of one flag. The simulator reads it once, and asks for the
    tokens rather than serve a pool of another block under the recipe's label."""
    from llmsweep.errors import ConfigError

    job = job_of(tmp_path, "vllm", f"{{ --num-gpu-blocks-override: 900, --block_size: '{block}' }}")
    with pytest.raises(ConfigError, match=f"--block-size as a positive whole number .* '{block}'") as raised:
        engines.render(job, simulate=True)
    assert raised.value.fix is not None and "whole number of tokens (vLLM's default: 16)" in raised.value.fix


def test_the_block_a_pinned_count_is_in_and_the_kv_block_note_read_one_flag(tmp_path: Path) -> None:
    """The pool's block and the launch's KV-block note read the page flag as vLLM's parser does (`--block_size` is
    `--block-size`): pinned, the pool counts its blocks and no note names vLLM's default page."""
    from llmsweep.engines.sim import engine_kv_block, engine_page

    job = job_of(tmp_path, "vllm", "{ --num-gpu-blocks-override: 900, --block_size: 32 }")
    page = engine_page(job)
    assert page is not None and (page.pinned, page.tokens) == (True, 32) and engine_kv_block(job) is None
    assert served(job).kv_pool_tokens() == 900 * 32
    (note,) = [n for n in engines.render(job, simulate=True).notes if n.startswith("KV pool pinned at ")]
    assert "900 blocks of 32 tokens (the recipe's --block-size)" in note


@pytest.mark.parametrize("pin", ["--num-gpu-blocks-override: 900", "--kv-cache-memory-bytes: 20000000000",
                                 "--num_gpu_blocks_override: 900"])
def test_a_kv_pool_pinned_in_vllms_flags_is_refused_for_atom_whose_parser_has_none(tmp_path: Path, pin: str) -> None:
    """ATOM's parser defines neither of vLLM's KV-pool pins (ROCm/ATOM EngineArgs; it sizes its block count from
    --gpu-memory-utilization), so argparse refuses the launch. The simulator counted the blocks in vLLM's and served
    the pool under ATOM's label; it now refuses the job with the reason, and `validate` says so at the flag's line
    (`serve.unsupported-arg`) with the same fix."""
    from llmsweep.engines.atom import POOL_PIN_FIX
    from llmsweep.errors import ConfigError
    from llmsweep.policy import validate_files

    job = job_of(tmp_path, "atom", f"{{ {pin} }}")
    written = pin.split(":")[0]
    with pytest.raises(ConfigError, match=f"pins the KV pool with {written}, which ATOM \\(ROCm\\)'s parser does "
                                          "not define") as raised:
        engines.render(job, simulate=True)
    assert raised.value.fix == POOL_PIN_FIX
    (found,) = [f for f in validate_files([tmp_path / "r.yaml"]).findings if f.rule == "serve.unsupported-arg"]
    assert found.severity.value == "error" and found.fix == POOL_PIN_FIX and found.path is not None \
        and found.path.endswith(written)


@pytest.mark.parametrize(("framework", "engine"), [("sglang", "SGLang"), ("trtllm", "TensorRT-LLM")])
def test_vllms_pool_pins_are_refused_for_every_engine_whose_parser_has_none(
        tmp_path: Path, framework: str, engine: str) -> None:
    """As for ATOM: the simulator served a vLLM pool under SGLang's or TensorRT-LLM's label, and `validate` said
    nothing, where the engine's parser refuses the flag. The adapter's `unsupported_args` is the one home of the
    reason and fix, which both read."""
    from llmsweep.engines import ADAPTERS
    from llmsweep.errors import ConfigError
    from llmsweep.policy import validate_files

    image = {"sglang": IMAGES["sglang"], "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"}[framework]
    job = one_job(tmp_path, framework=framework, image=image, osl=256, concs="[16]",
                  args="--num-gpu-blocks-override: 900")
    fix = ADAPTERS[framework].unsupported_args["--num-gpu-blocks-override"]
    with pytest.raises(ConfigError, match=f"which {engine}'s parser does not define") as raised:
        engines.render(job, simulate=True)
    assert raised.value.fix == fix
    (found,) = [f for f in validate_files([tmp_path / "r.yaml"]).findings if f.rule == "serve.unsupported-arg"]
    assert found.fix == fix


@pytest.mark.parametrize(("framework", "args", "page"), [
    ("sglang", "{}", ("SGLang", 1)),
    ("vllm", "{}", ("vLLM", 16)),
    ("atom", "{}", ("ATOM (ROCm)", 16)),  # ROCm/ATOM EngineArgs --block-size, default 16
    # a pinned page is the recipe's: one other than 64 is in `unmodelled`, 64 is the simulator's own
    ("vllm", "{ --block-size: 16 }", None),
    ("sglang", "{ --page-size: 64 }", None),
])
def test_the_engines_own_page_is_named_where_the_simulator_serves_its_64_token_blocks(
        tmp_path: Path, framework: str, args: str, page: tuple[str, int] | None) -> None:
    """SGLang pages its KV cache in 1 token and vLLM in 16 when the launch sets none; the simulator serves 64-token
    blocks (its prefix hits and KV allocations are in whole blocks) and said so only for a recipe that pinned a page,
    so every SGLang and vLLM prediction ran at another page than the engine's without a word. The result's
    provenance and the launch's notes name it (the simulator does not model it: docs/simulator.md, "The KV block")."""
    from llmsweep.execute.lifecycle import simulator_provenance
    from llmsweep.metrics.model import Provenance

    job = job_of(tmp_path, framework, args)
    block = Provenance.model_validate(simulator_provenance(job)).kv_block
    notes = [n for n in engines.render(job, simulate=True).notes if n.startswith("KV blocks of 64 tokens")]
    if page is None:
        assert block is None and not notes
        return
    assert block is not None and (block.tokens, block.engine, block.engine_tokens) == (64, *page)
    assert len(notes) == 1 and f"{page[0]} pages its KV cache in {page[1]} token" in notes[0]
    # one shape of the record: the launch's block writes the result's type, every field of it filled (a field added
    # to the record and not to a second, hand-copied list of them is not left empty)
    from llmsweep.engines.sim import engine_kv_block

    derived = engine_kv_block(job)
    assert derived is not None and derived.record() == block
    assert set(type(block).model_fields) == set(block.model_dump(exclude_none=True))
    assert block.source is not None and block.source in notes[0]
    # a recipe of the simulator itself stands in for no engine: nothing to name
    own = one_job(tmp_path, framework="sim", image="ghcr.io/llmsweep/sim:v1", osl=256, concs="[16]")
    assert "kv_block" not in simulator_provenance(own)
