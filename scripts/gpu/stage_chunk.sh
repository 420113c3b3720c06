#!/usr/bin/env bash
# GPU side, one call per chunk: copy chunk folder .vN (carried with this call) into /tmp/stash, where it survives
# until the machine is given back (30 s idle). Checks the part at once, so a broken transfer costs one short call.
# usage: bash scripts/gpu/stage_chunk.sh N     (device call: carry=['.vN']; PREFIX=.a for another wheel set's folders)
set -euo pipefail
n=${1:?usage: stage_chunk.sh N (the chunk number; carry .vN with the call)}
src="${PREFIX:-.v}$n"
stash=${STASH:-/tmp/stash}
[[ -d "$src" ]] || { echo "stage_chunk: $src is not here: name it in the call's carry" >&2; exit 2; }
mkdir -p "$stash"
cp "$src"/part.* "$src/SHA256SUMS" "$stash/"
(cd "$stash" && sha256sum --quiet -c --ignore-missing SHA256SUMS) \
  || { echo "stage_chunk: chunk $n does not match SHA256SUMS; stage it again" >&2; exit 1; }
have=$(cd "$stash" && ls part.* | wc -l); want=$(wc -l < "$stash/SHA256SUMS")
echo "stage_chunk: chunk $n staged ($(du -sh "$src" | cut -f1)); $have of $want parts in $stash"
