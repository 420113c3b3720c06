#!/usr/bin/env bash
# GPU side, one long device call after the vLLM chunks are staged (docs/gpu.md §7), carrying .a0 (aiperf's wheels):
# install aiperf 0.13.0 into a site of its own, then run_vllm.sh serves the 1.1B Llama on vLLM 0.26.0 and, as its
# workload, `llmsweep peer crosscheck` drives llmsweep's client and aiperf in turn on the same prompts at each
# concurrency. Evidence: $OUT/crosscheck.tgz beside run_vllm.sh's files (steps, server command and log, /metrics).
#
# Env (all optional):
#   LEVELS=1,8,32,128  ISL=1024  OSL=256  REPEATS=2  PROMPTS_PER_CONC=4  MIN_PROMPTS=16  WARMUPS_PER_CONC=2
#   CALL_LIMIT=600     the device call's timeout_s: the cross-check gets SIGINT 45 s before it (every finished run
#                      is kept and tabulated), so stopping the server and packing always fit
#   AIPERF=            an aiperf executable to use instead of installing .a0 (the CPU rehearsal)
#   SKIP_INSTALL=1     CPU rehearsal: no vLLM install; PYTHONPATH=scripts/gpu/cpu_rehearsal/py serves the simulator
#   MODEL=llama-1b and run_vllm.sh's own variables (MAX_MODEL_LEN, VLLM_ARGS, PORT, ...)
# Internal: `run_crosscheck.sh --workload` is what run_vllm.sh runs against the ready server.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CALL_LIMIT=${CALL_LIMIT:-600}
CC_DIR=${CC_DIR:-/tmp/crosscheck}

if [[ "${1:-}" == --workload ]]; then
  # run_vllm.sh has exported BASE_URL, SERVED_MODEL, MODEL_DIR, OUT and PYTHONPATH (vLLM's site); llmsweep from src.
  export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
  left=$((CALL_LIMIT - ($(date +%s) - CC_T0) - 45))
  echo "crosscheck: $left s left for the cross-check (CALL_LIMIT=$CALL_LIMIT)"
  rm -rf "$CC_DIR"
  timeout -s INT -k 20 "$left" python3 -m llmsweep.cli.main peer crosscheck --url "$BASE_URL" --model "$SERVED_MODEL" \
    --tokenizer "$MODEL_DIR" --isl "${ISL:-1024}" --osl "${OSL:-256}" --concurrency "${LEVELS:-1,8,32,128}" \
    --repeats "${REPEATS:-2}" --num-prompts-per-conc "${PROMPTS_PER_CONC:-4}" --min-prompts "${MIN_PROMPTS:-16}" \
    --num-warmups-per-conc "${WARMUPS_PER_CONC:-2}" --gpus "${GPUS:-1}" --aiperf "$AIPERF" --out "$CC_DIR"
  rc=$?
  # The evidence: everything but the prompt files (re-made from the seeds) and aiperf's copy of them.
  tar -C "$CC_DIR" --exclude=dataset.jsonl --exclude=inputs.json -czf "$OUT/crosscheck.tgz" . \
    && echo "crosscheck: packed $(du -h "$OUT/crosscheck.tgz" | cut -f1) into $OUT/crosscheck.tgz"
  exit "$rc"
fi

export CC_T0=$(date +%s) CALL_LIMIT CC_DIR
log() { echo "[$(($(date +%s) - CC_T0))s] $*" | tee -a "$OUT/steps.txt"; }

# 1. aiperf in its own site, behind a wrapper, so its pydantic and friends never meet vLLM's
if [[ -z "${AIPERF:-}" ]]; then
  [[ -d "$repo/.a0" ]] || { log "no .a0 here: carry it with this call (scripts/gpu/stage_vllm.sh --prefix .a)"; exit 2; }
  STASH="$repo/.a0" SITE=/tmp/aiperf-site WHEEL_DIR=/tmp/aiperf-wheels PACKAGE=aiperf \
    bash "$repo/scripts/gpu/install_vllm.sh" >>"$OUT/steps.txt" 2>&1 \
    || { log "aiperf install failed"; tail -20 "$OUT/steps.txt"; exit 1; }
  mkdir -p /tmp/aiperf-bin
  printf '#!/bin/sh\nPYTHONPATH=/tmp/aiperf-site exec python3 -m aiperf "$@"\n' > /tmp/aiperf-bin/aiperf
  chmod +x /tmp/aiperf-bin/aiperf
  AIPERF=/tmp/aiperf-bin/aiperf
fi
export AIPERF
"$AIPERF" profile --help >/dev/null 2>>"$OUT/steps.txt" || { log "aiperf does not start"; tail -30 "$OUT/steps.txt"; exit 1; }
log "aiperf $("$AIPERF" --version 2>&1 | tail -1) ready ($AIPERF)"

# 2. vLLM, the model, the server; the cross-check is its workload
WORKLOAD="bash $repo/scripts/gpu/run_crosscheck.sh --workload" exec bash "$repo/scripts/gpu/run_vllm.sh"
