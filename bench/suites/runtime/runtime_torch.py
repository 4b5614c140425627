#!/usr/bin/env python3
"""PyTorch yardstick for bench/runtime.mjs: the same measurements, timed with CUDA events after a warm-up.

launch overhead: an empty-ish kernel launch from Python (a 1-element in-place add on a preallocated tensor),
eager and per kernel inside a replayed CUDA graph of 1000 of them; copy_ bandwidth at 1-4 GiB (read+write);
torch.matmul bf16 TFLOP/s (x @ w.t(), the Linear layout) at 8192^3 and Llama-3-8B decode/prefill shapes.
Usage: python3 bench/runtime_torch.py [--json out.json] [--quick]
"""
import argparse
import json
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--json")
p.add_argument("--quick", action="store_true")
a = p.parse_args()
dev = torch.device("cuda")


def time_ms(fn, warmup=3, reps=10):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


res = {
    "tool": "torch",
    "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "cublas": str(torch._C._cuda_getCompiledVersion()) if hasattr(torch._C, "_cuda_getCompiledVersion") else ""},
    "device": torch.cuda.get_device_name(0),
    "launch": {},
    "copy": [],
    "gemm": [],
}

# ---- launch overhead
t = torch.zeros(1, device=dev)
N = 10_000 if a.quick else 100_000
for _ in range(2000):
    t.add_(1)
torch.cuda.synchronize()
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
h0 = time.perf_counter()
e0.record()
for _ in range(N):
    t.add_(1)
e1.record()
host_ms = (time.perf_counter() - h0) * 1e3
e1.synchronize()
dev_ms = e0.elapsed_time(e1)
res["launch"]["eagerHostUsPerLaunch"] = host_ms * 1e3 / N
res["launch"]["eagerUsPerLaunch"] = max(host_ms, dev_ms) * 1e3 / N
res["launch"]["launches"] = N

per = 1000
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        t.add_(1)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(per):
        t.add_(1)
ms = time_ms(lambda: g.replay(), warmup=3, reps=5 if a.quick else 20)
res["launch"]["graphUsPerKernel"] = ms * 1e3 / per
res["launch"]["graphKernels"] = per
print(f"launch: eager {res['launch']['eagerUsPerLaunch']:.2f} us/launch, graph {res['launch']['graphUsPerKernel']:.3f} us/kernel")

# ---- copy_ bandwidth
for gib in [1] if a.quick else [1, 2, 4]:
    n = gib * 2**30
    src = torch.ones(n, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), warmup=2, reps=3 if a.quick else 10)
    gbps = 2 * n / (ms / 1e3) / 1e9
    res["copy"].append({"gib": gib, "ms": ms, "gbps": gbps})
    print(f"copy {gib} GiB: {ms:.3f} ms, {gbps:.0f} GB/s")
    del src, dst
    torch.cuda.empty_cache()

# ---- bf16 GEMM
llama = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336), ("lm_head", 128256, 4096)]
shapes = [dict(name="square", m=8192, n=8192, k=8192)]
for m in ([1, 32] if a.quick else [1, 8, 16, 32]):
    for name, n, k in llama:
        shapes.append(dict(name=f"decode.{name}", m=m, n=n, k=k))
for name, n, k in llama:
    shapes.append(dict(name=f"prefill.{name}", m=4096, n=n, k=k))
for sh in shapes:
    x = torch.full((sh["m"], sh["k"]), 0.01, dtype=torch.bfloat16, device=dev)
    w = torch.full((sh["n"], sh["k"]), 0.02, dtype=torch.bfloat16, device=dev)
    out = torch.empty((sh["m"], sh["n"]), dtype=torch.bfloat16, device=dev)
    flops = 2 * sh["m"] * sh["n"] * sh["k"]
    reps = 5 if a.quick else (10 if flops > 1e12 else 30)
    ms = time_ms(lambda: torch.matmul(x, w.t(), out=out), warmup=5, reps=reps)
    tf = flops / (ms / 1e3) / 1e12
    res["gemm"].append(dict(sh, ms=ms, tflops=tf))
    print(f"gemm {sh['name']} M={sh['m']} N={sh['n']} K={sh['k']}: {ms * 1e3:.1f} us, {tf:.1f} TFLOP/s")
    del x, w, out
torch.cuda.empty_cache()

if a.json:
    with open(a.json, "w") as f:
        json.dump(res, f, indent=2)
else:
    print(json.dumps(res))
