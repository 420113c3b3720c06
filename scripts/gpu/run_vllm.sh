#!/usr/bin/env bash
# GPU side, the one long call after the chunks are staged: install vLLM 0.26.0 from /tmp/stash, synthesise the model
# with `llmsweep model synth` (config + tokenizer, --load-format dummy), serve it, warm up, run the workload, read the
# realised acceptance length back when speculative decoding is on, stop the server. Everything lands in $OUT.
#
# Env (all optional):
#   MODEL=llama-1b            llmsweep preset (qwen3-next-small gets --gdn-prefill-backend triton automatically)
#   SPEC=                     ''; 'draft' (draft_model with the synthesised draft); 'mtp' (Qwen3-Next's MTP head);
#                             or a full --speculative-config JSON
#   AL=3.39 K=3               synthetic acceptance length and draft tokens for SPEC=draft|mtp
#   MAX_MODEL_LEN=4096  VLLM_ARGS=''  SYNTH_ARGS=''  READY_TIMEOUT=420
#   CONC=1,8,32 MAX_TOKENS=128 PROMPT_WORDS=200
#   MODELS_ROOT=/tmp/models  PORT=8000
#   WORKLOAD=''               command run against the ready server instead of smoke_load.py; it sees BASE_URL,
#                             SERVED_MODEL, MODEL_DIR and OUT (e.g. the project's `llmsweep bench ...`)
#   SKIP_INSTALL=1            CPU rehearsal: no install; PYTHONPATH=scripts/gpu/cpu_rehearsal/py serves the simulator
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/steps.txt"; }
MODEL=${MODEL:-llama-1b}; SPEC=${SPEC:-}; AL=${AL:-3.39}; K=${K:-3}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-4096}; READY_TIMEOUT=${READY_TIMEOUT:-420}
CONC=${CONC:-1,8,32}; MAX_TOKENS=${MAX_TOKENS:-128}; PROMPT_WORDS=${PROMPT_WORDS:-200}
PORT=${PORT:-8000}; export BASE_URL="http://127.0.0.1:$PORT"
export HF_HOME=/tmp/hfhome HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 \
  DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0

# 1. vLLM from the staged chunks (SKIP_INSTALL=1: the CPU rehearsal, scripts/gpu/cpu_rehearsal/py on PYTHONPATH)
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  bash "$repo/scripts/gpu/install_vllm.sh" >>"$OUT/steps.txt" 2>&1 || { log "install failed"; tail -20 "$OUT/steps.txt"; exit 1; }
fi
export PYTHONPATH="${SITE:-/tmp/site}${PYTHONPATH:+:$PYTHONPATH}" PATH="${SITE:-/tmp/site}/bin:$PATH"
log "installed: $(tail -1 "$OUT/steps.txt")"

# 2. the model, from this checkout's llmsweep (the image has click, rich, numpy, tokenizers; pydantic came with vLLM)
export MODEL_DIR=${MODELS_ROOT:-/tmp/models}/$MODEL SERVED_MODEL=llmsweep/$MODEL
draft=(); [[ "$SPEC" == draft ]] && draft=(--with-draft)
PYTHONPATH="$repo/src:$PYTHONPATH" python3 -m llmsweep.cli.main model synth "$MODEL" --out "$MODEL_DIR" --force \
  --weights none "${draft[@]}" ${SYNTH_ARGS:-} --json >"$OUT/synth.json" 2>>"$OUT/steps.txt" \
  || { log "llmsweep model synth failed"; tail -20 "$OUT/steps.txt"; exit 1; }
log "model $MODEL written to $MODEL_DIR"

# 3. the server
args=(--model "$MODEL_DIR" --served-model-name "$SERVED_MODEL" --load-format dummy --host 127.0.0.1 --port "$PORT"
      --max-model-len "$MAX_MODEL_LEN" --enable-prompt-tokens-details)
# Qwen3-Next on H200: the default GDN prefill needs FlashInfer's CUTLASS-DSL kernel, not in the staged set.
[[ "$MODEL" == qwen3-next* ]] && args+=(--gdn-prefill-backend triton)
case "$SPEC" in
  "") ;;
  draft) args+=(--speculative-config "{\"method\":\"draft_model\",\"model\":\"$MODEL_DIR/draft\",\"num_speculative_tokens\":$K,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":$AL}") ;;
  mtp) args+=(--speculative-config "{\"method\":\"mtp\",\"num_speculative_tokens\":$K,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":$AL}") ;;
  *) args+=(--speculative-config "$SPEC") ;;
esac
# shellcheck disable=SC2206
args+=(${VLLM_ARGS:-})
{ printf '%q ' python3 -m vllm.entrypoints.openai.api_server "${args[@]}"; echo; } > "$OUT/server_command.txt"
python3 -m vllm.entrypoints.openai.api_server "${args[@]}" >"$OUT/server.log" 2>&1 &
server=$!
stop() { kill "$server" 2>/dev/null; for _ in $(seq 150); do kill -0 "$server" 2>/dev/null || return 0; sleep 0.2; done; kill -9 "$server" 2>/dev/null; }
trap stop EXIT
up=0
for i in $(seq "$READY_TIMEOUT"); do
  curl -sf "$BASE_URL/health" >/dev/null && { up=1; log "server ready after ${i}s"; break; }
  kill -0 "$server" 2>/dev/null || { log "server died"; break; }
  sleep 1
done
if ((!up)); then tail -40 "$OUT/server.log"; exit 1; fi
grep -E "enable_prefix_caching|prefix caching|KV cache|block_size" "$OUT/server.log" | head -8 >>"$OUT/steps.txt"

# 4. the workload (smoke_load.py warms up every concurrency level first)
curl -s "$BASE_URL/metrics" >"$OUT/metrics_before.txt"
if [[ -n "${WORKLOAD:-}" ]]; then
  bash -c "$WORKLOAD" 2>&1 | tee -a "$OUT/steps.txt"; rc=${PIPESTATUS[0]}
else
  python3 "$repo/scripts/gpu/smoke_load.py" --base-url "$BASE_URL" --model "$SERVED_MODEL" --concurrency "$CONC" \
    --max-tokens "$MAX_TOKENS" --prompt-words "$PROMPT_WORDS" --out "$OUT/load.json" 2>&1 | tee -a "$OUT/steps.txt"
  rc=${PIPESTATUS[0]}
fi
curl -s "$BASE_URL/metrics" >"$OUT/metrics_after.txt"
log "workload exit $rc"
if [[ -n "$SPEC" ]]; then
  python3 "$repo/scripts/gpu/spec_al.py" "$OUT/metrics_before.txt" "$OUT/metrics_after.txt" | tee -a "$OUT/steps.txt"
fi
log done
exit "$rc"
