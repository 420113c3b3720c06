#!/usr/bin/env bash
# GPU side, ONE device call after the vLLM chunks (.v0 …) are staged: what a signal does to `llmsweep run` on a real
# engine (docs/gpu.md §12). vLLM 0.26.0 serves the dummy-weight 1.1B Llama eagerly
# (examples/gpu/llama-1b-bf16-h200-vllm-signals.yaml: four jobs on one server), and the run is stopped three ways:
#
#   1. `run`; SIGTERM to the driver's pid (what a scheduler sends; not to its group) while a job measures: the run
#      must exit 143 within seconds, leave no vLLM process (the API server, its EngineCore) and no GPU memory held,
#      and the measuring job's outcome must say the signal stopped it;
#   2. `run --resume`; SIGKILL to the driver while a job measures: nothing can clean up, so the server is left running
#      (listed: an orphan holding 85 % of the GPU's memory);
#   3. `run --resume`: it must stop that orphan before launching (it could not start beside it), rerun what was not
#      done and finish; afterwards, no process and no GPU memory held.
#
# The budget (≤ 560 s of a 600-s timeout_s; measured on the H200 for this model, docs/gpu.md §9–§11): install 11–70 s,
# an eager vLLM start 45–78 s (three of them), the four jobs ≈ 100 s, the checks and packing ≈ 20 s.
#
# Env (all optional):
#   RECIPE=examples/gpu/llama-1b-bf16-h200-vllm-signals.yaml  SYNTH=llama-1b (written under /tmp/models/<preset>;
#   "" for none)  RUNS=/tmp/runs  NAME=signals  LOG_TAIL=200
#   TERM_AT=2 KILL_AT=3        the job (k of N, as `run` numbers them) whose measurement each signal waits for
#   STAGE_S=240                the most a stage may take before the script gives up on it (SIGKILL, recorded)
#   SKIP_INSTALL=1             CPU rehearsal: no install (scripts/gpu/cpu_rehearsal first on PATH and PYTHONPATH)
#
# Comes back in $OUT: steps.txt, signals.json (per stage: signal, exit status, seconds from the signal to the exit,
# the engine processes and GPU compute apps left), signals-1.log … signals-3.log (each stage's output), and
# signals.tar.gz (per job its summary, outcome and job files and the server's command and log tail).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
OUT=${OUT:-/tmp/out}
RECIPE=${RECIPE:-examples/gpu/llama-1b-bf16-h200-vllm-signals.yaml}; SYNTH=${SYNTH-llama-1b}
RUNS=${RUNS:-/tmp/runs}; NAME=${NAME:-signals}; LOG_TAIL=${LOG_TAIL:-200}
TERM_AT=${TERM_AT:-2}; KILL_AT=${KILL_AT:-3}; STAGE_S=${STAGE_S:-240}
# shellcheck source=scripts/gpu/vllm_env.sh
. scripts/gpu/vllm_env.sh
for preset in $SYNTH; do
  python3 -m llmsweep.cli.main model synth "$preset" --out "/tmp/models/$preset" --force --weights none >/dev/null \
    2>>"$OUT/steps.txt" || fail "model synth $preset"
done
run="$RUNS/$NAME"; rm -rf "$run"; mkdir -p "$run"
echo '[]' >"$OUT/signals.json"

# What an engine left: its processes (the rendered `vllm serve`, vLLM's EngineCore; the CPU stand-in's simulator)
# and the GPU's compute apps.
left_behind() {
  pgrep -af 'vllm serve|EngineCore|VLLM::|api_server|llmsweep.cli.main sim serve' | grep -v pgrep || true
}
gpu_apps() {
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null || true
}

# stage N SIGNAL K [--resume]: start `run`, wait for job K's measurement, send SIGNAL to the driver's pid (none:
# let it finish), wait for it to exit; append what happened to signals.json.
stage() {
  local n=$1 sig=$2 at=$3; shift 3
  local log="$OUT/signals-$n.log" pid t_sig="" t_end rc waited=0
  python3 -m llmsweep.cli.main run "$RECIPE" --runner-config examples/gpu/fleet.yaml --executor local \
    --executor-option allow_image=true --out "$run" --store "$run/results.sqlite" --no-report "$@" >"$log" 2>&1 &
  pid=$!
  if [[ $sig != none ]]; then
    until grep -Eq "job $at/[0-9]+ .*· measuring" "$log"; do
      if ! kill -0 "$pid" 2>/dev/null || ((waited >= STAGE_S * 10)); then break; fi
      sleep 0.1; waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null && grep -Eq "job $at/[0-9]+ .*· measuring" "$log"; then
      sleep 2  # well inside the measurement
      t_sig=$(date +%s.%N); kill -s "$sig" "$pid"; log "stage $n: SIG$sig to the driver (pid $pid) while job $at measured"
    else
      log "stage $n: job $at never measured (the run ended or stalled): no signal sent"
    fi
  fi
  local limit=$((STAGE_S * 10)); waited=0
  while kill -0 "$pid" 2>/dev/null && ((waited < limit)); do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; log "stage $n: still running after ${STAGE_S}s: SIGKILL"; fi
  wait "$pid"; rc=$?
  t_end=$(date +%s.%N)
  sleep 3  # what the driver started and did not stop has had time to show it is still there
  local procs apps
  procs=$(left_behind); apps=$(gpu_apps)
  log "stage $n: exit $rc; engine processes left: ${procs:-none}; GPU apps: ${apps:-none}"
  python3 - "$OUT/signals.json" "$n" "$sig" "$rc" "$t_sig" "$t_end" "$procs" "$apps" "$run" <<'PY'
import json, sys
from pathlib import Path
path, n, sig, rc, t_sig, t_end, procs, apps, run = sys.argv[1:]
stages = json.loads(Path(path).read_text())
outcomes = {}
for f in sorted(Path(run, "jobs").glob("*/outcome.json")):
    doc = json.loads(f.read_text())
    outcomes[f.parent.name] = {"status": doc.get("status"), "reasons": doc.get("reasons", [])[:2]}
stages.append({"stage": int(n), "signal": sig, "exit": int(rc),
               "exit_after_signal_s": round(float(t_end) - float(t_sig), 2) if t_sig else None,
               "engine_processes_left": [p for p in procs.splitlines() if p.strip()],
               "gpu_apps_left": [a for a in apps.splitlines() if a.strip()], "outcomes": outcomes})
Path(path).write_text(json.dumps(stages, indent=1) + "\n")
PY
}

log "llmsweep run $RECIPE -> $run, stopped by SIGTERM at job $TERM_AT, then SIGKILL at job $KILL_AT"
stage 1 TERM "$TERM_AT"
stage 2 KILL "$KILL_AT" --resume
stage 3 none 0 --resume
python3 - "$run" <<'PY' 2>&1 | tee -a "$OUT/steps.txt"
import sys
from pathlib import Path
from llmsweep.execute.lifecycle import stop_stale_servers
print("stale servers stopped after the last stage:", stop_stale_servers(Path(sys.argv[1]), print))
PY

packs=$(mktemp -d "${TMPDIR:-/tmp}/pack.XXXXXX"); pack="$packs/$NAME"; mkdir -p "$pack"
tar -C "$run" --exclude=records.jsonl --exclude='server*.log' --exclude='*.sqlite' -cf - . | tar -C "$pack" -xf -
for f in "$run"/servers/*/server*.log "$run"/jobs/*/server*.log; do
  [[ -f "$f" ]] && tail -n "$LOG_TAIL" "$f" > "$pack/${f#"$run"/}"
done
tar -C "$packs" -czf "$OUT/$NAME.tar.gz" "$NAME"
rm -rf "$packs"
log "packed $(du -h "$OUT/$NAME.tar.gz" | cut -f1) into $OUT/$NAME.tar.gz"
cat "$OUT/signals.json"
