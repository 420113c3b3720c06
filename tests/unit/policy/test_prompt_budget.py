"""`serve.prompt-budget`: trtllm-serve (PyTorch backend) runs with chunked prefill off unless `--enable_chunked_prefill`
is given, and then refuses a prompt of more than `--max_num_tokens` tokens (8192 by default; per context-parallel
rank) with a 400 — `tensorrt_llm/llmapi/llm.py` `LLM._check_arguments`: "The sum of prompt length (X), query length
(0) should not exceed max_num_tokens (N)". A recipe whose jobs send longer prompts is refused before it spends GPU
hours: every such request would have failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.engines import adapter_for
from llmsweep.findings import Finding
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files

RECIPE = """k:
  image: IMAGE
  model: meta-llama/Llama-3.1-70B-Instruct
  model-prefix: llama3.1-70b
  runner: h200
  precision: fp8
  framework: FRAMEWORK
  multinode: false
  scenarios:
SCENARIO
  serve:
    args: { ARGS }
WORKLOAD"""
FIXED = """    fixed-seq-len:
    - isl: ISL
      osl: 1024
      search-space:
      - { tp: 2, conc-list: [4] }"""
AGENTIC = """    agentic-coding:
    - search-space:
      - { tp: 2, conc-list: [4], kv-offloading: none, spec-decoding: none }"""
TRTLLM = ("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0")


def _write(tmp_path: Path, args: str, *, isl: int = 16384, agentic: str | None = None,
           engine: tuple[str, str] = TRTLLM) -> Path:
    scenario = AGENTIC if agentic is not None else FIXED.replace("ISL", str(isl))
    workload = f"  workload:\n    traces:\n      synthetic: {{ traces: 4, max-isl: {agentic} }}\n" if agentic else ""
    path = tmp_path / "r.yaml"
    text = RECIPE if agentic is None else RECIPE.replace("runner: h200", "runner: cluster:h200-dgxc")
    path.write_text(text.replace("FRAMEWORK", engine[0]).replace("IMAGE", engine[1]).replace("ARGS", args)
                    .replace("SCENARIO", scenario).replace("WORKLOAD", workload), encoding="utf-8")
    return path


def _hits(path: Path) -> list[Finding]:
    return [f for f in validate_files([path]).findings if f.rule == "serve.prompt-budget"]


def test_a_16k_prompt_over_trtllm_s_default_8192_is_refused_with_the_engine_s_400(tmp_path: Path) -> None:
    (hit,) = _hits(_write(tmp_path, "--max_batch_size: 64"))
    assert hit.severity.value == "error"
    assert "its prompts are 16,384 tokens (isl), over the 8,192 tokens TensorRT-LLM takes in one prompt" in hit.message
    assert "trtllm-serve's default --max_num_tokens 8192, without `--enable_chunked_prefill`" in hit.message
    assert ('"The sum of prompt length (16384.0), query length (0) should not exceed max_num_tokens (8192)"'
            in hit.message), hit.message
    assert hit.fix is not None and "--enable_chunked_prefill: true" in hit.fix


@pytest.mark.parametrize("args", ["--enable_chunked_prefill: true", "--enable-chunked-prefill: true",
                                  "--max_num_tokens: 16384", "--max-num-tokens: 20000"])
def test_chunked_prefill_or_a_budget_that_holds_the_prompt_passes(tmp_path: Path, args: str) -> None:
    assert _hits(_write(tmp_path, args)) == []


def test_an_8k_prompt_fits_the_default_budget(tmp_path: Path) -> None:
    assert _hits(_write(tmp_path, "--max_batch_size: 64", isl=8192)) == []


def test_context_parallel_ranks_each_take_a_budget(tmp_path: Path) -> None:
    """`prompt length / cp_size` is what TensorRT-LLM compares: two ranks hold 16,384 tokens at the default."""
    path = _write(tmp_path, "--cp_size: 2")
    (job,) = jobs_from_files([path])
    limit = adapter_for(job).prompt_limit(job)
    assert limit is not None and (limit.tokens, limit.per) == (16384, 2)
    assert limit.refusal(16384) is None and limit.refusal(16386) is not None
    assert "(8193.0)" in str(limit.refusal(16386))


def test_an_agentic_replay_is_refused_at_its_traces_longest_request(tmp_path: Path) -> None:
    (hit,) = _hits(_write(tmp_path, "--max_num_tokens: 32768", agentic="64000"))
    assert "requests reach 64,000 tokens (its synthetic max-isl), over the 32,768 tokens" in hit.message, hit.message
    assert hit.line is not None  # at the recipe's --max_num_tokens


@pytest.mark.parametrize("engine", [("vllm", "vllm/vllm-openai:v0.26.0"), ("sglang", "lmsysorg/sglang:v0.5.12"),
                                    ("dynamo-trt", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.0")])
def test_engines_that_chunk_a_long_prompt_are_not_flagged(tmp_path: Path, engine: tuple[str, str]) -> None:
    """vLLM and SGLang split a long prompt over steps; Dynamo's TensorRT-LLM worker's launch was not read."""
    assert _hits(_write(tmp_path, "--max-num-seqs: 64" if engine[0] == "vllm" else
                        "--max-running-requests: 64" if engine[0] == "sglang" else "--max_batch_size: 64",
                        engine=engine)) == []


def test_the_simulator_standing_in_refuses_the_same_prompts_with_the_engine_s_400(tmp_path: Path) -> None:
    """`run --simulate` and `predict` of the job answer every prompt over the budget as trtllm-serve would, and the
    client counts the 400 as a context overflow (its text names no context length)."""
    from llmsweep import engines
    from llmsweep.client.config import RunOptions
    from llmsweep.execute.virtual import engine_config
    from llmsweep.sim.engine import build_core

    (job,) = jobs_from_files([_write(tmp_path, "--max_batch_size: 64")])
    spec = engines.render(job, simulate=True)
    config = engine_config(spec)
    assert config.max_prompt_tokens == 8192
    (note,) = [n for n in spec.notes if n.startswith("prompts over 8192 tokens")]
    assert "trtllm-serve's default --max_num_tokens 8192" in note, note
    core = build_core(config)
    assert core.refusal(8192, 1024) is None
    refused = core.refusal(16384, 1024)
    assert refused == "The sum of prompt length (16384.0), query length (0) should not exceed max_num_tokens (8192)"
    patterns = RunOptions.model_fields["context_overflow_patterns"].default
    assert any(p in refused.lower() for p in patterns)
    (chunked,) = jobs_from_files([_write(tmp_path, "--enable_chunked_prefill: true")])
    assert engine_config(engines.render(chunked, simulate=True)).max_prompt_tokens is None


def test_a_simulator_recipe_standing_in_for_trtllm_is_refused_as_the_simulator_refuses(tmp_path: Path) -> None:
    """`serve.engine: sim` over a `trt` framework: the simulator stands in for TensorRT-LLM and refuses its long
    prompts (`--max-prompt-tokens`), so `validate` says so beforehand instead of the run failing every request."""
    path = _write(tmp_path, "--max_batch_size: 64")
    path.write_text(path.read_text().replace("  serve:\n", "  serve:\n    engine: { name: sim }\n"), encoding="utf-8")
    (hit,) = _hits(path)
    assert "over the 8,192 tokens TensorRT-LLM takes in one prompt" in hit.message, hit.message


def test_an_agentic_corpus_that_says_nothing_is_bounded_by_the_context_the_job_launches_with(tmp_path: Path) -> None:
    """A local trace file (only reading it would tell its longest request): the launched context bounds the prompts,
    not the checkpoint's native one, so a budget above that context is no finding."""
    text = _write(tmp_path, "--max_num_tokens: 65536, --max_seq_len: 65536", agentic="1").read_text()
    path = tmp_path / "local.yaml"
    path.write_text(text.replace("synthetic: { traces: 4, max-isl: 1 }", "path: /data/traces.jsonl"), encoding="utf-8")
    assert _hits(path) == []
    path.write_text(text.replace("synthetic: { traces: 4, max-isl: 1 }", "path: /data/traces.jsonl")
                    .replace("--max_seq_len: 65536", "--max_seq_len: 100000"), encoding="utf-8")
    (hit,) = _hits(path)
    assert "requests reach 100,000 tokens (up to the 100,000-token context it launches with)" in hit.message
