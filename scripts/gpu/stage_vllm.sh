#!/usr/bin/env bash
# Stage vLLM 0.26.0 for the lent H200 machine, which reaches no network: download the wheel list beside this script
# (run here, where PyPI is reachable), verify every wheel, and pack them into chunk folders .v0 .. .vN of the repo
# root, each one part of at most 42 MiB plus SHA256SUMS: one device call may carry 64 MiB, working tree included.
# Then follow docs/gpu.md: one `stage_chunk.sh N` call per chunk, back to back, then one long call.
#
# usage: scripts/gpu/stage_vllm.sh [--dry-run] [--no-download] [--cache DIR] [--chunk-mib N] [--list FILE] [--prefix P]
#   --dry-run      parse and check the list, print the plan, download nothing
#   --no-download  pack what the cache already holds (it must match the list)
#   --cache DIR    where wheels are downloaded and kept between runs (default ~/.cache/llmsweep/vllm-0.26.0)
#   --chunk-mib N  part size (default 42: the working tree, ~18 MiB with the committed evidence, travels with each
#                  part; 50 left 0.3 MB of room on 2026-12-05, 46 was 73 KiB short on 2026-12-07)
#   --list FILE    the pinned wheel list (default: vllm-0.26.0-runtime-wheels.txt beside this script)
#   --prefix P     chunk folder prefix (default .v): another wheel set keeps its own folders, e.g. aiperf's
#                  `--list scripts/gpu/aiperf-0.13.0-wheels.txt --cache ~/.cache/llmsweep/aiperf-0.13.0 --prefix .a`
# STAGE_ROOT=DIR puts the chunk folders in another git checkout (default: this one).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "${STAGE_ROOT:-$here}" rev-parse --show-toplevel)
list="$here/vllm-0.26.0-runtime-wheels.txt"
cache="${LLMSWEEP_WHEEL_CACHE:-$HOME/.cache/llmsweep/vllm-0.26.0}"
chunk_mib=42
prefix=.v
dry_run=0
download=1
while (($#)); do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --no-download) download=0 ;;
    --list) list="$2"; shift ;;
    --cache) cache="$2"; shift ;;
    --chunk-mib) chunk_mib="$2"; shift ;;
    --prefix) prefix="$2"; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "stage_vllm: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ ! "$prefix" =~ ^\.[A-Za-z]+$ ]]; then
  echo "stage_vllm: --prefix $prefix: use a dot and letters (.v, .a) so the folders stay hidden and git-excluded" >&2; exit 2
fi
if ((chunk_mib > 60)); then
  echo "stage_vllm: --chunk-mib $chunk_mib leaves no room for the working tree in a 64 MiB call; use 42" >&2; exit 2
fi

# --- the list: one pinned `name==version` a line, no duplicates ------------------------------------------------------
norm() { tr 'A-Z' 'a-z' | tr '_.' '--'; }   # PEP 503 name normalisation
mapfile -t reqs < <(grep -v '^[[:space:]]*\(#\|$\)' "$list")
bad=$(printf '%s\n' "${reqs[@]}" | grep -v -E '^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+$' || true)
if [[ -n "$bad" ]]; then echo "stage_vllm: $list has lines that are not name==version:" >&2; echo "$bad" >&2; exit 2; fi
dups=$(printf '%s\n' "${reqs[@]}" | cut -d= -f1 | norm | sort | uniq -d)
if [[ -n "$dups" ]]; then echo "stage_vllm: $list names these twice (pip would install both): $dups" >&2; exit 2; fi
echo "stage_vllm: ${#reqs[@]} pinned wheels in $(basename "$list") ($(printf '%s\n' "${reqs[@]}" | grep '^vllm==' || echo 'no vllm'))"

tree_bytes=$(cd "$repo" && git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null \
  | awk '{s+=$1} END {print s+0}')
echo "stage_vllm: the working tree that travels with every call is $((tree_bytes / 1024)) KiB"
if ((tree_bytes + chunk_mib * 1048576 > 64 * 1048576)); then
  echo "stage_vllm: working tree + one ${chunk_mib} MiB part exceeds the 64 MiB a call may carry;" \
       "use a smaller --chunk-mib" >&2
  exit 2
fi
if ((dry_run)); then echo "stage_vllm: dry run, nothing downloaded"; exit 0; fi

# --- download (pip reuses what the cache already holds) --------------------------------------------------------------
mkdir -p "$cache/wheels"
platforms=()
for p in manylinux_2_17 manylinux2014 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 \
         manylinux_2_35 manylinux1; do platforms+=(--platform "${p}_x86_64"); done
((download)) && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$cache/wheels" -r "$list"

# --- verify: exactly one intact wheel per requirement, nothing else -------------------------------------------------
cd "$cache/wheels"
missing=0
declare -A wanted=()
for r in "${reqs[@]}"; do
  name=$(echo "${r%%==*}" | norm); ver=${r##*==}; wanted["$name"]=1
  n=0
  for w in *.whl; do
    wn=$(echo "${w%%-*}" | norm); wv=$(echo "$w" | cut -d- -f2)
    [[ "$wn" == "$name" && "$wv" == "$ver" ]] && n=$((n + 1))
  done
  if ((n != 1)); then echo "stage_vllm: $r has $n wheels in $cache/wheels (want 1)" >&2; missing=1; fi
done
for w in *.whl; do
  wn=$(echo "${w%%-*}" | norm)
  if [[ -z "${wanted[$wn]:-}" ]]; then echo "stage_vllm: removing stale $w (not in the list)"; rm -f -- "$w"; fi
done
((missing == 0)) || exit 1
for w in *.whl; do
  python3 -m zipfile -t "$w" >/dev/null || { echo "stage_vllm: $w is not an intact zip" >&2; exit 1; }
done
sha256sum -- *.whl > WHEELS.sha256
echo "stage_vllm: $(ls *.whl | wc -l) wheels verified, $(du -sm . | cut -f1) MiB"

# --- pack: one reproducible tar, split into parts, one chunk folder per part ----------------------------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/vllm.tar" WHEELS.sha256 -- *.whl
(cd "$work" && split -b "${chunk_mib}M" -d -a 2 vllm.tar part. && rm vllm.tar && sha256sum part.* > SHA256SUMS)
cd "$repo"
for old in "$prefix"[0-9]*; do [[ -d "$old" ]] && rm -rf -- "$old"; done
i=0
for part in "$work"/part.*; do
  mkdir -p "$prefix$i"; mv "$part" "$prefix$i/"; cp "$work/SHA256SUMS" "$prefix$i/"; i=$((i + 1))
done

# --- keep the chunks out of git (and so out of every call that does not carry them) ---------------------------------
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF "/$prefix[0-9]*/" "$exclude" 2>/dev/null || echo "/$prefix[0-9]*/" >> "$exclude"

echo "stage_vllm: $i chunk folders ${prefix}0 .. $prefix$((i - 1)) in $repo:"
du -sh "$prefix"[0-9]* | sed 's/^/  /'
echo "next (docs/gpu.md): for N in 0..$((i - 1)), back to back within 30 s:"
echo "  run(command='PREFIX=$prefix bash scripts/gpu/stage_chunk.sh N', carry=['${prefix}N'])"
echo "then: run(command='bash scripts/gpu/run_vllm.sh', timeout_s=600)"
