#!/usr/bin/env bash
# Does a kernel refactor change the code the GPU runs? Compiles packages/backend-cuda/kernels/FILE.cu as NVRTC gets it
# (local headers inlined by scripts/embed-kernels.mjs) at git revision REV and in the working tree, with the same -D
# defines, for sm_90a, and compares the machine code of ENTRY (the bytes of its .text section in the cubin). "same"
# means identical SASS, so a GPU run verified at REV still holds; "DIFF" means the refactor needs a GPU run.
#   tools/sass-same.sh REV FILE ENTRY [-DNAME=value ...]      e.g. tools/sass-same.sh HEAD~3 norm fk_rms_norm -DFK_VEC=8
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: tools/sass-same.sh REV FILE ENTRY [-Ddefines...]" >&2; exit 2; }
rev="$1" file="$2" entry="$3"; shift 3
kdir=packages/backend-cuda/kernels
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old" "$work/new"
git show "$rev:$kdir/$file.cu" > "$work/old/$file.cu" || { echo "sass-same: $kdir/$file.cu is not in $rev" >&2; exit 2; }
for h in $(git ls-tree --name-only "$rev" "$kdir/" | grep '\.cuh$' || true); do git show "$rev:$h" > "$work/old/$(basename "$h")"; done
cp "$kdir"/*.cu "$work/new/"; cp "$kdir"/*.cuh "$work/new/" 2>/dev/null || true
for v in old new; do
  node --input-type=module -e "
    import { inlineLocalHeaders } from './packages/backend-cuda/scripts/embed-kernels.mjs';
    import { readFileSync, writeFileSync } from 'node:fs';
    const p = process.argv[1]; writeFileSync(p + '.inl.cu', inlineLocalHeaders(process.argv[2], readFileSync(p, 'utf8')));
  " "$work/$v/$file.cu" "$work/$v"
  "${NVCC:-nvcc}" -std=c++17 -arch=sm_90a -cubin "$@" "$work/$v/$file.cu.inl.cu" -o "$work/$v.cubin"
done
# the .text.<entry> section of each cubin (ELF64), compared byte for byte
node -e '
  const fs = require("node:fs");
  const text = (path, name) => {
    const b = fs.readFileSync(path);
    const shoff = Number(b.readBigUInt64LE(0x28)), shentsize = b.readUInt16LE(0x3a), shnum = b.readUInt16LE(0x3c), shstrndx = b.readUInt16LE(0x3e);
    const sec = (i) => ({ name: b.readUInt32LE(shoff + i * shentsize), off: Number(b.readBigUInt64LE(shoff + i * shentsize + 0x18)), size: Number(b.readBigUInt64LE(shoff + i * shentsize + 0x20)) });
    const strtab = sec(shstrndx).off;
    for (let i = 0; i < shnum; i++) {
      const s = sec(i);
      const n = b.toString("latin1", strtab + s.name, b.indexOf(0, strtab + s.name));
      if (n === name) return b.subarray(s.off, s.off + s.size);
    }
    return null;
  };
  const [dir, entry] = process.argv.slice(1);
  const a = text(`${dir}/old.cubin`, `.text.${entry}`), b = text(`${dir}/new.cubin`, `.text.${entry}`);
  if (!a || !b) { console.error(`sass-same: no entry ${entry} in the ${a ? "new" : "old"} cubin`); process.exit(2); }
  process.exit(a.equals(b) ? 0 : 1);
' "$work" "$entry" && { echo "same  $file $entry $*"; exit 0; }
rc=$?; [ "$rc" = 1 ] && { echo "DIFF  $file $entry $*"; exit 1; }; exit "$rc"
