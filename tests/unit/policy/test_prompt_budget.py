"""`serve.prompt-budget`: trtllm-serve (PyTorch backend) runs with chunked prefill off unless `--enable_chunked_prefill`
is given, and then refuses a prompt of more than `--max_num_tokens` tokens (8192 by default; per context-parallel
rank) with a 400 — `tensorrt_llm/llmapi/llm.py` `LLM._check_arguments`: "The sum of prompt length (X), query length
(0) should not exceed max_num_tokens (N)". A recipe whose jobs send longer prompts is refused before it spends GPU
hours: every such request would have failed."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import LLAMA_70B_FP8, write_recipe

from llmsweep.engines import adapter_for
from llmsweep.findings import Finding
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files

TRTLLM = ("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0")


def _write(tmp_path: Path, args: str, *, isl: int = 16384, traces: str | None = None,
           engine: tuple[str, str] = TRTLLM, sim: bool = False) -> Path:
    """Llama 3.1 70B FP8 at TP 2 on an H200, fixed-length at `isl`, or agentic replaying `traces` (the trace source's
    body: `synthetic: {...}`, `path: ...`); `sim`: the simulator's recipe standing in for the engine."""
    workload = f"  workload:\n    traces:\n      {traces}\n" if traces is not None else ""
    return write_recipe(tmp_path / "r.yaml", framework=engine[0], image=engine[1], served=LLAMA_70B_FP8,
                        runner="h200" if traces is None else "cluster:h200-dgxc", isl=isl, tp=2,
                        agentic=traces is not None, engine="name: sim" if sim else None, args=args, workload=workload)


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
    (hit,) = _hits(_write(tmp_path, "--max_num_tokens: 32768", traces="synthetic: { traces: 4, max-isl: 64000 }"))
    assert "requests reach 64,000 tokens (its synthetic max-isl), over the 32,768 tokens" in hit.message, hit.message
    assert hit.line is not None  # at the recipe's --max_num_tokens


def test_an_eval_only_job_is_not_refused_for_prompts_its_row_would_send(tmp_path: Path) -> None:
    """`--evals-only` runs the row's eval, which sends the eval's prompts (GSM8K: a few hundred tokens), none of the
    row's traces or isl: an agentic row's eval-only job on trtllm-serve was refused for 64k-token trace requests it
    never sends (README: such a job reads nothing of its row's trace source). The throughput jobs still are."""
    from llmsweep.plan.matrix import EvalOptions

    path = _write(tmp_path, "--max_batch_size: 64", traces="synthetic: { traces: 4, max-isl: 64000 }")
    assert _hits(path)  # the throughput plan: refused
    validation = validate_files([path], evals=EvalOptions(evals_only=True))
    assert validation.jobs and all(j.eval_only for j in validation.jobs)
    assert not [f for f in validation.findings if f.rule in ("serve.prompt-budget", "serve.agentic-context")]


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
    (hit,) = _hits(_write(tmp_path, "--max_batch_size: 64", sim=True))
    assert "over the 8,192 tokens TensorRT-LLM takes in one prompt" in hit.message, hit.message


def test_an_agentic_corpus_that_says_nothing_is_bounded_by_the_context_the_job_launches_with(tmp_path: Path) -> None:
    """A local trace file (only reading it would tell its longest request): the launched context bounds the prompts,
    not the checkpoint's native one, so a budget above that context is no finding."""
    local = "path: /data/traces.jsonl"
    assert _hits(_write(tmp_path, "--max_num_tokens: 65536, --max_seq_len: 65536", traces=local)) == []
    (hit,) = _hits(_write(tmp_path, "--max_num_tokens: 65536, --max_seq_len: 100000", traces=local))
    assert "requests reach 100,000 tokens (up to the 100,000-token context it launches with)" in hit.message
