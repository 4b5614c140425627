#!/usr/bin/env bash
# Issue 4, varlen prefill: builds and runs bench/labs/prefill-wgmma/prefill_wgmma_lab.cu on the GPU host (nvcc there; no Node, no bundle):
# the engine's wgmma (Hopper tensor-core) prefill kernel against its mma.sync kernel on one causal sequence, 32 / 8
# heads x 128, bf16, checked against the mma kernel and a float32 reference of two heads. Run from the repository's
# working tree (the lab includes packages/backend-cuda/kernels/attention_prefill.cu).
#   OUT=/tmp/out bench/labs/prefill-wgmma/run.sh [S ...]     (default 4096; ~1 min)
# Writes $OUT/prefill-wgmma-<S>.log and $OUT/prefill-wgmma.build.log, and prints each run's table. Exit 1 when a check fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_lab_setup
bin="$OUT/prefill_wgmma_lab"
fk_lab_build "$here/prefill_wgmma_lab.cu" "$bin" "$OUT/prefill-wgmma.build.log" '.*prefill_wgmma'
rc=0
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(4096)
for n in "${sizes[@]}"; do
  timeout 120 "$bin" "$n" > "$OUT/prefill-wgmma-$n.log" 2>&1 || { rc=1; tail -5 "$OUT/prefill-wgmma-$n.log"; }
  grep '^prefill-wgmma:' "$OUT/prefill-wgmma-$n.log" || true
  sed -n '/^prefill-wgmma table/,$p' "$OUT/prefill-wgmma-$n.log"
done
rm -f "$bin"
exit $rc
