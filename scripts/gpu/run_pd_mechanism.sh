#!/usr/bin/env bash
# GPU side, one long device call after the vLLM (.v) and NIXL (.n) chunks are staged: the mechanism of a real vLLM
# prefill/decode deployment, outside `llmsweep run` — two `vllm serve` workers with NixlConnector (kv_producer and
# kv_consumer, each its own NIXL side-channel port), llmsweep's PD router in front (`llmsweep router --protocol
# vllm-nixl`), then `llmsweep bench fixed` through the router at each concurrency, and what each worker says it did:
# its start-up lines (role, connector, TP: what llmsweep's read-back parses), the decode worker's prompt tokens by
# source (KV that arrived by transfer vs computed), NIXL's transfer counters, the router's /version counters.
# With one GPU both workers share it (PD_GPUS="0 0"), which is a mechanism check, not a disaggregated measurement:
# nothing here is stored or labelled as a result. docs/real-disaggregated.md says why and what comes next.
#
# Env (all optional):
#   MODEL=llama-1b  MAX_MODEL_LEN=4096  GPU_UTIL=0.35 (each worker's share when they share a GPU)
#   PD_GPUS="0 0"   the prefill and the decode worker's GPU ("0 1" on two GPUs)
#   CONC="1 8"  ISL=1024  OSL=128  PROMPTS_PER_CONC=8  READY_TIMEOUT=420
#   UCX_INFO=1      UCX_PROTO_INFO=y for the workers (which transport moved the KV: cuda_ipc, cuda_copy or tcp)
#   EAGER=1         --enforce-eager (start-up in seconds, not minutes; latencies are not representative: a mechanism
#                   check); EAGER= for CUDA graphs
# Workers that share a GPU start one after the other (vLLM sizes its KV cache from the free memory it profiles).
#   SKIP_INSTALL=1  CPU rehearsal: no install (the stand-in vllm on PATH/PYTHONPATH)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
OUT=${OUT:-/tmp/out}
# shellcheck source=scripts/gpu/vllm_env.sh
. scripts/gpu/vllm_env.sh
MODEL=${MODEL:-llama-1b}; MAX_MODEL_LEN=${MAX_MODEL_LEN:-4096}; GPU_UTIL=${GPU_UTIL:-0.35}
read -r -a gpus <<<"${PD_GPUS:-0 0}"
CONC=${CONC:-1 8}; ISL=${ISL:-1024}; OSL=${OSL:-128}; PROMPTS_PER_CONC=${PROMPTS_PER_CONC:-8}
READY_TIMEOUT=${READY_TIMEOUT:-420}; EAGER=${EAGER-1}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # the device's rule: keep them
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  PACKAGE=nixl STASH=${NIXL_STASH:-/tmp/stash-n} SITE="$site" WHEEL_DIR=/tmp/nixl-wheels \
    bash scripts/gpu/install_vllm.sh >>"$OUT/steps.txt" 2>&1 || fail "nixl install"
  log "$(grep -E '^install_vllm: nixl' "$OUT/steps.txt" | tail -1)"
fi
llmsweep() { python3 -m llmsweep.cli.main "$@"; }
model_dir=/tmp/models/$MODEL; served=llmsweep/$MODEL
llmsweep model synth "$MODEL" --out "$model_dir" --force --weights none >/dev/null 2>>"$OUT/steps.txt" \
  || fail "model synth $MODEL"

pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
             for p in "${pids[@]}"; do for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
                                         kill -9 "$p" 2>/dev/null; done; }
trap stop_all EXIT
worker() {  # worker NAME PORT SIDE_PORT GPU ROLE
  local name=$1 port=$2 side=$3 gpu=$4 role=$5
  local args=(--model "$model_dir" --served-model-name "$served" --load-format dummy --host 127.0.0.1 --port "$port"
              --max-model-len "$MAX_MODEL_LEN" --gpu-memory-utilization "$GPU_UTIL" --enable-prompt-tokens-details
              --kv-transfer-config "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"$role\"}"
              ${EAGER:+--enforce-eager})
  { printf 'CUDA_VISIBLE_DEVICES=%s VLLM_NIXL_SIDE_CHANNEL_PORT=%s ' "$gpu" "$side"
    printf '%q ' python3 -m vllm.entrypoints.openai.api_server "${args[@]}"; echo; } >>"$OUT/commands.txt"
  CUDA_VISIBLE_DEVICES=$gpu VLLM_NIXL_SIDE_CHANNEL_PORT=$side VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 \
    ${UCX_INFO:+UCX_PROTO_INFO=y} python3 -m vllm.entrypoints.openai.api_server "${args[@]}" >"$OUT/$name.log" 2>&1 &
  pids+=($!)
}
wait_health() {  # wait_health URL NAME
  for i in $(seq "$READY_TIMEOUT"); do
    curl -sf "$1/health" >/dev/null && { log "$2 ready after ${i}s"; return 0; }
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { log "$2: a process died"; return 1; }; done
    sleep 1
  done
  log "$2 not ready in ${READY_TIMEOUT}s"; return 1
}

# 1. the two workers, started together (each takes ~2 min: torch.compile, CUDA graphs)
worker prefill 8100 5600 "${gpus[0]}" kv_producer
if [[ "${gpus[0]}" == "${gpus[1]}" ]]; then
  wait_health http://127.0.0.1:8100 prefill || { tail -40 "$OUT/prefill.log" >>"$OUT/steps.txt"; exit 1; }
fi
worker decode 8200 5610 "${gpus[1]}" kv_consumer
wait_health http://127.0.0.1:8100 prefill || { tail -40 "$OUT/prefill.log" >>"$OUT/steps.txt"; exit 1; }
wait_health http://127.0.0.1:8200 decode || { tail -40 "$OUT/decode.log" >>"$OUT/steps.txt"; exit 1; }
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >>"$OUT/steps.txt" 2>&1

# 2. llmsweep's router in front of them (python3 itself in the background, so that $! is the process to stop)
python3 -m llmsweep.cli.main router --protocol vllm-nixl --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200 \
  --kv-transfer nixl --host 127.0.0.1 --port 8000 >"$OUT/router.log" 2>&1 &
pids+=($!)
wait_health http://127.0.0.1:8000 router || { tail -40 "$OUT/router.log" >>"$OUT/steps.txt"; exit 1; }

# 3. load through the router, each concurrency in turn; the decode worker's /metrics after each
for c in $CONC; do
  llmsweep bench fixed --url http://127.0.0.1:8000 --model "$served" --tokenizer "$model_dir" --isl "$ISL" --osl "$OSL" \
    --concurrency "$c" --num-prompts $((c * PROMPTS_PER_CONC)) --num-warmups "$c" \
    --metrics-url http://127.0.0.1:8200/metrics --out "/tmp/pd-bench/conc$c" --force --json \
    >"$OUT/bench_conc$c.json" 2>>"$OUT/steps.txt"
  log "bench conc $c: exit $? $(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(s.get('validity',{}).get('verdict'), s.get('requests'))" "$OUT/bench_conc$c.json" 2>&1 | tail -1)"
done
curl -s http://127.0.0.1:8000/version >"$OUT/router_version.json"
{ echo "## decode /metrics"; curl -s http://127.0.0.1:8200/metrics | grep -E "^vllm:(prompt_tokens_by_source|nixl_|prompt_tokens_total|prefix_cache)" ;
  echo "## prefill /metrics"; curl -s http://127.0.0.1:8100/metrics | grep -E "^vllm:(prompt_tokens_by_source|nixl_|prompt_tokens_total)" ;
  echo "## start-up lines"; grep -h -E "non-default args|Creating v1 connector|Initializing a V1 LLM engine|NIXL|Nixl|UCX|kv_role" \
    "$OUT/prefill.log" "$OUT/decode.log" | cut -c1-600 | head -60; } >"$OUT/evidence.txt" 2>&1
log "router: $(cut -c1-400 "$OUT/router_version.json")"
# what llmsweep's read-back makes of each real worker's log (engines.vllm role_report: role, connector, TP)
for f in prefill decode; do
  python3 - "$OUT/$f.log" >>"$OUT/steps.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
from llmsweep.engines import get_adapter
print(sys.argv[1], json.dumps(get_adapter("vllm").role_report({"version": None}, Path(sys.argv[1]).read_text(errors="replace"))))
PY
done
stop_all; trap - EXIT
# $OUT brings back at most 8 files: steps.txt, evidence.txt, router_version.json and one archive of the rest
mkdir -p /tmp/pd-pack
for f in prefill decode router; do tail -n 400 "$OUT/$f.log" >"/tmp/pd-pack/$f.log" && rm -f "$OUT/$f.log"; done
mv "$OUT"/bench_conc*.json "$OUT/commands.txt" /tmp/pd-pack/ 2>/dev/null
cp -r /tmp/pd-bench /tmp/pd-pack/ 2>/dev/null
tar -C /tmp -czf "$OUT/pd.tar.gz" pd-pack
log "done"
