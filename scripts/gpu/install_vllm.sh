#!/usr/bin/env bash
# GPU side: reassemble the staged vLLM wheel set from /tmp/stash, verify it twice (the parts, then every wheel),
# install it into /tmp/site with --no-index --no-deps on top of the image's torch, and print `vllm --version`.
# VERIFY_ONLY=1 stops after reassembly and verification. PACKAGE=aiperf (with STASH, SITE, WHEEL_DIR of its own)
# installs another staged set the same way and checks that package instead of vLLM. Then use it with `export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH`; a second run in the same lease is a no-op.
set -euo pipefail
stash=${STASH:-/tmp/stash}
site=${SITE:-/tmp/site}
wheels=${WHEEL_DIR:-/tmp/vllm-wheels}
package=${PACKAGE:-vllm}
fail() { echo "install_vllm: $*" >&2; exit 1; }

[[ -s "$stash/SHA256SUMS" ]] || fail "$stash/SHA256SUMS is missing: stage every chunk first (scripts/gpu/stage_chunk.sh)"
missing=$(cd "$stash" && awk '{print $2}' SHA256SUMS | while read -r p; do [[ -f "$p" ]] || echo "$p"; done)
[[ -z "$missing" ]] || fail "parts not staged: $(echo $missing) (the machine was given back between calls? restage all)"
stamp="$site/.llmsweep-$package.$(sha256sum "$stash/SHA256SUMS" | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  (cd "$stash" && sha256sum --quiet -c SHA256SUMS) || fail "a staged part is corrupt: restage it"
  rm -rf "$wheels" && mkdir -p "$wheels"
  (cd "$stash" && cat $(awk '{print $2}' SHA256SUMS)) | tar -xf - -C "$wheels"
  (cd "$wheels" && sha256sum --quiet -c WHEELS.sha256) || fail "a wheel does not match WHEELS.sha256"
  echo "install_vllm: $(ls "$wheels"/*.whl | wc -l) wheels verified in $wheels"
  [[ -n "${VERIFY_ONLY:-}" ]] && exit 0
  echo "install_vllm: installing into $site"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$wheels"/*.whl || fail "pip install failed"
  touch "$stamp"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
if [[ "$package" != vllm ]]; then
  echo "install_vllm: $package $(python3 -c "import importlib.metadata as m; print(m.version('$package'))")"
  exit 0
fi
echo "install_vllm: vllm $(python3 -c 'import vllm; print(vllm.__version__)'), torch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not importable')"
vllm --version 2>/dev/null || python3 -m vllm.entrypoints.cli.main --version
