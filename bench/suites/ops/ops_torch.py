#!/usr/bin/env python3
"""PyTorch yardstick for bench/suites/ops/ops.mjs: the same ops at the same shapes and dtypes, eager and
torch.compile (dynamic=False, compiled once per case), plus a same-size device copy, timed like ours: CUDA events
around one call after an L2 flush (zeroing a 2x L2 buffer), warm-up, median of >= 50 calls.

Reads the case list from the FastKernels JSON (--cases ops_ours.json) so both sides time identical shapes.
Usage: python3 ops_torch.py --cases ops_ours.json --json ops_torch.json [--quick] [--no-compile]
"""
import argparse
import json
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
p.add_argument("--compile-budget-s", type=float, default=240.0, help="stop compiling new cases after this many seconds")
p.add_argument("--quick", action="store_true")
a = p.parse_args()
dev = torch.device("cuda")
DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
ITERS = 20 if a.quick else 50
T0 = time.time()
compile_spent = 0.0

time_ms = l2_flush_timer(dev, warmup=5, iters=ITERS)


def tensor(spec):
    if spec is None:
        return None
    if spec.get("ints") is not None:  # index tensors (cu_seqlens, state-pool slots)
        return torch.tensor(spec["ints"], device=dev, dtype=torch.int32 if spec["dtype"] == "i32" else torch.int64)
    if spec.get("bytes") is not None:  # uniform u8 in [lo, hi): MXFP4 blocks and scales
        return torch.randint(*spec["bytes"], tuple(spec["shape"]), device=dev, dtype=torch.uint8)
    t = torch.randn(*spec["shape"], device=dev, dtype=torch.float32)
    if spec.get("gate"):  # GLA's forget gate: logsigmoid(x) / 16
        t = F.logsigmoid(t) / 16
    if spec.get("prob"):  # a delta rule's beta: sigmoid(x)
        t = torch.sigmoid(t)
    if spec.get("scale"):
        t = t * spec["scale"]
    t = t.to(DT[spec["dtype"]])
    if spec.get("view"):  # made at its stored shape, then viewed (ops.mjs does the same): k^T, MLA's heads-first view,
        v = spec["view"]  # NHWC storage seen as NCHW (channels-last)
        t = t.permute(*v["permute"]) if "permute" in v else t.transpose(*v["transpose"])
    return t


def chain_fn(steps):
    """elementwise_chain attrs -> a Python function over the inputs (the ops the bench uses)."""
    def run(*xs):
        vals = []
        for s in steps:
            args = [xs[x["input"]] if "input" in x else vals[x["step"]] if "step" in x else x["value"] for x in s["args"]]
            op = s["op"]
            if op == "silu":
                vals.append(F.silu(args[0]))
            elif op == "gelu":
                vals.append(F.gelu(args[0], approximate=s.get("attrs", {}).get("approximate", "none")))
            elif op == "mul":
                vals.append(args[0] * args[1])
            elif op == "add":
                vals.append(args[0] + args[1])
            else:
                raise ValueError(f"chain op {op} has no torch twin here")
        return vals[-1]
    return run


def gla_recurrent(q, k, v, g, pool, idx, scale):
    """FLA's fused_recurrent_gla over vLLM's state pool in plain PyTorch: per token S = S * exp(g)[..., None] + k^T v,
    o = (q * scale) S; the pool rows of idx read and written back (every row valid here)."""
    rows = idx.long()
    s = pool[rows].float()
    out = []
    for t in range(q.shape[1]):
        s = s * g[:, t].float().exp()[..., None] + k[:, t].float()[..., None] * v[:, t].float()[..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t].float() * scale, s))
    pool[rows] = s
    return torch.stack(out, 1).to(q.dtype)


def gla_chunk(q, k, v, g, scale, chunk=64):
    """FLA's chunked GLA in plain PyTorch (its naive chunk form, chunk 64): b = the running sum of g inside a chunk,
    A = (q e^b)(k e^-b)^T masked causal, o = (q e^b) S + A v, S = e^b_last S + (k e^(b_last - b))^T v; returns o and
    the final state. T a multiple of the chunk."""
    B, T, H, K = q.shape
    V, dtype = v.shape[-1], q.dtype
    n = T // chunk
    q, k, v, g = (x.float().transpose(1, 2).reshape(B, H, n, chunk, -1) for x in (q, k, v, g))
    b = g.cumsum(-2)
    mask = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    s = q.new_zeros(B, H, K, V)
    out = []
    for i in range(n):
        qi, ki, vi, bi = q[:, :, i], k[:, :, i], v[:, :, i], b[:, :, i]
        qe = qi * bi.exp() * scale
        a = (qe @ (ki * (-bi).exp()).transpose(-1, -2)).masked_fill(~mask, 0)
        out.append(qe @ s + a @ vi)
        last = bi[:, :, -1:, :]
        s = s * last.transpose(-1, -2).exp() + (ki * (last - bi).exp()).transpose(-1, -2) @ vi
    o = torch.stack(out, 2).reshape(B, H, T, V).transpose(1, 2)
    return o.to(dtype), s


def delta_chunk(q, k, v, g, beta, scale, chunk=64):
    """The chunked gated delta rule in plain PyTorch (the UT transform of FLA's chunk form and HF Qwen3-Next's
    torch_chunk_gated_delta_rule, chunk 64), q / k l2-normalised in the op as Qwen3-Next and Kimi-Linear call it. g is
    [B, T, HV] (Gated DeltaNet: one log decay a head) or [B, T, HV, K] (KDA: one a key channel); HV = r H value heads
    read q / k head hv // r. Per chunk, G the running sum of g: A = -strictly-lower(beta_i k_i D_ij k_j), solved by
    forward substitution into (I + A')^-1, w = that (beta k e^G), u = that (beta v); then v' = u - w S,
    o = (q e^G) S + (q D k^T masked) v', S = e^G_last S + (k e^(G_last - G))^T v'. T a multiple of the chunk."""
    B, T, H, K = q.shape
    HV, V, dtype = v.shape[2], v.shape[-1], q.dtype
    r = HV // H
    q, k = (F.normalize(x.float(), dim=-1, eps=1e-6).repeat_interleave(r, dim=2) for x in (q, k))
    n = T // chunk
    chan = g.dim() == 4
    q, k, v = (x.float().transpose(1, 2).reshape(B, HV, n, chunk, -1) for x in (q, k, v))
    g = g.float().transpose(1, 2).reshape(B, HV, n, chunk, -1 if chan else 1)
    beta = beta.float().transpose(1, 2).reshape(B, HV, n, chunk, 1)
    G = g.cumsum(-2)  # [.., C, 1] or [.., C, K]
    strict = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril(-1)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    eye = torch.eye(chunk, device=q.device)

    def scores(a, b):  # sum_d a_id b_jd exp(G_id - G_jd) over the chunk's pairs (i >= j kept by the callers' masks)
        if chan:  # per channel: factor through the chunk's start (the gates here are mild)
            return (a * G.exp()) @ (b * (-G).exp()).transpose(-1, -2)
        return (a @ b.transpose(-1, -2)) * (G - G.transpose(-1, -2)).exp()

    kb = k * beta
    a = -scores(kb, k).masked_fill(~strict, 0)
    for i in range(1, chunk):
        a[..., i, :i] = a[..., i, :i] + (a[..., i, :, None] * a[..., :, :i]).sum(-2)
    t = a + eye
    w = t @ (kb * G.exp())
    u = t @ (v * beta)
    s = q.new_zeros(B, HV, K, V)
    out = []
    for i in range(n):
        qi, ki, Gi = q[:, :, i], k[:, :, i], G[:, :, i]
        vn = u[:, :, i] - w[:, :, i] @ s
        qg = qi * Gi.exp() * scale
        if chan:
            att = (qg @ (ki * (-Gi).exp()).transpose(-1, -2)).masked_fill(~causal, 0)
        else:
            att = ((qi @ ki.transpose(-1, -2)) * (Gi - Gi.transpose(-1, -2)).exp() * scale).masked_fill(~causal, 0)
        out.append(qg @ s + att @ vn)
        last = Gi[:, :, -1:, :]
        s = s * last.transpose(-1, -2).exp() + (ki * (last - Gi).exp()).transpose(-1, -2) @ vn
    o = torch.stack(out, 2).reshape(B, HV, T, V).transpose(1, 2)
    return o.to(dtype), s


def delta_recurrent(q, k, v, g, beta, pool, cu, idx, scale):
    """FLA's fused_recurrent_gated_delta_rule / fused_recurrent_kda at decode in plain PyTorch: one token a sequence
    (cu_seqlens 0..N), q / k l2-normalised, per token S = D S, u = beta (v - k S), S += k^T u, o = scale q S, over
    vLLM's state pool (the rows of idx read and written back)."""
    rows = idx.long()
    HV = v.shape[2]
    r = HV // q.shape[2]
    q, k = (F.normalize(x[0].float(), dim=-1, eps=1e-6).repeat_interleave(r, dim=1) for x in (q, k))  # [N, HV, K]
    s = pool[rows]
    d = g[0].float().exp()
    s = s * (d[..., None] if d.dim() == 3 else d[..., None, None])
    u = beta[0].float()[..., None] * (v[0].float() - torch.einsum("nhk,nhkv->nhv", k, s))
    s = s + k[..., None] * u[..., None, :]
    pool[rows] = s
    return (scale * torch.einsum("nhk,nhkv->nhv", q, s))[None].to(v.dtype)


def build_moe(c):
    """fused_moe_gemm's twins over the case's routing (slotExperts: the expert of each slot, rows = slot // top_k):
    the per-expert loop a PyTorch MoE writes (HF Mixtral's shape: gather the expert's rows, matmul, scatter; its index
    lists made once, outside the timed call, so no host sync is timed), and torch's grouped GEMM (torch._grouped_mm,
    F.grouped_mm where torch has it) on the slots sorted by expert (the sort made once, as moe_align runs before ours):
    gather, one grouped GEMM, scale, scatter. Returns the loop, with the grouped form as its `.grouped`."""
    at = c["attrs"]
    top_k, mul = at["top_k"], at.get("mul_routed_weight", False)
    a, w, tw = (tensor(s) for s in c["inputs"][:3])
    tw = tw.abs().flatten()
    ex = torch.tensor(c["routing"]["slotExperts"], device=dev, dtype=torch.int64)
    E, N = w.shape[0], w.shape[1]
    slots = ex.numel()
    per_expert = [(e, i, i // top_k) for e, i in ((e, (ex == e).nonzero().squeeze(1)) for e in range(E)) if i.numel()]

    def loop(a, w, tw):
        out = torch.empty(slots, N, dtype=a.dtype, device=dev)
        for e, i, rows in per_expert:
            y = a[rows] @ w[e].t()
            out[i] = (y.float() * tw[i, None]).to(a.dtype) if mul else y
        return out

    order = torch.argsort(ex, stable=True)
    rows_sorted = order // top_k
    offs = torch.cumsum(torch.bincount(ex, minlength=E), 0).to(torch.int32)
    gmm = getattr(F, "grouped_mm", None) or torch._grouped_mm

    def grouped(a, w, tw):
        y = gmm(a[rows_sorted], w.transpose(-2, -1), offs=offs)
        if mul:
            y = (y.float() * tw[order, None]).to(a.dtype)
        out = torch.empty_like(y)
        out[order] = y
        return out

    loop.grouped = grouped
    return loop, [a, w, tw]


FP4_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def build_grouped(c):
    """grouped_gemm / mxfp4_grouped_gemm's twin as a PyTorch MoE runs it: for MXFP4 every expert dequantised to bf16
    first (fp4 e2m1 by a 16-entry table times 2^(scale - 127); element 2j is the low nibble of byte j), then the
    per-expert loop over the hit experts with the bias (index lists made once, outside the timed call)."""
    mx = c["op"] == "mxfp4_grouped_gemm"
    ins = c["inputs"]
    x, bias = tensor(ins[0]), tensor(ins[-1])
    ws = [tensor(s) for s in ins[1:3]] if mx else [tensor(ins[1])]
    lut = torch.tensor(FP4_E2M1, device=dev, dtype=torch.float32)
    ex = torch.tensor(c["routing"]["slotExperts"], device=dev, dtype=torch.int64)
    E, N = ws[0].shape[0], ws[0].shape[1]
    per_expert = [(e, i) for e, i in ((e, (ex == e).nonzero().squeeze(1)) for e in range(E)) if i.numel()]

    def dequant(blocks, scales):
        vals = torch.stack((lut[(blocks & 15).long()], lut[(blocks >> 4).long()]), -1).flatten(-2)  # [E, N, G, 32]
        return (vals * torch.exp2(scales.float() - 127)[..., None]).flatten(-2).to(x.dtype)  # [E, N, K]

    def run(x, *args):
        *wargs, bias = args
        w = dequant(*wargs) if mx else wargs[0]  # [E, N, K] (the dense one a transposed view)
        out = torch.empty(x.shape[0], N, dtype=x.dtype, device=dev)
        for e, i in per_expert:
            out[i] = torch.addmm(bias[e], x[i], w[e].t())
        return out

    return run, [x, *ws, bias]


def build(c):
    op, at = c["op"], c["attrs"]
    if op == "fused_moe_gemm":
        return build_moe(c)
    if op in ("mxfp4_grouped_gemm", "grouped_gemm"):
        return build_grouped(c)
    xs = [tensor(s) for s in c["inputs"]]
    if op == "gelu":
        return (lambda x: F.gelu(x, approximate=at.get("approximate", "none"))), xs
    if op == "silu":
        return F.silu, xs
    if op == "add":
        return torch.add, xs
    if op == "elementwise_chain":
        return chain_fn(at["steps"]), xs
    if op == "layer_norm":
        return (lambda x, w, b: F.layer_norm(x, at["normalized_shape"], w, b, at["eps"])), xs
    if op == "group_norm":
        return (lambda x, w, b: F.group_norm(x, at["num_groups"], w, b, at["eps"])), xs
    if op == "softmax":
        dt = DT[at["dtype"]] if at.get("dtype") else None
        return (lambda x: torch.softmax(x, at["dim"], dtype=dt)), xs
    if op == "log_softmax":
        return (lambda x: torch.log_softmax(x, at["dim"])), xs
    if op == "sum":
        return (lambda x: x.sum(at["dim"])), xs
    if op == "mean":
        return (lambda x: x.mean(at["dim"])), xs
    if op == "argmax":
        return (lambda x: torch.argmax(x, dim=at["dim"])), xs
    if op == "topk":
        return (lambda x: torch.topk(x, at["k"], dim=at.get("dim", -1), largest=at.get("largest", True))), xs
    if op == "cumsum":
        return (lambda x: torch.cumsum(x, at["dim"])), xs
    if op == "sort":
        return (lambda x: torch.sort(x, dim=at.get("dim", -1), descending=at.get("descending", False))), xs
    if op == "interpolate":
        return (lambda x: F.interpolate(x, size=at.get("size"), scale_factor=at.get("scale_factor"), mode=at["mode"], align_corners=at.get("align_corners"))), xs
    if op == "contiguous":  # the input is a permuted view (spec "view"): the layout change is the op
        return (lambda x: x.contiguous()), xs
    if op == "pad":
        return (lambda x: F.pad(x, at["pad"], mode=at["mode"])), xs
    if op == "bmm":
        return torch.bmm, xs
    if op == "baddbmm":
        return (lambda i, b1, b2: torch.baddbmm(i, b1, b2, beta=at.get("beta", 1), alpha=at.get("alpha", 1))), xs
    if op == "conv2d":
        return (lambda x, w, b: F.conv2d(x, w, b, stride=at.get("stride", 1), padding=at.get("padding", 0), dilation=at.get("dilation", 1), groups=at.get("groups", 1))), xs
    if op == "conv2d_act":
        act = {"silu": F.silu, "relu": F.relu}[at["activation"]]
        return (lambda x, w, b: act(F.conv2d(x, w, b, stride=at.get("stride", 1), padding=at.get("padding", 0), dilation=at.get("dilation", 1), groups=at.get("groups", 1)))), xs
    if op == "fused_recurrent_gla":
        scale = at.get("scale") or xs[0].shape[-1] ** -0.5
        return (lambda q, k, v, g, pool, cu, idx: gla_recurrent(q, k, v, g, pool, idx, scale)), xs
    if op == "chunk_gla":
        scale = at.get("scale") or xs[0].shape[-1] ** -0.5
        return (lambda q, k, v, g, s0, cu, idx: gla_chunk(q, k, v, g, scale)), xs
    if op in ("chunk_gated_delta_rule", "chunk_kda"):
        scale = at.get("scale") or xs[0].shape[-1] ** -0.5
        return (lambda q, k, v, g, beta, s0, cu, idx: delta_chunk(q, k, v, g, beta, scale)), xs
    if op in ("fused_recurrent_gated_delta_rule", "fused_recurrent_kda"):
        scale = at.get("scale") or xs[0].shape[-1] ** -0.5
        return (lambda q, k, v, g, beta, pool, cu, idx: delta_recurrent(q, k, v, g, beta, pool, cu, idx, scale)), xs
    if op == "scaled_dot_product_attention":
        return (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=at.get("is_causal", False), enable_gqa=at.get("enable_gqa", False))), xs
    return None, None


cases = json.load(open(a.cases))["results"]
out = {"tool": "torch", "versions": {"torch": torch.__version__, "cuda": torch.version.cuda}, "device": torch.cuda.get_device_name(0), "results": []}
for c in cases:
    row = {"name": c["name"]}
    try:
        fn, xs = build(c)
        if fn is None:
            row["status"] = "no torch version"
            out["results"].append(row)
            continue
        if c["group"] == "attention":
            # eagerMs = PyTorch's default dispatch; sdpaBestMs = the fastest of it and each backend forced (the yardstick)
            sd = time_sdpa(time_ms, lambda: fn(*xs))
            row.update(eagerMs=sd["defaultMs"], sdpaBackendsMs=sd["backendsMs"], sdpaBackendErrors=sd["backendErrors"], sdpaBestMs=sd["bestMs"], sdpaBest=sd["bestBackend"])
        else:
            row["eagerMs"] = time_ms(lambda: fn(*xs))
        if c["group"] == "moe":  # eagerMs is the per-expert loop; groupedMs torch's grouped GEMM
            try:
                fn.grouped(*xs)
                torch.cuda.synchronize()
                row["groupedMs"] = time_ms(lambda: fn.grouped(*xs))
            except Exception as e:  # noqa: BLE001
                row["groupedError"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
        if c["group"] == "conv":  # also with cudnn.benchmark on (measured algorithms), as ours runs with algoSearch 'benchmark'
            torch.backends.cudnn.benchmark = True
            try:
                fn(*xs)
                torch.cuda.synchronize()
                row["eagerBenchmarkMs"] = time_ms(lambda: fn(*xs))
            finally:
                torch.backends.cudnn.benchmark = False
        # the same bytes as one device copy (half read, half written), timed alike: torch's floor at this size
        half = max(256, (c["bytes"] // 2) // 256 * 256)
        src = torch.empty(half, dtype=torch.uint8, device=dev).fill_(1)
        dst = torch.empty_like(src)
        row["copyMs"] = time_ms(lambda: dst.copy_(src))
        del src, dst
        if c["group"] == "attention":
            row["compiled"] = "skipped (torch.compile runs the same SDPA kernels)"
        elif c["group"].startswith("moe"):
            row["compiled"] = "skipped (the loop and the grouped GEMM are library GEMMs either way)"
        elif not a.no_compile and compile_spent < a.compile_budget_s:
            t1 = time.time()
            cfn = torch.compile(fn, dynamic=False)
            cfn(*xs)
            torch.cuda.synchronize()
            compile_spent += time.time() - t1
            row["compileS"] = time.time() - t1
            row["compiledMs"] = time_ms(lambda: cfn(*xs))
        else:
            row["compiled"] = "skipped (--no-compile)" if a.no_compile else "skipped (compile time budget)"
        row["status"] = "ok"
        del xs
    except Exception as e:  # noqa: BLE001
        row["status"] = "error"
        row["detail"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
    torch.cuda.empty_cache()
    out["results"].append(row)
    print(f"torch {c['name']:<44} eager {row.get('eagerMs', float('nan')) * 1e3:9.1f} us  compiled {row.get('compiledMs', float('nan')) * 1e3:9.1f} us  copy {row.get('copyMs', float('nan')) * 1e3:8.1f} us  ({row['status']})")
out["seconds"] = time.time() - T0
out["compileSeconds"] = compile_spent
if a.json:
    json.dump(out, open(a.json, "w"), indent=2)
print(f"ops_torch: {len(out['results'])} cases in {out['seconds']:.1f} s (compile {compile_spent:.1f} s)")
