#!/usr/bin/env bash
# Runtime benchmark on the GPU host: ours (runtime.mjs via the bundled node) and PyTorch in the same run,
# merged into $OUT/runtime.json (commit, GPU, driver and library versions) with a table whose last lines are
# the ratios ours/torch against the targets. Run from the bundle folder or pass it:
#   dist/gpu-host/bench/run runtime [--quick]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup bench
echo "bench: bundle $bundle, python $PY, out $OUT"
"$bundle/run-node" "$drv/runtime.mjs" --json "$OUT/runtime_ours.json" "$@"
"$PY" "$here/runtime_torch.py" --json "$OUT/runtime_torch.json" "$@"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
"$PY" - "$OUT" "$commit" "$driver" <<'PY'
import json, sys
out, commit, driver = sys.argv[1], sys.argv[2], sys.argv[3]
ours = json.load(open(f"{out}/runtime_ours.json"))
torch = json.load(open(f"{out}/runtime_torch.json"))
merged = {"commit": commit, "gpu": (ours.get("device") or {}).get("name"), "driver": driver,
          "versions": {"ours": ours["versions"], "torch": torch["versions"]}, "ours": ours, "torch": torch}
rows = []
def row(name, o, t, unit, higher_better):
    r = (o / t) if t else float("nan")
    rows.append((name, o, t, unit, r))
    return r
lo, lt = ours["launch"], torch["launch"]
row("launch eager (us/launch)", lo["eagerUsPerLaunch"], lt["eagerUsPerLaunch"], "us", False)
row("launch in graph (us/kernel)", lo["graphUsPerKernel"], lt["graphUsPerKernel"], "us", False)
copy_ratios = [row(f"copy {o['gib']} GiB (GB/s)", o["gbps"], t["gbps"], "GB/s", True) for o, t in zip(ours["copy"], torch["copy"])]
gemm_ratios = []
for o, t in zip(ours["gemm"], torch["gemm"]):
    gemm_ratios.append(row(f"gemm {o['name']} M={o['m']} (TFLOP/s)", o["tflops"], t["tflops"], "TFLOP/s", True))
def geo(xs):
    import math
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
merged["ratios"] = {
    "launchEagerUs": lo["eagerUsPerLaunch"], "launchGraphUs": lo["graphUsPerKernel"],
    "copyMin": min(copy_ratios), "gemmGeomean": geo(gemm_ratios), "gemmMin": min(gemm_ratios),
    "gemmSquare": gemm_ratios[0],
}
json.dump(merged, open(f"{out}/runtime.json", "w"), indent=2)
print(f"\n{'measure':44s} {'ours':>12s} {'torch':>12s} {'ours/torch':>10s}")
for name, o, t, unit, r in rows:
    print(f"{name:44s} {o:12.3f} {t:12.3f} {r:10.3f}")
R = merged["ratios"]
ok = lambda b: "PASS" if b else "MISS"
print(f"\nruntime.json: {out}/runtime.json (commit {commit or '?'}, {merged['gpu']}, driver {driver or '?'})")
print(f"target launch eager <= 5 us:        {R['launchEagerUs']:.2f} us  {ok(R['launchEagerUs'] <= 5)}")
print(f"target launch in graph <= 2 us:     {R['launchGraphUs']:.3f} us  {ok(R['launchGraphUs'] <= 2)}")
print(f"target copy >= 0.95x torch:         {R['copyMin']:.3f}x (min over sizes)  {ok(R['copyMin'] >= 0.95)}")
print(f"target gemm >= 0.97x torch:         {R['gemmGeomean']:.3f}x geomean, {R['gemmMin']:.3f}x min, {R['gemmSquare']:.3f}x at 8192^3  {ok(R['gemmGeomean'] >= 0.97)}")
PY
