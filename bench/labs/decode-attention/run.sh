#!/usr/bin/env bash
# Issue 4, paged decode: builds and runs bench/labs/decode-attention/decode_lab.cu on the GPU host (nvcc there; no Node, no bundle): the
# engine's tensor-core decode kernel on the kernel bench's b64 x 2k case, what its time is made of (main kernel, combine,
# the splits merged in the kernel, read floor, copy), with bit checks. Run from the
# repository's working tree (the lab includes packages/backend-cuda/kernels/attention_decode.cu).
#   OUT=/tmp/out bench/labs/decode-attention/run.sh [REPS]     (default 20; ~30 s)
# Writes $OUT/decode-lab.log and $OUT/decode-lab.build.log and prints the table. Exit 1 when a check fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_lab_setup
bin="$OUT/decode_lab"
fk_lab_build "$here/decode_lab.cu" "$bin" "$OUT/decode-lab.build.log" 'fk_paged_decode_mma'
rc=0
timeout 300 "$bin" "${1:-20}" > "$OUT/decode-lab.log" 2>&1 || rc=1
grep '^decode-lab:' "$OUT/decode-lab.log" | grep -v ' median ' || true
sed -n '/^decode-lab table/,$p' "$OUT/decode-lab.log"
rm -f "$bin"
exit $rc
