#!/usr/bin/env bash
# GPU side, one long device call after the chunks are staged: install vLLM 0.26.0 from /tmp/stash, synthesise the
# models the recipes serve, then `llmsweep run --executor local` on the recipes — the whole pipeline (one server per
# identical LaunchSpec, client, /metrics, gates, the acceptance read-back gate, store, dashboard) — and pack the
# evidence into $OUT (≤ 8 files come back; see docs/gpu.md §5).
#
# Env:
#   NAME=llama                 run name: the run dir is $RUNS/$NAME, the archive $OUT/$NAME.tar.gz
#   RECIPES="examples/gpu/llama-1b-bf16-h200-vllm.yaml"
#   CONFIG_KEYS=''             optional --config-keys glob;  RESUME=1 adds --resume (rerun what a killed call left)
#   REQUIRE_POWER=1            adds --require-power (a job without valid GPU power fails; docs/gpu.md §8)
#   SYNTH="llama-1b"           ("" for none) presets to write under /tmp/models/<preset> (`preset:--with-draft` adds the draft)
#   GGUF_STASH=/tmp/mstash     real weights: the staged GGUF (.m chunks; or GGUF=FILE) imported into MODEL_DIR
#                              (scripts/gpu/import_gguf.sh)
#   LMEVAL_STASH=/tmp/stash-e  lm-eval 0.4.13 (.e chunks, scripts/gpu/lmeval-0.4.13-wheels.txt) installed into
#                              /tmp/lmsite; LLMSWEEP_LM_EVAL names a python3 that imports it (eval rows)
#   NIXL_STASH=/tmp/stash-n    NIXL 1.5.1 (.n chunks, scripts/gpu/nixl-1.5.1-wheels.txt) installed into vLLM's site, for
#                              vLLM's NixlConnector (a disaggregated prefill/decode run; docs/real-disaggregated.md);
#                              the transports NIXL's UCX finds on the host go to steps.txt
#   RUN_ARGS=''                more `llmsweep run` arguments (e.g. --all-evals --eval-dataset FILE)
#   CHECK_POWER=1              after the run, scripts/gpu/check_power.py compares the integral with the energy counter
#   RUN_TIMEOUT=520            seconds `llmsweep run` may take (SIGINT, then its servers are stopped)
#   CALL_LIMIT=                the device call's timeout_s: RUN_TIMEOUT shrinks so stopping and packing still fit
#   RUNS=/tmp/runs  RECORDS_PER_JOB=200  LOG_TAIL=400
#   SKIP_INSTALL=1             CPU rehearsal: no vLLM install (put scripts/gpu/cpu_rehearsal first on PATH)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
NAME=${NAME:-llama}; RECIPES=${RECIPES:-examples/gpu/llama-1b-bf16-h200-vllm.yaml}; SYNTH=${SYNTH-llama-1b}
RUN_TIMEOUT=${RUN_TIMEOUT:-520}; RUNS=${RUNS:-/tmp/runs}; RECORDS_PER_JOB=${RECORDS_PER_JOB:-200}
LOG_TAIL=${LOG_TAIL:-400}
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/steps.txt"; }
export HF_HOME=/tmp/hfhome HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 \
  DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0

# 1. vLLM from the staged chunks (a no-op when already installed in this lease)
if [[ -z "${SKIP_INSTALL:-}" ]]; then   # SKIP_INSTALL=1: the CPU rehearsal (PATH=scripts/gpu/cpu_rehearsal:...)
  bash scripts/gpu/install_vllm.sh >>"$OUT/steps.txt" 2>&1 || { log "install failed"; tail -20 "$OUT/steps.txt"; exit 1; }
fi
site=${SITE:-/tmp/site}
export PYTHONPATH="$repo/src:$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
llmsweep() { python3 -m llmsweep.cli.main "$@"; }
log "installed: $(tail -1 "$OUT/steps.txt"); llmsweep $(llmsweep --version 2>&1 | tail -1)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$OUT/steps.txt" 2>&1

# 2. the models (config + tokenizer; vLLM fills the weights under --load-format dummy)
for item in $SYNTH; do
  preset=${item%%:*}; extra=(); [[ "$item" == *:--with-draft || "$item" == *:--draft-model || "$item" == *:--draft ]] && extra=(--with-draft)
  llmsweep model synth "$preset" --out "/tmp/models/$preset" --force --weights none "${extra[@]}" >/dev/null \
    2>>"$OUT/steps.txt" || { log "model synth $preset failed"; exit 1; }
  log "model $preset written to /tmp/models/$preset"
done

# 2b. real weights from a staged GGUF, and lm-eval for eval rows
if [[ -n "${GGUF_STASH:-}" || -n "${GGUF:-}" ]]; then
  fail() { log "FAILED: $*"; tail -30 "$OUT/steps.txt"; exit 1; }
  # shellcheck source=scripts/gpu/import_gguf.sh
  . scripts/gpu/import_gguf.sh
fi
if [[ -n "${LMEVAL_STASH:-}" ]]; then
  PACKAGE=lm_eval STASH="$LMEVAL_STASH" SITE=/tmp/lmsite WHEEL_DIR=/tmp/lm-wheels bash scripts/gpu/install_vllm.sh \
    >>"$OUT/steps.txt" 2>&1 || { log "lm-eval install failed"; tail -20 "$OUT/steps.txt"; exit 1; }
  # lm-eval's own site first, then vLLM's (dill, pydantic), then the image's: a python3 that runs `-m lm_eval`
  printf '#!/bin/sh\nPYTHONPATH=/tmp/lmsite:%s exec python3 "$@"\n' "$site" > /tmp/lmeval-python
  chmod +x /tmp/lmeval-python
  export LLMSWEEP_LM_EVAL=/tmp/lmeval-python
  log "lm-eval: $(/tmp/lmeval-python -c 'import importlib.metadata as m; print(m.version("lm_eval"))' 2>&1 | tail -1)"
fi

if [[ -n "${NIXL_STASH:-}" ]]; then
  PACKAGE=nixl STASH="$NIXL_STASH" SITE="$site" WHEEL_DIR=/tmp/nixl-wheels bash scripts/gpu/install_vllm.sh \
    >>"$OUT/steps.txt" 2>&1 || { log "nixl install failed"; tail -20 "$OUT/steps.txt"; exit 1; }
  python3 - >>"$OUT/steps.txt" 2>&1 <<'PY'
# what vLLM's NixlConnector will find: the nixl build, its UCX plugin, and the devices UCX sees (cuda_ipc between the
# two GPUs, or only tcp: the first real run must say which moved the KV)
import importlib.metadata as m
from nixl._api import nixl_agent, nixl_agent_config
print("nixl", m.version("nixl"), "nixl-cu13", m.version("nixl-cu13"))
agent = nixl_agent("llmsweep-check", nixl_agent_config(backends=["UCX"]))
print("nixl plugins:", agent.get_plugin_list())
print("UCX memory types:", agent.get_plugin_mem_types("UCX"), "params:", agent.get_plugin_params("UCX"))
PY
  log "nixl: $(grep -E '^nixl ' "$OUT/steps.txt" | tail -1)"
  command -v ucx_info >/dev/null && ucx_info -d 2>/dev/null | grep -E "Transport|Device" | sort -u | head -30 >>"$OUT/steps.txt"
fi

# 3. the run
run="$RUNS/$NAME"; mkdir -p "$run"
# CALL_LIMIT (the device call's timeout_s): keep 40 s for stopping servers and packing, whatever setup took. The first
# Qwen3-Next call lost its archive because RUN_TIMEOUT started after 44 s of install and ran into the call's limit.
if [[ -n "${CALL_LIMIT:-}" ]]; then
  left=$((CALL_LIMIT - ($(date +%s) - T0) - 40)); ((left < RUN_TIMEOUT)) && RUN_TIMEOUT=$left
  log "RUN_TIMEOUT=$RUN_TIMEOUT s (CALL_LIMIT=$CALL_LIMIT)"
fi
keys=(); [[ -n "${CONFIG_KEYS:-}" ]] && keys=(--config-keys "$CONFIG_KEYS")
log "llmsweep run $RECIPES -> $run"
# shellcheck disable=SC2086
timeout -s INT -k 30 "$RUN_TIMEOUT" python3 -m llmsweep.cli.main run $RECIPES "${keys[@]}" \
  --runner-config examples/gpu/fleet.yaml --executor local --executor-option allow_image=true \
  ${RESUME:+--resume} ${REQUIRE_POWER:+--require-power} ${RUN_ARGS:-} --out "$run" --store "$run/results.sqlite" \
  2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
log "llmsweep run exit $rc"
python3 - "$run" <<'PY' 2>&1 | tee -a "$OUT/steps.txt"
import sys
from pathlib import Path
from llmsweep.execute.lifecycle import stop_stale_servers
print("stale servers stopped:", stop_stale_servers(Path(sys.argv[1]), print))
PY
if [[ $rc -ne 0 && ! -f "$run/report/index.html" ]]; then
  llmsweep results ingest "$run" --store "$run/results.sqlite" >>"$OUT/steps.txt" 2>&1
  llmsweep report "$run" >>"$OUT/steps.txt" 2>&1
  log "partial run stored and reported"
fi

if [[ -n "${CHECK_POWER:-}" ]]; then
  python3 scripts/gpu/check_power.py "$run" --per-gpu 2>&1 | tee "$run/check_power.txt" | tee -a "$OUT/steps.txt"
fi

# 4. the evidence: summaries, job/outcome/command files, a slice of each job's records, server logs' tails, the
#    store and the dashboard, in one archive
packs=$(mktemp -d "${TMPDIR:-/tmp}/pack.XXXXXX"); pack="$packs/$NAME"; mkdir -p "$pack"  # its own folder: two runs on one host never share one
tar -C "$run" --exclude=records.jsonl --exclude='server*.log' -cf - . | tar -C "$pack" -xf -
for f in "$run"/jobs/*/records.jsonl; do [[ -f "$f" ]] && head -n "$RECORDS_PER_JOB" "$f" > "$pack/${f#"$run"/}"; done
for f in "$run"/jobs/*/server*.log "$run"/jobs/*/eval/server*.log "$run"/servers/*/server*.log; do
  [[ -f "$f" ]] && tail -n "$LOG_TAIL" "$f" > "$pack/${f#"$run"/}"
done
for f in "$run"/servers/*/server*.log; do
  [[ -f "$f" ]] && grep -E "prefix caching|enable_prefix_caching|KV cache|block_size|speculative|SpeculativeConfig|acceptance|Maximum concurrency|Starting vLLM|non-default args|model weights took|graph capturing|torch.compile|connector|Nixl|NIXL|UCX|kv_role" "$f" | head -60 > "${pack}/${f#"$run"/}.key.txt"
done
tar -C "$packs" -czf "$OUT/$NAME.tar.gz" "$NAME"
rm -rf "$packs"
log "packed $(du -h "$OUT/$NAME.tar.gz" | cut -f1) into $OUT/$NAME.tar.gz"
exit "$rc"
