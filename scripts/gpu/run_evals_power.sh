#!/usr/bin/env bash
# GPU side, one device call after the .v (vLLM), .m (GGUF) and .e (lm-eval) chunks are staged (docs/gpu.md §10):
# SmolLM2-135M-Instruct imported from its GGUF, served by vLLM 0.26.0 with the n-gram drafter (K = 3); `llmsweep run`
# on examples/gpu/smollm2-135m-bf16-h200-vllm-evals.yaml twice, each half under its own timeout:
#   1. `--evals-only`: the 8k1k conc-16 row as an eval-only job on its own server (real verification) — a minute;
#   2. the same row as InferenceX's run-eval point: its throughput point on a server that pins acceptance at the
#      golden 2.66 (read-back gate, NVML power checked against the energy counter), then the eval on a server
#      relaunched without the pin (real verification, realised acceptance read back and recorded).
# The whole call stays within CALL_LIMIT (560 s: vLLM install ~70 s, GGUF import ~8 s, four server starts of
# 50-100 s each); the second half gets what the first left, less 40 s for stopping and packing.
#   GGUF_STASH=/tmp/mstash LMEVAL_STASH=/tmp/stash-e bash scripts/gpu/run_evals_power.sh   (T1, T2: run timeouts)
# HALVES=run-eval runs the second half alone, on RUNEVAL_RECIPES if given (RUNEVAL_NAME names its run). RECIPES
# replaces the evals recipe in both halves (the CPU rehearsal serves a copy from its own MODEL_DIR).
# CPU rehearsal: SKIP_INSTALL=1 GGUF=smollm2-135m-instruct LLMSWEEP_LM_EVAL=.venv-lmeval/bin/python, with
# scripts/gpu/cpu_rehearsal on PATH and cpu_rehearsal/py and cpu_rehearsal/nvml on PYTHONPATH
# (tests/unit/modelsynth/test_gpu_run_script.py).
set -u
T0=$(date +%s)
CALL_LIMIT=${CALL_LIMIT:-560}
export SYNTH= RECIPES=${RECIPES:-examples/gpu/smollm2-135m-bf16-h200-vllm-evals.yaml} RECORDS_PER_JOB=40
ARGS="--eval-dataset examples/evals/arith-gsm8k.jsonl --eval-max-tokens 256 ${EVAL_ARGS:-}"
if [ "${HALVES:-both}" = both ]; then
  NAME=smollm2-evalonly RUN_TIMEOUT=${T1:-170} RUN_ARGS="$ARGS --evals-only" bash scripts/gpu/run_llmsweep.sh 2>&1 \
    | tail -c 3500
  unset GGUF_STASH GGUF   # imported once; the second half serves the same directory
fi
left=$((CALL_LIMIT - ($(date +%s) - T0)))
echo "[run_evals_power] $((CALL_LIMIT - left)) s used; the run-eval half gets at most $((left - 40)) s"
# HALVES=run-eval: that half alone, on RUNEVAL_RECIPES (e.g. the -batch recipe: three points, two owed evals)
RECIPES=${RUNEVAL_RECIPES:-$RECIPES} NAME=${RUNEVAL_NAME:-smollm2-runeval} RUN_TIMEOUT=${T2:-330} CALL_LIMIT=$left \
  REQUIRE_POWER=1 CHECK_POWER=1 RUN_ARGS="$ARGS" bash scripts/gpu/run_llmsweep.sh 2>&1 | tail -c 3500
