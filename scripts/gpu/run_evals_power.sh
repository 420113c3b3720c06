#!/usr/bin/env bash
# GPU side, one device call after the .v (vLLM), .m (GGUF) and .e (lm-eval) chunks are staged (docs/gpu.md §10):
# SmolLM2-135M-Instruct imported from its GGUF, served by vLLM 0.26.0 with the n-gram drafter; `llmsweep run` on
# examples/gpu/smollm2-135m-bf16-h200-vllm-evals.yaml twice: the throughput points and the run-eval point on one
# server with NVML power (checked against the energy counter), then the same row eval-only on its own server.
#   GGUF_STASH=/tmp/mstash LMEVAL_STASH=/tmp/stash-e bash scripts/gpu/run_evals_power.sh     (T1, T2: run timeouts)
# CPU rehearsal: SKIP_INSTALL=1 GGUF=smollm2-135m-instruct LLMSWEEP_LM_EVAL=.venv-lmeval/bin/python, with
# scripts/gpu/cpu_rehearsal on PATH and cpu_rehearsal/py and cpu_rehearsal/nvml on PYTHONPATH.
set -u
export SYNTH= RECIPES=examples/gpu/smollm2-135m-bf16-h200-vllm-evals.yaml REQUIRE_POWER=1 CHECK_POWER=1 RECORDS_PER_JOB=40
ARGS="--eval-dataset examples/evals/arith-gsm8k.jsonl --eval-max-tokens 256"
NAME=smollm2-evals RUN_TIMEOUT=${T1:-230} RUN_ARGS="$ARGS" bash scripts/gpu/run_llmsweep.sh 2>&1 | tail -c 3500
unset GGUF_STASH GGUF
NAME=smollm2-evalonly RUN_TIMEOUT=${T2:-130} RUN_ARGS="$ARGS --evals-only" bash scripts/gpu/run_llmsweep.sh 2>&1 | tail -c 3500
