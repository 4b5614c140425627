#!/usr/bin/env bash
# Op-level benchmark on the GPU host (issue 26, `bench/ops`): the generated CUDA kernels through the op registry
# (ops.mjs via the bundled node) and PyTorch eager / torch.compile at the same shapes (ops_torch.py), each beside a
# same-size device copy timed alike, merged into $OUT/ops.json with a table whose last lines are the targets.
#   dist/gpu-host/bench/run ops [--quick] [--only substring]      (records results/<device>/ops.json)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup bench-ops
quick=()
for x in "$@"; do [ "$x" = "--quick" ] && quick=(--quick); done
echo "bench-ops: bundle $bundle, python $PY, out $OUT"
"$bundle/run-node" "$drv/ops.mjs" --json "$OUT/ops_ours.json" "$@"
"$PY" "$here/ops_torch.py" --cases "$OUT/ops_ours.json" --json "$OUT/ops_torch.json" "${quick[@]}"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
"$PY" "$here/merge.py" "$OUT" "$commit" "$driver"
