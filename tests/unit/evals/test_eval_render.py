"""An eval job's launch carries no synthetic acceptance in any engine's spelling (env, flag or speculative-config
key), while the same row planned as a throughput job does; an eval-only job's server starts at the eval context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.engine_ids import ENGINE_IDS, PinnedAcceptance
from llmsweep.plan import Job, full_sweep
from llmsweep.plan.matrix import EvalOptions
from llmsweep.spec import loads_recipes

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
SPEC = "    spec-decoding: { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3-GQA }\n"
ENGINES = {
    "vllm": ("vllm", "vllm/vllm-openai:v0.26.0", "cluster:h200-cw"),
    "trtllm": ("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", "cluster:h200-cw"),
    "atom": ("atom", "rocm/atom:rocm7.2.0-ubuntu24.04-pytorch2.9-atom0.1.3", "cluster:mi355x-amds"),
}


def _agentic(framework: str, image: str, runner: str) -> str:
    return (f"k:\n  image: {image}\n  model: MiniMaxAI/MiniMax-M3\n  model-prefix: minimaxm3\n  runner: {runner}\n"
            "  precision: fp8\n  framework: " + framework + "\n  multinode: false\n  scenarios:\n"
            "    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n"
            "      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [8, 16] }\n  serve:\n" + SPEC)


def _plan(text: str, evals: EvalOptions) -> list[Job]:
    return full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes, evals=evals)


def _spellings(pin: PinnedAcceptance) -> tuple[set[str], set[str], set[str]]:
    env, args, keys = set(), set(), set()
    p: PinnedAcceptance | None = pin
    while p is not None:
        env |= {k for k, _ in p.env}
        args |= {k for k, _ in p.args}
        keys |= {k for k, _ in p.speculative_config}
        p = p.alternative
    return env, args, keys


def _pins(spec: engines.LaunchSpec, engine: str) -> list[str]:
    """Every synthetic-acceptance spelling of `engine` the launch carries."""
    spelling = ENGINE_IDS[engine].pin_acceptance
    assert spelling is not None
    env, args, keys = _spellings(spelling(2.5, 3))
    found = [k for k in spec.env if k in env] + [a for a in spec.argv if a in args]
    for i, token in enumerate(spec.argv[:-1]):
        if token == "--speculative-config":
            found += [k for k in json.loads(spec.argv[i + 1]) if k in keys]
    return found


def _cases() -> list[tuple[str, str]]:
    return [(engine, _agentic(*ENGINES[engine])) for engine in ENGINES] + [("sglang", SEED.read_text())]


@pytest.mark.parametrize(("engine", "text"), _cases(), ids=[*ENGINES, "sglang"])
def test_eval_launch_has_no_synthetic_acceptance_in_any_spelling(engine: str, text: str) -> None:
    throughput = [j for j in _plan(text, EvalOptions(no_evals=True)) if j.acceptance is not None]
    assert throughput, "the throughput rows pin an acceptance length"
    assert _pins(engines.render(throughput[0]), engine), f"{engine}: the throughput launch pins it"
    assert _pins(engines.render(throughput[0], simulate=True), "sim"), "and so does its simulator stand-in"
    evals = _plan(text, EvalOptions(all_evals=True))
    assert evals and all(j.eval_only for j in evals)
    for job in evals:
        assert _pins(engines.render(job), engine) == [], job.id
        assert _pins(engines.render(job, simulate=True), "sim") == [], job.id


def test_an_eval_only_fixed_job_starts_at_the_eval_context_length() -> None:
    text = ("k:\n  image: vllm/vllm-openai:v0.26.0\n  model: meta-llama/Llama-3.1-8B-Instruct\n  model-prefix: "
            "llama3.1-8b\n  runner: h200\n  precision: bf16\n  framework: vllm\n  multinode: false\n  scenarios:\n"
            "    fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n      search-space:\n"
            "      - { tp: 1, conc-list: [16, 32] }\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 1, conc-list: [16, 32] }\n  serve:\n    engine: { name: vllm, version: 0.26.0 }\n")
    (job,) = [j for j in _plan(text, EvalOptions(evals_only=True)) if j.conc == 32]
    argv = engines.render(job).argv
    assert job.eval_only and argv[argv.index("--max-model-len") + 1] == "9472"
