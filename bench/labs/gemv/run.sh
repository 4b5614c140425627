#!/usr/bin/env bash
# Issue 7, bs-1 decode: builds and runs bench/labs/gemv/gemv_lab.cu on the GPU host (nvcc there; no Node, no bundle): the step's
# matrix-vector products at M 1 through fk_gemv, fk_gemv_stream, the lab's lab_gemv_dyn and cuBLAS, alone, after a
# norm with and without PDL, and as the 32-layer chain of one decode step. Run from the repository's working tree (the
# lab includes packages/backend-cuda/kernels/gemv.cu). One build per FK_UNR (weight loads in flight per lane).
#   OUT=/tmp/out bench/labs/gemv/run.sh [FK_UNR ...]     (default 8 16; WARPS_PER_SM="8 16 32" the stream grids;
#   FK_WARPS=8 warps per block)
# Writes $OUT/gemv-lab-unr<U>[-w<FK_WARPS>].log per build and prints each build's table.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_lab_setup
fk_lab_cublas "gemv-lab: no cuBLAS headers found: the cuBLAS rows are left out"  # sets blas
unrs=("$@"); [ ${#unrs[@]} -gt 0 ] || unrs=(8 16)
wpb="${FK_WARPS:-8}"
sfx=""; [ "$wpb" = 8 ] || sfx="-w$wpb"
for u in "${unrs[@]}"; do
  name="unr$u$sfx"
  bin="$OUT/gemv_lab_$name"
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DFK_PDL=1 -DFK_UNR="$u" -DFK_WARPS="$wpb" -Xptxas -v "$here/gemv_lab.cu" "${blas[@]}" -o "$bin" \
    > "$OUT/gemv-lab-$name.build.log" 2>&1 || { cat "$OUT/gemv-lab-$name.build.log"; exit 1; }
  grep -A2 'Function properties for fk_gemv' "$OUT/gemv-lab-$name.build.log" | grep -E 'properties|registers' || true
  # shellcheck disable=SC2086
  "$bin" ${WARPS_PER_SM:-8 16 32} > "$OUT/gemv-lab-$name.log" 2>&1 || { tail -20 "$OUT/gemv-lab-$name.log"; exit 1; }
  command -v cuobjdump >/dev/null && cuobjdump -sass -fun fk_gemv_stream "$bin" > "$OUT/gemv-stream-$name.sass" 2>&1 || true
  rm -f "$bin"
  sed -n '/^gemv-lab table/,$p' "$OUT/gemv-lab-$name.log"
done
