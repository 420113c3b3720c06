#!/usr/bin/env bash
# GPU side, one device call: `transformers serve` through `llmsweep run` on the lent H200 (issue 7). Installs the 19
# serving wheels the image lacks (`.tfwhl`, carried: fastapi, starlette, uvicorn, openai, pydantic, ... — pydantic is
# also the one llmsweep needs there), writes the model with random weights (transformers loads real weights; there is
# no --load-format dummy), runs `llmsweep run --executor local` on the recipe (one server for every concurrency, the
# client, gates, store, dashboard) and packs the evidence into $OUT/results.tgz beside steps.txt and run.log.
#
#   run(command="CALL_LIMIT=200 bash scripts/gpu/run_tf_llmsweep.sh", carry=[".tfwhl"], timeout_s=210)
#
# Env:
#   NAME=tf-h200               run name: the run dir is $RUNS/$NAME
#   RECIPES="examples/transformers/llama-1b-bf16-h200-transformers.yaml"   FLEET=examples/gpu/fleet.yaml
#   SYNTH="llama-1b:/tmp/models/llama-1b-w"   PRESET:DIR pairs written with --weights random ("" for none)
#   WHEELS=.tfwhl              the carried wheels, installed --no-index --no-deps into $SITE (/tmp/site)
#   RUN_TIMEOUT=150            seconds `llmsweep run` may take (SIGINT, then its servers are stopped)
#   CALL_LIMIT=                the device call's timeout_s: RUN_TIMEOUT shrinks so stopping and packing still fit
#   RUNS=/tmp/runs  RECORDS_PER_JOB=40  LOG_TAIL=300
#   SKIP_INSTALL=1             CPU rehearsal: no wheel install; SITE names a folder holding what python3 lacks
#
# CPU rehearsal (torch CPU + transformers 5.17.0 venv first on PATH, the tiny CPU recipe):
#   PATH=/tmp/venv-tfserve/bin:$PATH SKIP_INSTALL=1 SITE=/tmp/rh-site OUT=/tmp/out-tf NAME=tf-cpu \
#     RECIPES=examples/transformers/tiny-cpu-transformers.yaml FLEET=examples/transformers/fleet.yaml \
#     SYNTH=tiny:/tmp/models/tiny bash scripts/gpu/run_tf_llmsweep.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
NAME=${NAME:-tf-h200}; RECIPES=${RECIPES:-examples/transformers/llama-1b-bf16-h200-transformers.yaml}
FLEET=${FLEET:-examples/gpu/fleet.yaml}; SYNTH=${SYNTH-llama-1b:/tmp/models/llama-1b-w}; WHEELS=${WHEELS:-.tfwhl}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}; RUNS=${RUNS:-/tmp/runs}; RECORDS_PER_JOB=${RECORDS_PER_JOB:-40}
LOG_TAIL=${LOG_TAIL:-300}
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/steps.txt"; }
export HF_HOME=/tmp/hfhome HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1 PYTHONUNBUFFERED=1 \
  DO_NOT_TRACK=1

# 1. the serving wheels (the image has torch and transformers, not fastapi/uvicorn/openai/pydantic)
site=${SITE:-/tmp/site}
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$WHEELS"/*.whl >>"$OUT/steps.txt" 2>&1 || { log "wheel install failed"; tail -20 "$OUT/steps.txt"; exit 1; }
fi
export PYTHONPATH="$repo/src:$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
llmsweep() { python3 -m llmsweep.cli.main "$@"; }
log "wheels in $site: $(ls "$WHEELS" 2>/dev/null | wc -l) carried; llmsweep $(llmsweep --version 2>&1 | tail -1)"
python3 -c "import sys, torch, transformers, fastapi, uvicorn, openai, pydantic
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda,
      'available', torch.cuda.is_available(), 'transformers', transformers.__version__, 'fastapi', fastapi.__version__,
      'uvicorn', uvicorn.__version__, 'openai', openai.__version__, 'pydantic', pydantic.__version__)" \
  >>"$OUT/steps.txt" 2>&1 || { log "serving imports failed"; tail -20 "$OUT/steps.txt"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$OUT/steps.txt" 2>&1
tail -2 "$OUT/steps.txt"

# 2. the models, with random weights (EOS logits zeroed: the server rejects ignore_eos)
for item in $SYNTH; do
  preset=${item%%:*}; dir=${item#*:}
  llmsweep model synth "$preset" --out "$dir" --force --weights random >/dev/null 2>>"$OUT/steps.txt" \
    || { log "model synth $preset failed"; tail -20 "$OUT/steps.txt"; exit 1; }
  log "model $preset written to $dir ($(du -sh "$dir" | cut -f1))"
done

# 3. the run; CALL_LIMIT keeps 45 s for SIGINT's grace, stopping servers and packing, whatever setup took
run="$RUNS/$NAME"; mkdir -p "$run"
if [[ -n "${CALL_LIMIT:-}" ]]; then
  left=$((CALL_LIMIT - ($(date +%s) - T0) - 45)); ((left < RUN_TIMEOUT)) && RUN_TIMEOUT=$left
  log "RUN_TIMEOUT=$RUN_TIMEOUT s (CALL_LIMIT=$CALL_LIMIT)"
fi
log "llmsweep run $RECIPES -> $run"
# shellcheck disable=SC2086
timeout -s INT -k 15 "$RUN_TIMEOUT" python3 -m llmsweep.cli.main run $RECIPES --runner-config "$FLEET" \
  --executor local --executor-option allow_image=true --out "$run" --store "$run/results.sqlite" 2>&1 \
  | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
log "llmsweep run exit $rc"
python3 - "$run" <<'PY' 2>&1 | tee -a "$OUT/steps.txt"
import sys
from pathlib import Path
from llmsweep.execute.lifecycle import stop_stale_servers
print("stale servers stopped:", stop_stale_servers(Path(sys.argv[1]), print))
PY
if [[ $rc -ne 0 && ! -f "$run/report/index.html" ]]; then
  timeout 20 python3 -m llmsweep.cli.main results ingest "$run" --store "$run/results.sqlite" >>"$OUT/steps.txt" 2>&1
  timeout 20 python3 -m llmsweep.cli.main report "$run" >>"$OUT/steps.txt" 2>&1
  log "partial run stored and reported"
fi

# 4. the evidence: summaries, job/outcome/command files, a slice of each job's records, server logs' tails and key
#    lines, the store and the dashboard, in one archive
packs=$(mktemp -d "${TMPDIR:-/tmp}/pack.XXXXXX"); pack="$packs/$NAME"; mkdir -p "$pack"  # its own folder: two runs on one host never share one
tar -C "$run" --exclude=records.jsonl --exclude='server*.log' -cf - . | tar -C "$pack" -xf -
for f in "$run"/jobs/*/records.jsonl; do [[ -f "$f" ]] && head -n "$RECORDS_PER_JOB" "$f" > "$pack/${f#"$run"/}"; done
for f in "$run"/jobs/*/server*.log "$run"/servers/*/server*.log; do
  [[ -f "$f" ]] && tail -n "$LOG_TAIL" "$f" > "$pack/${f#"$run"/}"
done
for f in "$run"/servers/*/server.log "$run"/jobs/*/server.log; do
  [[ -f "$f" ]] && grep -iE "cuda graph|continuous batching|num_blocks|num blocks|max_batch_tokens|memory|Application startup|Uvicorn running|error|Traceback" "$f" \
    | head -60 > "$pack/${f#"$run"/}.key.txt"
done
cp "$OUT/steps.txt" "$OUT/run.log" "$pack/" 2>/dev/null
tar -C "$packs" -czf "$OUT/results.tgz" "$NAME"
rm -rf "$packs"
log "packed $(du -h "$OUT/results.tgz" | cut -f1) into $OUT/results.tgz"
exit "$rc"
