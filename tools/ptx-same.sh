#!/usr/bin/env bash
# Does a kernel refactor change the code? Compiles one entry of packages/backend-cuda/kernels/FILE.cu as NVRTC gets it
# (local headers inlined by scripts/embed-kernels.mjs) at git revision REV and in the working tree, with the same -D
# defines, and compares the PTX of that entry. "same" means the GPU runs identical code, so a GPU run verified at REV
# still holds; "DIFF" means the refactor needs a GPU run.
#   tools/ptx-same.sh REV FILE ENTRY [-DNAME=value ...]      e.g. tools/ptx-same.sh HEAD~3 norm fk_rms_norm -DFK_VEC=8
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: tools/ptx-same.sh REV FILE ENTRY [-Ddefines...]" >&2; exit 2; }
rev="$1" file="$2" entry="$3"; shift 3
kdir=packages/backend-cuda/kernels
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old" "$work/new"
git show "$rev:$kdir/$file.cu" > "$work/old/$file.cu" || { echo "ptx-same: $kdir/$file.cu is not in $rev" >&2; exit 2; }
for h in $(git ls-tree --name-only "$rev" "$kdir/" | grep '\.cuh$' || true); do git show "$rev:$h" > "$work/old/$(basename "$h")"; done
cp "$kdir"/*.cu "$kdir"/*.cuh "$work/new/" 2>/dev/null || cp "$kdir"/*.cu "$work/new/"
for v in old new; do
  node --input-type=module -e "
    import { inlineLocalHeaders } from './packages/backend-cuda/scripts/embed-kernels.mjs';
    import { readFileSync, writeFileSync } from 'node:fs';
    const p = process.argv[1]; writeFileSync(p + '.inl.cu', inlineLocalHeaders(process.argv[2], readFileSync(p, 'utf8')));
  " "$work/$v/$file.cu" "$work/$v"
  "${NVCC:-nvcc}" -std=c++17 -arch=sm_90a -ptx "$@" "$work/$v/$file.cu.inl.cu" -o "$work/$v.ptx"
  awk -v e="$entry" '$0 ~ "\\.entry "e"\\(" {p=1} p {print} p && /^}/ {exit}' "$work/$v.ptx" > "$work/$v.entry.ptx"
  [ -s "$work/$v.entry.ptx" ] || { echo "ptx-same: no entry $entry in the $v $file.cu" >&2; exit 2; }
done
if cmp -s "$work/old.entry.ptx" "$work/new.entry.ptx"; then echo "same  $file $entry $*"; else echo "DIFF  $file $entry $*"; exit 1; fi
