#!/usr/bin/env bash
# Issue 7, bs-1 decode: builds and runs bench/labs/gemv-persistent/gemv_persistent_lab.cu on the GPU host (nvcc there; no Node, no bundle):
# the 129 products of one Llama-3-8B decode step with kernel boundaries (norm kernel + fk_gemv_stream, PDL, in a graph)
# against one persistent cooperative launch whose loads run on across product ends. Run from the repository's working
# tree (the lab includes packages/backend-cuda/kernels/gemv.cu). Three builds: the kernel's own register count (4 blocks an
# SM) and LAB_MINB=6 (6 blocks: 48 warps an SM, as the engine's GEMV grids), and late: the kernel's own register count
# with the engine's late PDL trigger (FK_LATE_TRIGGER=1) in ref's GEMVs. LAB_BUILDS picks (default: late regs minb6).
# LAB_RING=1 adds the chain fed through a shared-memory ring by bulk copies (lab_ring_chain.cuh; run 18: whole
# chain and one launch a product in a PDL graph). A chain still running after 10 s ends the build's run with a HUNG
# line and exit 2.
#   OUT=/tmp/out [LAB_BUILDS="late"] [LAB_RING=1] bench/labs/gemv-persistent/run.sh [blocks-per-SM ...]   (~1 min)
# Writes $OUT/gemv-persistent-<build>.log per build and prints each build's table.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_lab_setup
rc=0
for build in ${LAB_BUILDS:-late regs minb6}; do
  flags=(-DFK_PDL=1 -DFK_UNR="${FK_UNR:-4}")
  [ "$build" = minb6 ] && flags+=(-DLAB_MINB=6)
  [ "$build" = late ] && flags+=(-DFK_LATE_TRIGGER=1)  # the engine's fk_gemv_stream builds (gemvLateTrigger 'all')
  bin="$OUT/gemv_persistent_$build"
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a "${flags[@]}" -Xptxas -v "$here/gemv_persistent_lab.cu" -o "$bin" \
    > "$OUT/gemv-persistent-$build.build.log" 2>&1 || { cat "$OUT/gemv-persistent-$build.build.log"; exit 1; }
  grep -A2 'Function properties for lab_chain' "$OUT/gemv-persistent-$build.build.log" | grep -E 'spill|registers' || true
  "$bin" "$@" > "$OUT/gemv-persistent-$build.log" 2>&1 || { rc=1; tail -5 "$OUT/gemv-persistent-$build.log"; }
  rm -f "$bin"
  echo "== $build"
  sed -n '/^gemv-persistent table/,$p' "$OUT/gemv-persistent-$build.log"
done
exit $rc
