#!/usr/bin/env python3
"""PyTorch yardstick for bench/allreduce.mjs: torch.distributed.all_reduce (NCCL backend), in place, 1 MiB ... 1 GiB,
timed exactly like ours (CUDA events around back-to-back calls on rank 0, warm-up 5, best of 3 repetitions of
50 calls up to 64 MiB and 20 above), busBw = algBw * 2 (n - 1) / n.

Run under torchrun: python -m torch.distributed.run --standalone --nproc_per_node 2 bench/allreduce_torch.py --json out.json
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--json")
p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
p.add_argument("--quick", action="store_true")
a = p.parse_args()
t0 = time.time()
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (as in ours)
rank = int(os.environ["RANK"])
local = int(os.environ.get("LOCAL_RANK", rank))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
dist.init_process_group("nccl", device_id=dev)
world = dist.get_world_size()
dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
item = torch.tensor([], dtype=dtype).element_size()
MiB = 2**20
sizes = [MiB * 2**i for i in range(11)]
buf = torch.full((sizes[-1] // item,), 1 / 1024, dtype=dtype, device=dev)
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
rows = []
for nbytes in sizes:
    x = buf[: nbytes // item]
    iters = 10 if a.quick else (50 if nbytes <= 64 * MiB else 20)
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    samples = []
    for _ in range(3):
        e0.record()
        for _ in range(iters):
            dist.all_reduce(x)
        e1.record()
        e1.synchronize()
        samples.append(e0.elapsed_time(e1) / iters)
    ms = min(samples)
    alg = nbytes / (ms / 1e3) / 1e9
    rows.append({"bytes": nbytes, "ms": ms, "algBwGBps": alg, "busBwGBps": alg * 2 * (world - 1) / world})
if rank == 0:
    for r in rows:
        print(f"{r['bytes'] // MiB:8d}MB {r['ms'] * 1e3:10.1f} {r['algBwGBps']:11.1f} {r['busBwGBps']:11.1f}")
    if a.json:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version()) if hasattr(torch.cuda, "nccl") else None
        json.dump({"world": world, "dtype": a.dtype, "torch": torch.__version__, "nccl": nccl, "device": torch.cuda.get_device_name(dev),
                   "rows": rows, "seconds": time.time() - t0}, open(a.json, "w"), indent=2)
dist.destroy_process_group()
