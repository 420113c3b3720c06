#!/usr/bin/env bash
# GPU side (sourced, after `cd` to the checkout and OUT is set): the common start of a device call that serves with
# vLLM — T0 and the `log`/`fail` helpers writing $OUT/steps.txt, the offline environment, vLLM 0.26.0 installed from
# the staged chunks (scripts/gpu/install_vllm.sh: a no-op when already installed in this lease), PYTHONPATH/PATH onto
# the checkout's src/ and that site, and the GPU's name and driver in steps.txt. Used by run_al_collect.sh and
# run_discover.sh.
#   SKIP_INSTALL=1   CPU rehearsal: no install (scripts/gpu/cpu_rehearsal first on PATH and PYTHONPATH)
#   SITE=/tmp/site   where install_vllm.sh put vLLM
repo=${repo:-$(pwd)}
mkdir -p "$OUT"; touch "$OUT/steps.txt"
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/steps.txt"; }
fail() { log "FAILED: $*"; tail -30 "$OUT/steps.txt"; exit 1; }
export HF_HOME=/tmp/hfhome HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 \
  DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  bash scripts/gpu/install_vllm.sh >>"$OUT/steps.txt" 2>&1 || fail "install_vllm.sh"
fi
site=${SITE:-/tmp/site}
export PYTHONPATH="$repo/src:$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
log "installed: $(tail -1 "$OUT/steps.txt"); llmsweep $(python3 -m llmsweep.cli.main --version 2>&1 | tail -1)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$OUT/steps.txt" 2>&1
