#!/usr/bin/env python3
"""PyTorch yardstick for bench/kernels.mjs: the same L1 math at the same shapes, eager and torch.compile
(dynamic=False, compiled once per shape, only for the cases marked torchCompile), timed with CUDA events after a
warm-up, each call after an L2 flush (zeroing a 2x L2 buffer), median of >= 20 calls.

Reads the case list from the FastKernels JSON (--cases kernels_ours.json) so both sides time identical shapes.
Usage: python3 bench/kernels_torch.py --cases ours.json --json out.json [--no-compile]
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))  # bench/lib: the timer shared with the other suite
from torch_timing import l2_flush_timer  # noqa: E402
from torch_sdpa import time_sdpa  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--cases", required=True)
p.add_argument("--json")
p.add_argument("--no-compile", action="store_true")
p.add_argument("--compile-budget-s", type=float, default=170.0, help="stop compiling new shapes after this many seconds")
p.add_argument("--quick", action="store_true")
a = p.parse_args()
dev = torch.device("cuda")
bf16 = torch.bfloat16
ITERS = 20 if a.quick else 30
T0 = time.time()
compile_spent = 0.0

time_ms = l2_flush_timer(dev, warmup=3, iters=ITERS)


def randn(*shape, dtype=bf16, scale=1.0):
    return (torch.randn(*shape, device=dev, dtype=torch.float32) * scale).to(dtype)


# ------------------------------------------------------------------ the math (what vLLM's forward_native does)
def rms_norm(x, w, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return y.to(x.dtype) * w


def fused_add_rms_norm(x, r, w, eps):
    s = x + r
    return rms_norm(s, w, eps), s


def silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def gelu_tanh_and_mul(x):
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d], approximate="tanh") * x[..., d:]


def rotary_neox(positions, q, k, cache, head):
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)
    def rot(x):
        T = x.shape[0]
        x = x.view(T, -1, head)
        x1, x2 = x.chunk(2, dim=-1)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).view(T, -1)
    return rot(q), rot(k)


def embedding(ids, w):
    return F.embedding(ids, w)


def linear(x, w):
    return F.linear(x, w)


def softmax(x):
    return torch.softmax(x, dim=-1)


def store_kvcache(key, value, kc, vc, idx):
    nkv, d = key.shape[1], key.shape[2]
    kc.view(-1, nkv, d).index_copy_(0, idx, key)
    vc.view(-1, nkv, d).index_copy_(0, idx, value)


def paged_decode_sdpa(q, kc, vc, tables, mask, scale):
    # gather the paged cache into [B, nKv, L, D], then SDPA (GQA) with a key-padding mask
    B, MB = tables.shape
    k = kc[tables].flatten(1, 2).transpose(1, 2)
    v = vc[tables].flatten(1, 2).transpose(1, 2)
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, attn_mask=mask, scale=scale, enable_gqa=True).squeeze(2)


def sampler(logits, temp, topk, topp, greedy_rows):
    # vLLM V1 style: temperature, top-k mask, top-p via sort + cumsum, exponential race
    greedy = logits.argmax(dim=-1)
    if greedy_rows:
        return greedy
    x = logits / temp.clamp_min(1e-6).unsqueeze(1)
    srt, idx = x.sort(dim=-1, descending=False)
    V = x.shape[-1]
    kk = topk.clamp(1, V).long()
    thr = srt.gather(1, (V - kk).unsqueeze(1))
    srt = srt.masked_fill(srt < thr, -float("inf"))
    probs = srt.softmax(dim=-1)
    cum = probs.cumsum(dim=-1)
    srt = srt.masked_fill(cum <= (1 - topp.unsqueeze(1)), -float("inf"))
    srt[:, -1] = x.gather(1, idx[:, -1:]).squeeze(1)
    x = torch.empty_like(x).scatter_(1, idx, srt)
    probs = x.softmax(dim=-1)
    q = torch.empty_like(probs).exponential_()
    return torch.where(temp == 0, greedy, (probs / q).argmax(dim=-1))


# ------------------------------------------------------------------ cases
def build(c):
    tid, d, init, opt = c["task"], c["dims"], c["init"], c.get("options") or {}
    if tid == "L1/rms_norm":
        T, H = d["T"], d["H"]
        x, w = randn(T, H), randn(H, scale=0.1) + 1
        if opt.get("residual"):
            r = randn(T, H)
            return fused_add_rms_norm, (x, r, w, init[1])
        return rms_norm, (x, w, init[1])
    if tid == "L1/silu_and_mul":
        return silu_and_mul, (randn(d["T"], d["D2"], scale=2),)
    if tid == "L1/gelu_and_mul":
        return gelu_tanh_and_mul, (randn(d["T"], d["D2"], scale=2),)
    if tid == "L1/rotary_emb":
        T, P, R = d["T"], d["P"], d["R"]
        inv = 1.0 / (init[3] ** (torch.arange(0, R, 2, device=dev, dtype=torch.float32) / R))
        f = torch.outer(torch.arange(P, device=dev, dtype=torch.float32), inv)
        cache = torch.cat((f.cos(), f.sin()), dim=-1).to(bf16)
        pos = torch.randint(0, P, (T,), device=dev)
        return rotary_neox, (pos, randn(T, d["HQ"]), randn(T, d["HK"]), cache, d["D"])
    if tid == "L1/embedding":
        w = torch.empty(d["V"], d["H"], device=dev, dtype=bf16).normal_()
        return embedding, (torch.randint(0, d["V"], (d["T"],), device=dev), w)
    if tid == "L1/linear":
        return linear, (randn(d["T"], d["K"]), randn(d["N"], d["K"], scale=d["K"] ** -0.5))
    if tid == "L1/softmax":
        return softmax, (randn(d["B"], d["V"], scale=3),)
    if tid == "L1/store_kvcache":
        T, NKV, D, NB = d["T"], d["NKV"], d["D"], d["NB"]
        pad = opt.get("pad", 0)
        idx = torch.randperm(NB * 16, device=dev)[: T - pad]
        kc, vc = randn(NB, 16, NKV, D), randn(NB, 16, NKV, D)
        return store_kvcache, (randn(T - pad, NKV, D), randn(T - pad, NKV, D), kc, vc, idx)
    if tid == "L1/paged_decode_attention":
        B, NQ, NKV, D, S, MB, NB = (d[k] for k in ("B", "NQ", "NKV", "D", "S", "MB", "NB"))
        lens = torch.randint(1, S + 1, (B,), device=dev)
        lens[0] = S
        tables = torch.randint(0, NB, (B, MB), device=dev)
        kc, vc = randn(NB, 16, NKV, D), randn(NB, 16, NKV, D)
        mask = (torch.arange(MB * 16, device=dev)[None, :] < lens[:, None])[:, None, None, :]
        return paged_decode_sdpa, (randn(B, NQ, D), kc, vc, tables, mask, init[2])
    if tid == "L1/varlen_prefill_attention":
        qlens = opt["qLens"]
        NQ, NKV, D = d["NQ"], d["NKV"], d["D"]
        seqs = [(randn(1, NQ, L, D), randn(1, NKV, L, D), randn(1, NKV, L, D)) for L in qlens]
        def varlen(seqs):
            return [F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True) for q, k, v in seqs]
        return varlen, (seqs,)
    if tid == "L1/sampler":
        B, V = d["B"], d["V"]
        greedy_rows = opt.get("mode") == "greedy"
        temp = torch.rand(B, device=dev) + 0.5
        return sampler, (randn(B, V, dtype=torch.float32, scale=2), temp, torch.randint(1, 41, (B,), device=dev), torch.rand(B, device=dev) * 0.4 + 0.6, greedy_rows)
    return None, None


def padded_varlen(c):
    """The packed varlen batch as one padded SDPA call [B, H, max L, D] (right padding, causal: a real row never sees a
    pad key), the other way a PyTorch user runs it. None for a single sequence (the same call as per-sequence)."""
    qlens, d = c["options"]["qLens"], c["dims"]
    if len(qlens) < 2:
        return None
    L = max(qlens)
    q, k, v = randn(len(qlens), d["NQ"], L, d["D"]), randn(len(qlens), d["NKV"], L, d["D"]), randn(len(qlens), d["NKV"], L, d["D"])
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


ATTENTION = {"L1/varlen_prefill_attention"}  # timed as PyTorch's default SDPA dispatch and each backend forced (bench/lib/torch_sdpa.py)


cases = json.load(open(a.cases))["results"]
out = {"tool": "torch", "versions": {"torch": torch.__version__, "cuda": torch.version.cuda}, "device": torch.cuda.get_device_name(0), "results": []}
for c in cases:
    row = {"task": c["task"], "case": c["case"]}
    try:
        fn, xs = build(c)
        if fn is None:
            row["status"] = "no torch version"
            out["results"].append(row)
            continue
        if c["task"] in ATTENTION:
            # eagerMs = the default dispatch; the yardstick (sdpaBestMs) is the fastest of it, each backend forced, and
            # the padded single call
            sd = time_sdpa(time_ms, lambda: fn(*xs))
            row.update(eagerMs=sd["defaultMs"], sdpaBackendsMs=sd["backendsMs"], sdpaBackendErrors=sd["backendErrors"], sdpaBestMs=sd["bestMs"], sdpaBest=sd["bestBackend"])
            pad = padded_varlen(c)
            if pad is not None:
                sp = time_sdpa(time_ms, pad)
                row["sdpaPaddedMs"] = {"default": sp["defaultMs"], **sp["backendsMs"]}
                if sp["bestMs"] < row["sdpaBestMs"]:
                    row.update(sdpaBestMs=sp["bestMs"], sdpaBest=f"padded {sp['bestBackend']}")
        else:
            row["eagerMs"] = time_ms(lambda: fn(*xs))
        if c.get("torchCompile") and not a.no_compile and compile_spent < a.compile_budget_s:
            t1 = time.time()
            cfn = torch.compile(fn, dynamic=False)
            cfn(*xs)
            torch.cuda.synchronize()
            compile_spent += time.time() - t1
            row["compileS"] = time.time() - t1
            row["compiledMs"] = time_ms(lambda: cfn(*xs))
        elif c.get("torchCompile"):
            row["compiled"] = "skipped (compile time budget)" if not a.no_compile else "skipped (--no-compile)"
        row["status"] = "ok"
        del xs
    except Exception as e:  # noqa: BLE001
        row["status"] = "error"
        row["detail"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
    torch.cuda.empty_cache()
    out["results"].append(row)
    best = min([v for v in (row.get("eagerMs"), row.get("compiledMs")) if v is not None], default=float("nan"))
    print(f"torch {c['task']} {c['case']:<28} eager {row.get('eagerMs', float('nan')) * 1e3:9.1f} us  compiled {row.get('compiledMs', float('nan')) * 1e3:9.1f} us  ({row['status']})")
out["seconds"] = time.time() - T0
out["compileSeconds"] = compile_spent
if a.json:
    json.dump(out, open(a.json, "w"), indent=2)
print(f"kernels_torch: {len(out['results'])} cases in {out['seconds']:.1f} s (compile {compile_spent:.1f} s)")
