#!/usr/bin/env bash
# Issue 28's yardstick on the GPU host: the dense-attention cases of the ops suite alone (Llama-3-8B causal prefill,
# non-causal head dim 128 at S = 4096 / 8192, FLUX's 4608 tokens, head dim 64), ours through the op registry against
# PyTorch's default SDPA dispatch and each backend forced (bench/lib/torch_sdpa.py), merged into $OUT/attention.json
# with issue 28's targets last.
#   dist/gpu-host/bench/run attention [--quick]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ops="$here/../ops"
source "$here/../../lib/lib.sh"
fk_setup bench-attention
quick=()
for x in "$@"; do [ "$x" = "--quick" ] && quick=(--quick); done
echo "bench-attention: bundle $bundle, python $PY, out $OUT"
"$bundle/run-node" "$drv/../ops/ops.mjs" --json "$OUT/ops_ours.json" --only sdpa- "$@"
"$PY" "$ops/ops_torch.py" --cases "$OUT/ops_ours.json" --json "$OUT/ops_torch.json" "${quick[@]}"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
"$PY" "$ops/merge.py" "$OUT" "$commit" "$driver"
mv "$OUT/ops.json" "$OUT/attention.json"
