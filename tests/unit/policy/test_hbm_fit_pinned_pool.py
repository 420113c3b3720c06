"""`resources.hbm-fit` judges a KV pool pinned in vLLM's terms (`--num-gpu-blocks-override`, `--kv-cache-memory-bytes`)
as vLLM treats it: against the GPU, against one request at the context, and (under the bytes) not against the memory
fraction vLLM then ignores.

vLLM allocates such a pool on each GPU whatever its memory fraction; one larger than what the weights leave fails at
start-up (CUDA out of memory). The simulator refused the job at `predict`/`run --simulate` time, but `validate` said
nothing: the memory-fraction check costs one request's KV, not the pinned pool. Both now read one check
(`EngineConfig.pinned_pool_refusal`), in the same words and with the same fix.

Figures: Llama 3.1 8B at bf16 on one H200 (150.76 GB): 16.06 GB of weights and 131,072 KV bytes a token; the weights
and the simulator's 1 GiB reserve leave room for 1,019,487 tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import one_job, write_recipe

from llmsweep import engines
from llmsweep.errors import ConfigError
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files
from llmsweep.sim.serve_args import engine_config_from_argv

VLLM = "vllm/vllm-openai:v0.26.0"


def _hits(tmp_path: Path, args: str, *, simulate: bool = False, image: str = VLLM) -> list[str]:
    one_job(tmp_path, framework="vllm", image=image, osl=256, concs="[16]", args=args)
    return [f"{f.message} | {f.fix}" for f in validate_files([tmp_path / "r.yaml"], simulate=simulate).findings
            if f.rule == "resources.hbm-fit"]


@pytest.mark.parametrize(("args", "said"), [
    ("--num-gpu-blocks-override: 100000000", "a pinned KV pool of 1600000000 tokens needs 209715.2 GB"),
    ("--kv-cache-memory-bytes: 200000000000", "a pinned KV pool of 200000000000 bytes a GPU needs 200.0 GB"),
    # the block override counts blocks of the recipe's --block-size, as the simulator's pool does
    ("--num-gpu-blocks-override: 40000, --block-size: 32", "a pinned KV pool of 1280000 tokens needs 167.8 GB"),
])
@pytest.mark.parametrize("simulate", [False, True], ids=["validate", "validate --simulate"])
def test_a_pinned_pool_larger_than_the_gpu_is_warned_of_at_validate_in_the_simulators_words(
        tmp_path: Path, args: str, said: str, simulate: bool) -> None:
    (hit,) = _hits(tmp_path, args, simulate=simulate)
    message, fix = hit.split(" | ")
    assert message.startswith(said), message
    assert "CUDA out of memory" in message, message
    assert "the engine allocates a pinned pool whatever its memory fraction" in message, message
    assert fix.startswith("pin at most 1019487 tokens"), fix
    # the same words the simulator refuses the job with at predict / run time
    spec = engines.render(one_job(tmp_path, framework="vllm", image=VLLM, osl=256, concs="[16]", args=args),
                          simulate=True)
    with pytest.raises(ConfigError) as raised:
        engine_config_from_argv(spec.argv).kv_pool_tokens()
    assert raised.value.message == f"simulator: {message}" and raised.value.fix == fix


@pytest.mark.parametrize("args", [
    "--num-gpu-blocks-override: 900",
    "--kv-cache-memory-bytes: 130000000000",  # beyond vLLM's 0.92 beside the weights, within the GPU: it starts
    "--num-gpu-blocks-override: 63000, --block-size: 16",  # 1,008,000 tokens: just fits
])
def test_a_pinned_pool_that_fits_the_gpu_is_not_warned_of(tmp_path: Path, args: str) -> None:
    assert _hits(tmp_path, args) == []


def test_a_fraction_vllm_ignores_under_pinned_bytes_is_not_checked(tmp_path: Path) -> None:
    """vLLM takes `--kv-cache-memory-bytes` as the memory for KV without profiling ("This does not respect the
    gpu_memory_utilization config"): at `--gpu-memory-utilization 0.1` (15 GB of the H200, under the 16 GB of weights)
    the job starts and serves its 20 GB pool. The rule still ran its memory-fraction check and warned of a job that
    runs. Under the block override alone, a release before vllm-project/vllm#41069 does profile at the fraction (and
    refuses to start where the profiled memory holds no request), so there the fraction is still checked; from 0.21.0
    the override's blocks take precedence over the profiled memory in that check, and it is not."""
    assert _hits(tmp_path, "--gpu-memory-utilization: 0.1, --kv-cache-memory-bytes: 20000000000") == []
    for image in ("vllm/vllm-openai:v0.19.1", "vllm/vllm-openai:nightly"):  # before #41069, and a release not known
        (hit,) = _hits(tmp_path, "--gpu-memory-utilization: 0.1, --num-gpu-blocks-override: 900", image=image)
        assert "exceeds 15 GB (memory fraction 0.1 from the recipe's --gpu-memory-utilization" in hit, (image, hit)
    assert _hits(tmp_path, "--gpu-memory-utilization: 0.1, --num-gpu-blocks-override: 900") == []  # 0.26.0
    (hit,) = _hits(tmp_path, "--gpu-memory-utilization: 0.1")
    assert "exceeds 15 GB" in hit, hit


@pytest.mark.parametrize(("args", "said", "fix"), [
    # 1e8 bytes hold 762 tokens (131,072 bytes each) of the 1,536 the launch serves (1,024 + 256 + 256): vLLM's own
    # start-up check refuses it, in these words
    ("--kv-cache-memory-bytes: 100000000",
     "a pinned KV pool of 100000000 bytes a GPU holds 762 tokens of meta-llama/Llama-3.1-8B-Instruct's KV, less than "
     "one request at the context the launch serves (1536 tokens): vLLM refuses to start (\"To serve at least one "
     "request with the models's max seq len (1536), (0.19 GiB KV cache is needed, which is larger than the available "
     "KV cache memory (0.09 GiB)\"",
     "pin at least 201326592 bytes on each GPU (--kv-cache-memory-bytes), or serve a context of at most 762 tokens "
     "(--max-model-len)"),
    # 10 blocks of 16 on vLLM 0.26.0: it refuses to start (vllm-project/vllm#41069)
    ("--num-gpu-blocks-override: 10",
     "a pinned KV pool of 160 tokens holds less than one request at the context the launch serves (1536 tokens): "
     "vLLM refuses to start (\"To serve at least one request with the models's max seq len (1536) …\": its start-up "
     "check reads the pool --num-gpu-blocks-override pins, vllm-project/vllm#41069), so the job never serves",
     "pin at least 1536 tokens on each DP rank (--num-gpu-blocks-override x the block size"),
    # the recipe's context flag is the context the launch serves
    ("--num-gpu-blocks-override: 900, --max-model-len: 32768",
     "a pinned KV pool of 14400 tokens holds less than one request at the context the launch serves (32768 tokens)",
     "or serve a context of at most 14400 tokens (--max-model-len, or -1: vLLM then fits it to the pool)"),
])
@pytest.mark.parametrize("simulate", [False, True], ids=["validate", "validate --simulate"])
def test_a_pinned_pool_short_of_one_request_at_the_context_is_warned_of_and_refused_alike(
        tmp_path: Path, args: str, said: str, fix: str, simulate: bool) -> None:
    """Nothing checked that a pinned pool holds one request at the context the engine serves. vLLM refuses to start
    where pinned bytes fall short (its `_check_enough_kv_cache_memory` reads them as the memory for KV), and, from
    0.21.0 (these jobs' 0.26.0 included), where a block count does (vllm-project/vllm#41069: the check reads the
    override's blocks). `validate` warns, and the simulator refuses the job in the same words and fix
    (`EngineConfig.pinned_pool_refusal`, the one home of the arithmetic)."""
    (hit,) = _hits(tmp_path, args, simulate=simulate)
    message, given = hit.split(" | ")
    assert message.startswith(said), message
    assert given.startswith(fix) or fix in given, given
    spec = engines.render(one_job(tmp_path, framework="vllm", image=VLLM, osl=256, concs="[16]", args=args),
                          simulate=True)
    with pytest.raises(ConfigError) as raised:
        engine_config_from_argv(spec.argv).kv_pool_tokens()
    assert raised.value.message == f"simulator: {message}" and raised.value.fix == given


@pytest.mark.parametrize("args", [
    "--num-gpu-blocks-override: 96",  # 1,536 tokens: one request at the context
    "--kv-cache-memory-bytes: 201326592",  # the bytes the fix names
    "--num-gpu-blocks-override: 900, --max-model-len: 14400",
])
def test_a_pinned_pool_that_holds_one_request_at_the_context_passes(tmp_path: Path, args: str) -> None:
    assert _hits(tmp_path, args) == []


@pytest.mark.parametrize(("kw", "args", "said"), [
    # no context flag: vLLM serves the model's native context (131,072 tokens of Llama 3.1 8B), 16 GiB of KV
    ({"agentic": True, "runner": "cluster:h200-cw"}, "--kv-cache-memory-bytes: 10000000000",
     "a pinned KV pool of 10000000000 bytes a GPU holds 76293 tokens of meta-llama/Llama-3.1-8B-Instruct's KV, less "
     "than one request at meta-llama/Llama-3.1-8B-Instruct's native context (131072 tokens, vLLM's --max-model-len "
     "when the launch sets none): vLLM refuses to start (\"To serve at least one request with the models's max seq "
     "len (131072), (16.00 GiB KV cache is needed"),
    # each DP rank takes the block count; one request sits on one rank
    ({"tp": 2, "arm": ", dp-attn: true"}, "--num-gpu-blocks-override: 40",
     "a pinned KV pool of 1280 tokens (640 on each of the 2 DP ranks) holds less than one request at the context the "
     "launch serves (1536 tokens)"),
])
def test_the_context_is_the_engines_and_a_request_sits_on_one_dp_rank(
        tmp_path: Path, kw: dict[str, object], args: str, said: str) -> None:
    path = write_recipe(tmp_path / "r.yaml", framework="vllm", image=VLLM, osl=256, args=args, **kw)
    (hit,) = [f.message for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert hit.startswith(said), hit
    (job,) = jobs_from_files([path])
    with pytest.raises(ConfigError) as raised:
        engine_config_from_argv(engines.render(job, simulate=True).argv).kv_pool_tokens()
    assert raised.value.message == f"simulator: {hit}"


@pytest.mark.parametrize(("image", "said", "not_said"), [
    ("vllm/vllm-openai:v0.26.0", "vLLM refuses to start (\"To serve at least one request", "vllm-project/vllm#35541"),
    # before vllm-project/vllm#41069 the start-up check read the profiled memory: vLLM started, then stalled
    ("vllm/vllm-openai:v0.19.1", ": vLLM starts (its start-up check reads the memory it profiled at its memory "
     "fraction, before --num-gpu-blocks-override replaces the block count), then never schedules a request longer "
     "than the pool", "#41069"),
    # 0.20.x (not read) and an image that names no release: which vLLM does is not established, so both are said
    ("vllm/vllm-openai:v0.20.1", ": from 0.21.0 vLLM refuses to start", None),
    ("vllm/vllm-openai:nightly", "before 0.20.0 vLLM starts", None),
])
def test_a_block_pool_short_of_a_request_is_said_in_the_jobs_vllm_release(
        tmp_path: Path, image: str, said: str, not_said: str | None) -> None:
    """The refusal of a pool pinned in blocks said vLLM starts and stalls (vllm-project/vllm#35541) for every release;
    from vllm-project/vllm#41069 (first taken in 0.21.0) vLLM refuses to start instead. The simulator's launch
    carries the job's release (`--vllm-version`), and `validate` and the simulator say what that release does."""
    (hit,) = _hits(tmp_path, "--num-gpu-blocks-override: 10", image=image)
    message, fix = hit.split(" | ")
    assert said in message, message
    assert not_said is None or not_said not in message, message
    assert ("or -1: vLLM then fits it to the pool" in fix) == image.endswith("v0.26.0"), fix  # #41069's auto-fit
    if not_said is None:
        assert "which it does is not established" in message and "#41069" in message and "#35541" in message
    spec = engines.render(one_job(tmp_path, framework="vllm", image=image, osl=256, concs="[16]",
                                  args="--num-gpu-blocks-override: 10"), simulate=True)
    with pytest.raises(ConfigError) as raised:
        engine_config_from_argv(spec.argv).kv_pool_tokens()
    assert raised.value.message == f"simulator: {message}" and raised.value.fix == fix
