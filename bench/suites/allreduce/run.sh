#!/usr/bin/env bash
# All-reduce bus bandwidth on 2 GPUs: ours (allreduce.mjs, launched by itself through backend-nccl's launcher)
# and torch.distributed (NCCL, under torchrun) in the same run, with the same libnccl where possible (ours is
# pointed at torch's nvidia-nccl wheel unless FASTKERNELS_NCCL_LIB_DIRS is set), NVLink multicast off for both.
# Writes $OUT/allreduce.json; the last lines are the ratios against the target (ours >= 0.95x torch busBw).
#   dist/gpu-host/bench/run allreduce [--quick] [--dtype bf16|f16|f32] [--nproc 2]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup bench
nproc=2
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) nproc="$2"; shift 2;;
    *) pass+=("$1"); shift;;
  esac
done
fk_nccl_env
echo "bench: bundle $bundle, python $PY, out $OUT, nproc $nproc, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE, FASTKERNELS_NCCL_LIB_DIRS=${FASTKERNELS_NCCL_LIB_DIRS:-<discovery>}"
"$bundle/run-node" "$drv/allreduce.mjs" --nproc "$nproc" --json "$OUT/allreduce_ours.json" "${pass[@]}"
"$PY" -m torch.distributed.run --standalone --nproc_per_node "$nproc" "$here/allreduce_torch.py" --json "$OUT/allreduce_torch.json" "${pass[@]}"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
"$PY" - "$OUT" "$commit" "$driver" <<'PY'
import json, math, sys
out, commit, driver = sys.argv[1], sys.argv[2], sys.argv[3]
ours = json.load(open(f"{out}/allreduce_ours.json"))
torch = json.load(open(f"{out}/allreduce_torch.json"))
tmap = {r["bytes"]: r for r in torch["rows"]}
rows = []
for r in ours["rows"]:
    t = tmap.get(r["bytes"])
    rows.append({"bytes": r["bytes"], "oursUs": r["ms"] * 1e3, "oursBusBwGBps": r["busBwGBps"],
                 "torchUs": t["ms"] * 1e3 if t else None, "torchBusBwGBps": t["busBwGBps"] if t else None,
                 "ratio": (r["busBwGBps"] / t["busBwGBps"]) if t else None})
ratios = [r["ratio"] for r in rows if r["ratio"]]
summary = {"minRatio": min(ratios) if ratios else None,
           "geomeanRatio": math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None,
           "peakBusBwGBps": {"ours": max(r["oursBusBwGBps"] for r in rows), "torch": max((r["torchBusBwGBps"] or 0) for r in rows)}}
merged = {"commit": commit, "gpu": ours.get("device"), "driver": driver, "world": ours["world"], "dtype": ours["dtype"],
          "versions": {"ncclOurs": ours["nccl"], "ncclTorch": torch.get("nccl"), "torch": torch.get("torch")},
          "env": ours.get("env"), "summary": summary, "rows": rows,
          "seconds": {"ours": ours.get("seconds"), "torch": torch.get("seconds")}}
json.dump(merged, open(f"{out}/allreduce.json", "w"), indent=2)
print(f"\nall-reduce {ours['dtype']} on {ours['world']} x {ours.get('device')} (NCCL ours {ours['nccl'].get('version')} from {ours['nccl'].get('library')}, torch's {torch.get('nccl')})")
print(f"{'size':>8s} {'ours us':>10s} {'torch us':>10s} {'ours busBw':>11s} {'torch busBw':>12s} {'ratio':>6s}")
for r in rows:
    print(f"{r['bytes'] // 2**20:6d}MB {r['oursUs']:10.1f} {r['torchUs'] or float('nan'):10.1f} {r['oursBusBwGBps']:11.1f} {r['torchBusBwGBps'] or float('nan'):12.1f} {r['ratio'] or float('nan'):6.3f}")
ok = lambda b: "PASS" if b else "MISS"
print(f"\nallreduce.json: {out}/allreduce.json (commit {commit or '?'}, driver {driver or '?'})")
print(f"peak busBw: ours {summary['peakBusBwGBps']['ours']:.1f} GB/s, torch {summary['peakBusBwGBps']['torch']:.1f} GB/s")
print(f"target busBw >= 0.95x torch at every size 1 MB..1 GB: min {summary['minRatio']:.3f}x, geomean {summary['geomeanRatio']:.3f}x  {ok(summary['minRatio'] is not None and summary['minRatio'] >= 0.95)}")
PY
