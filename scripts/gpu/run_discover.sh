#!/usr/bin/env bash
# GPU side, ONE device call after the vLLM chunks (.v0 …) and the GGUF chunks (.m0 …, scripts/gpu/stage_gguf.sh) are
# staged: install vLLM 0.26.0, import SmolLM2-135M-Instruct's real weights from its GGUF (`llmsweep model import`),
# then `llmsweep discover` on examples/gpu/smollm2-135m-bf16-h200-vllm-discover.yaml with the local executor: the
# ladder 1…64 × 3 workload seeds on one vLLM server, one refinement round on a second, the proposed grid. The
# evidence comes back small (docs/discover.md "On a real engine").
#
# The budget of the call (≤ 560 s of a 600 s timeout_s). Measured on this H200 for this model (docs/gpu.md §9/§10):
# install 68–69 s, import 7–8 s, an eager vLLM start 78 s cold and 45–48 s warm (104 s at a 9k context), n-gram
# decoding ITL p50 13 ms at conc 1; the rest is estimated (plain decoding is at most as slow per step):
#   install_vllm.sh + GGUF check/unpack/import                                                      ≈  80 s
#   ladder stage: one eager vLLM start                                                              ≤ 105 s
#     21 runs (7 concurrencies × 3 seeds); a run is 2 warm-ups + 4 × conc prompts of 1k in / 128 out, i.e. about 4
#     waves of 128 eager decode steps (≤ 13 ms each at ≤ 32 sequences) ≈ 5–7 s, + ~2 s per job (scrapes, summary,
#     store); conc 64 queues behind --max-num-seqs 32: 8 waves ≈ 12 s                               ≈ 200 s
#   refine-1 stage: a second (warm) eager start + one run per new point (1–2 points)                ≤  80 s
#   stopping the server, packing                                                                    ≈  15 s
#                                                                                            total  ≈ 480 s
# If the runs take half again as long (300 s), the ladder still ends ≈ 485 s into the call, before the 515-s mark
# where the discovery is cut, and the refinement is skipped (below); slower still, a cut in the third seed's pass
# leaves two complete repeats (every seed runs the whole ladder before the next) for discovery.json's analysis.
# The discovery gets what is left of CALL_LIMIT less RESERVE_S, twice: as `--time-limit` (less 10 s), so it skips the
# refinement round when the ladder's own measured server start and slowest run say it would not fit (the ladder then
# proposes alone, and discovery.json names the skipped stage), and as `timeout -s INT`, the backstop: cut during a
# stage, it stops that stage's server, writes discovery.json from every run measured so far (`interrupted` names the
# stage) and proposes no recipe — the ladder's evidence comes back either way. Smaller: REPEATS=2, LADDER_TOP=32.
#
# Env (all optional):
#   GGUF=FILE  GGUF_STASH=/tmp/mstash  GGUF_WHEEL=FILE   the weights (scripts/gpu/import_gguf.sh)
#   RECIPE=examples/gpu/smollm2-135m-bf16-h200-vllm-discover.yaml  MODEL_DIR=/tmp/models/smollm2-135m-instruct
#   REPEATS=3  LADDER_TOP=64  REFINE=1   the discovery's --repeats, --ladder-top, --refine
#   CALL_LIMIT=560             the device call's own budget: the discovery gets what is left less RESERVE_S
#   RESERVE_S=45               the SIGINT → stop → write → pack margin (timeout's -k 30 included)
#   MIN_LEFT_S=20              with no more seconds than this left, the discovery is not started (> 10: the
#                              --time-limit is 10 s less); the CPU rehearsal of a cut lowers it, its runs take seconds
#   DISC=/tmp/discover         the discovery's --out (stages/, store.sqlite, discovery.json, proposed.yaml)
#   LOG_TAIL=200               server log lines kept per server
#   SKIP_INSTALL=1             CPU rehearsal: no install (scripts/gpu/cpu_rehearsal first on PATH and PYTHONPATH)
#
# Comes back in $OUT (≤ 8 files): steps.txt, import.json, discover.log (progress, the table, the diff),
# discovery.json, proposed.yaml, proposed.diff, discover-evidence.tgz (stage recipes; per job its summary, job,
# outcome, server command and the first 50 records; per server its command and log tail).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; touch "$OUT/steps.txt"
RECIPE=${RECIPE:-examples/gpu/smollm2-135m-bf16-h200-vllm-discover.yaml}
MODEL_DIR=${MODEL_DIR:-/tmp/models/smollm2-135m-instruct}
REPEATS=${REPEATS:-3}; LADDER_TOP=${LADDER_TOP:-64}; REFINE=${REFINE:-1}
CALL_LIMIT=${CALL_LIMIT:-560}; RESERVE_S=${RESERVE_S:-45}; MIN_LEFT_S=${MIN_LEFT_S:-20}
DISC=${DISC:-/tmp/discover}; LOG_TAIL=${LOG_TAIL:-200}
# 1. the common start: log/fail, offline env, vLLM from the staged chunks, PYTHONPATH (scripts/gpu/vllm_env.sh)
# shellcheck source=scripts/gpu/vllm_env.sh
. scripts/gpu/vllm_env.sh

# 2. real weights: the GGUF as a Hugging Face directory (bf16 safetensors, tokenizer, chat template)
# shellcheck source=scripts/gpu/import_gguf.sh
. scripts/gpu/import_gguf.sh
recipe="$RECIPE"
if ! grep -q "model-path: $MODEL_DIR\$" "$RECIPE"; then   # MODEL_DIR elsewhere: serve it from there
  recipe="$(mktemp -d)/$(basename "$RECIPE")"
  sed -e "s#model-path: .*#model-path: $MODEL_DIR#" -e "s#tokenizer: .*#tokenizer: $MODEL_DIR#" "$RECIPE" >"$recipe"
fi

# 3. the discovery: what is left of the call, less the margin to stop, write and pack
left=$((CALL_LIMIT - ($(date +%s) - T0) - RESERVE_S))
((left > MIN_LEFT_S)) || fail "only ${left}s left for the discovery"
log "llmsweep discover $recipe: --repeats $REPEATS --ladder-top $LADDER_TOP --refine $REFINE, ${left}s left"
rm -rf "$DISC"
timeout -s INT -k 30 "$left" python3 -m llmsweep.cli.main discover "$recipe" \
  --runner-config examples/gpu/fleet.yaml --executor local --executor-option allow_image=true \
  --repeats "$REPEATS" --ladder-top "$LADDER_TOP" --refine "$REFINE" --time-limit $((left - 10)) \
  --out "$DISC" >"$OUT/discover.log" 2>&1
rc=$?
log "llmsweep discover exit $rc ($( ((rc == 130 || rc == 124)) && echo "cut by the call's budget: what was measured is \
analysed, no recipe proposed" || echo done))"
tail -40 "$OUT/discover.log"
python3 - "$DISC/stages" <<'PY' 2>&1 | tee -a "$OUT/steps.txt"
import sys
from pathlib import Path
from llmsweep.execute.lifecycle import stop_stale_servers
for run in sorted(p for p in Path(sys.argv[1]).glob("*") if p.is_dir()):
    print(f"{run.name}: stale servers stopped:", stop_stale_servers(run, print))
PY

# 4. the evidence
for f in discovery.json proposed.yaml proposed.diff; do [[ -f "$DISC/$f" ]] && cp "$DISC/$f" "$OUT/"; done
pack=$(mktemp -d "${TMPDIR:-/tmp}/discover-pack.XXXXXX")  # its own folder: two runs on one host never share one
if [[ -d "$DISC/stages" ]]; then
  (cd "$DISC" && find stages -maxdepth 1 -name '*.yaml' -exec cp --parents {} "$pack" \;
   find stages -path '*/jobs/*' \( -name summary.json -o -name job.json -o -name outcome.json -o -name run.json \
     -o -name server_command.txt -o -name server_metrics.jsonl \) -exec cp --parents {} "$pack" \;
   find stages -maxdepth 2 -name run.json -exec cp --parents {} "$pack" \;
   find stages -path '*/servers/*' ! -name '*.log' -type f -exec cp --parents {} "$pack" \;)
  for f in "$DISC"/stages/*/jobs/*/records.jsonl; do
    [[ -f "$f" ]] && mkdir -p "$(dirname "$pack/${f#"$DISC"/}")" && head -n 50 "$f" >"$pack/${f#"$DISC"/}"
  done
  for f in "$DISC"/stages/*/servers/*/server*.log; do
    # its folder may hold nothing else the pack took (a server stopped as stale has no pid file left)
    [[ -f "$f" ]] && mkdir -p "$(dirname "$pack/${f#"$DISC"/}")" && tail -n "$LOG_TAIL" "$f" >"$pack/${f#"$DISC"/}"
  done
fi
cp "$OUT/import.json" "$pack/" 2>/dev/null
tar -C "$pack" -czf "$OUT/discover-evidence.tgz" .
rm -rf "$pack"
log "packed $(du -h "$OUT/discover-evidence.tgz" | cut -f1) into $OUT/discover-evidence.tgz; $(ls "$OUT" | tr '\n' ' ')"
exit "$rc"
