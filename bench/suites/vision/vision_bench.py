#!/usr/bin/env python3
"""Vision speed (issues 33, 34), the work folder and the PyTorch side. bench/suites/vision/run.sh drives it:

  vision_bench.py configs --dir WORK [--models a,b] [--flux-layers 19,38] [--quick] [--tiny]
      WORK/<model>/config.json (bench/reference/vision_configs.py: the configs vision-parity uses; ConvNeXt-V2-base at
      384 here) and WORK/plan.json: the rows both sides time (model, batch, dtype, input shapes) and how long a
      measurement may take. No torch needed.
  vision_bench.py preflight [--device cuda|cpu]
  vision_bench.py rate --dir WORK [--device cuda]       torch.matmul's bf16 8192^3 rate -> WORK/rate-torch.json
  vision_bench.py torch --dir WORK --model M [--device cuda] [--no-compile]   -> WORK/M/torch.json
      The plain-PyTorch references of bench/reference/ at the plan's rows: eager, torch.compile (default mode) and,
      where a target names it, torch.compile with CUDA graphs (mode="reduce-overhead"); CUDA events around one call
      after an L2 flush, medians (bench/lib/torch_timing.py, as our side times). YOLOv10 / ConvNeXt-V2 load our
      init-weights checkpoint (YOLOv10's Conv + BN folded and RepVGGDW merged, as ultralytics' fuse() does for
      inference; channels-last, as a tuned PyTorch deployment runs); FLUX's transformer and VAE decoder get torch's
      own random init on the device (speed does not depend on the values). FLUX's compile is per block (the blocks
      repeat: one compile each kind, as diffusers' compile_repeated_blocks), and beside it every distinct Linear shape
      of one step timed alone with F.linear and the attention with the fastest SDPA backend (bench/lib/torch_sdpa.py),
      times their counts: the GEMM + attention floor of a step. Each row's FLOPs are counted in the eager pass (below).
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
import traceback
from collections import Counter

here = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.normpath(os.path.join(here, '..', '..', 'reference'))
LIB_DIR = os.path.normpath(os.path.join(here, '..', '..', 'lib'))
sys.path.insert(0, REF_DIR)
sys.path.insert(0, LIB_DIR)
import torch_env  # noqa: E402

MODELS = ('yolov10n', 'yolov10s', 'convnextv2_base', 'flux_transformer', 'flux_vae')
# the dtypes timed: YOLOv10 fp16 (production), FLUX bf16; ConvNeXt-V2 fp16 as issue 34's speed run asks (the vision
# runner takes it), --convnext-dtype bf16 for docs/detection.md's production cases
DTYPE = {'yolov10n': 'f16', 'yolov10s': 'f16', 'convnextv2_base': 'f16', 'flux_transformer': 'bf16', 'flux_vae': 'bf16'}
CONVNEXT_SIZE = 384
FLUX_FULL = (19, 38)
# each shape of FLUX's GEMM + attention floor is a short kernel timed alone: a smaller budget than a model call's
FLOOR_BUDGET_S = 0.25


# ------------------------------------------------------------------------------------------------- work folder

def plan_rows(models, tiny, quick, convnext_dtype='f16'):
    """The rows: (model, batch); `compile` lists the torch.compile modes timed: reduce-overhead (CUDA graphs) where a
    target names it (YOLOv10n bs 1), the default mode elsewhere; the informative YOLOv10s none under --quick. Each
    mode costs an inductor compile per batch size (15-60 s on the GPU host)."""
    big = 2 if tiny else 32  # the tiny smoke keeps the CPU run short
    rows = []
    for m in models:
        if m.startswith('yolov10'):
            s_modes = [] if quick else ['default']
            rows.append({'model': m, 'batch': 1, 'compile': ['default', 'reduce-overhead'] if m == 'yolov10n' else s_modes})
            rows.append({'model': m, 'batch': big, 'compile': ['default'] if m == 'yolov10n' else s_modes})
        elif m == 'convnextv2_base':
            rows.append({'model': m, 'batch': big, 'compile': ['default']})
        else:
            rows.append({'model': m, 'batch': 1, 'compile': ['default']})
    for r in rows:
        r['id'] = f"{r['model']}-bs{r['batch']}"
        dtype = convnext_dtype if r['model'] == 'convnextv2_base' else DTYPE[r['model']]
        r['dtype'] = 'f32' if tiny else dtype  # the CPU smoke: torch's CPU convolutions need not take f16
    return rows


def cmd_configs(a):
    from vision_configs import model_configs
    models = [m for m in a.models.split(',') if m]
    bad = [m for m in models if m not in MODELS]
    if bad:
        sys.exit(f'vision: unknown model(s) {bad} (known: {", ".join(MODELS)})')
    D, S = (int(x) for x in a.flux_layers.split(','))
    cfgs = model_configs(a.tiny, 1024, a.flux_layers, 1)
    if not a.tiny:
        cfgs['convnextv2_base'][0]['image_size'] = CONVNEXT_SIZE
    inputs = {}
    for name in models:
        cfg, spec = cfgs[name]
        d = os.path.join(a.dir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'config.json'), 'w') as f:
            json.dump(cfg, f, indent=2)
        if name.startswith('yolov10'):
            inputs[name] = {'imageSize': cfg['imgsz']}
        elif name == 'convnextv2_base':
            inputs[name] = {'imageSize': cfg['image_size']}
        elif name == 'flux_transformer':
            lat = spec['size'] // spec['vae_scale']
            inputs[name] = {'imageSize': spec['size'], 'imageTokens': (lat // 2) ** 2, 'textTokens': spec['t5_len'], 'inChannels': cfg['in_channels'],
                            'jointDim': cfg['joint_attention_dim'], 'pooledDim': cfg['pooled_projection_dim'], 'layers': [D, S]}
        else:
            lat = spec['size'] // spec['vae_scale']
            inputs[name] = {'imageSize': spec['size'], 'latent': [cfg['latent_channels'], lat, lat]}
    plan = {
        'tiny': a.tiny, 'quick': a.quick, 'models': models, 'inputs': inputs, 'rows': plan_rows(models, a.tiny, a.quick, a.convnext_dtype),
        'fluxLayers': [D, S], 'fluxFullDepth': [D, S] == list(FLUX_FULL) and not a.tiny,
        # a measurement's time budget: iterations = budget / one call's time, clamped (both sides use the same rule)
        'timeBudgetS': 0.4 if a.quick or a.tiny else 1.5, 'minIters': 3, 'maxIters': 20 if a.quick else 100,
        # how both sides pick cuDNN's conv algorithms: 'benchmark' (each shape's candidates timed on its first call:
        # torch.backends.cudnn.benchmark = True, our conv.algoSearch = 'benchmark'; fixed-shape inference's setting) or
        # 'heuristic' (cuDNN's heuristics' first choice on both sides)
        'convAlgoSearch': a.conv_algo_search,
    }
    with open(os.path.join(a.dir, 'plan.json'), 'w') as f:
        json.dump(plan, f, indent=1)
    print(f"vision: configs and plan ({len(plan['rows'])} rows: {', '.join(r['id'] for r in plan['rows'])}) in {a.dir}{' (tiny)' if a.tiny else ''}")


# ------------------------------------------------------------------------------------------------- timing

def versions():
    return torch_env.versions()


def cmd_preflight(a):
    torch_env.preflight('vision', a.device)


def make_timer(device, plan):
    """time_ms(fn) -> (median ms, iterations): bench/lib/torch_timing.py's L2-flushed event timer on CUDA, the host
    clock on the CPU; the iterations fill the plan's time budget (one call timed first)."""
    import torch
    if device == 'cuda':
        from torch_timing import l2_flush_timer
        timer = l2_flush_timer(torch.device('cuda'), 1, 1)
        base = lambda fn, warmup, iters: timer(fn, warmup=warmup, iters=iters)
    else:
        def base(fn, warmup, iters):
            for _ in range(warmup):
                fn()
            ts = []
            for _ in range(iters):
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(ts)

    def time_ms(fn, budget_s=None):
        one = base(fn, 1, 1)
        budget = plan['timeBudgetS'] if budget_s is None else budget_s
        n = int(min(plan['maxIters'], max(plan['minIters'], budget * 1e3 / max(one, 1e-3))))
        return base(fn, min(3, n), n), n
    return time_ms


def sync(device):
    import torch
    if device == 'cuda':
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------------- FLOP counter

class FlopCounter:
    """Multiply-add FLOPs (2 per MAC) of one forward, by kind: convolutions and Linears from forward hooks (their
    weights' shapes and the output / input sizes), attention from the reference's attention call (flux_ref.attention:
    QK^T and PV) and YOLOv10's PSA Attention module (its q^T k and v a^T products). Also the Linear shapes and the
    attention shapes with their counts (FLUX's GEMM + attention floor times each)."""

    def __init__(self, model):
        import torch.nn as nn
        self.flops = Counter()
        self.linears = Counter()
        self.attentions = Counter()
        self.hooks = []
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                self.hooks.append(m.register_forward_hook(self.conv))
            elif isinstance(m, nn.Linear):
                self.hooks.append(m.register_forward_hook(self.linear))
            elif type(m).__name__ == 'Attention' and hasattr(m, 'kd'):  # yolov10_ref.Attention (PSA)
                self.hooks.append(m.register_forward_hook(self.psa))

    def conv(self, m, inp, out):
        kh, kw = m.kernel_size
        self.flops['conv'] += 2 * out.numel() * (m.in_channels // m.groups) * kh * kw

    def linear(self, m, inp, out):
        K, N = m.in_features, m.out_features
        M = inp[0].numel() // K
        self.flops['linear'] += 2 * M * K * N
        self.linears[(M, K, N, m.bias is not None)] += 1

    def psa(self, m, inp, out):
        B, _, H, W = inp[0].shape
        n = H * W
        self.flops['attention'] += 2 * B * m.h * n * n * (m.kd + m.hd)

    def attention(self, q, k, v):
        lead = math.prod(q.shape[:-2])
        self.flops['attention'] += 2 * lead * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])
        self.attentions[(tuple(q.shape), tuple(k.shape), tuple(v.shape))] += 1

    def count(self, run):
        """Run `run()` (one eager forward) with the counters on; returns {total, conv, linear, attention}."""
        import flux_ref
        orig = flux_ref.attention

        def counted(q, k, v):
            self.attention(q, k, v)
            return orig(q, k, v)
        flux_ref.attention = counted
        try:
            run()
        finally:
            flux_ref.attention = orig
            for h in self.hooks:
                h.remove()
        return {'total': sum(self.flops.values()), **{k: self.flops.get(k, 0) for k in ('conv', 'linear', 'attention')}}


# ------------------------------------------------------------------------------------------------- models

def fuse_yolo(model):
    """ultralytics' inference fuse() on the reference tree: each Conv's BatchNorm folded into its conv, each RepVGGDW's
    3x3 branch merged into its 7x7 (both depthwise, BN folded, summed: one conv)."""
    import torch
    import torch.nn as nn
    import yolov10_ref
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    for m in list(model.modules()):
        if isinstance(m, yolov10_ref.Conv) and isinstance(m.bn, nn.BatchNorm2d):
            conv = fuse_conv_bn_eval(m.conv, m.bn)
            m.conv, m.bn = conv, nn.Identity()
    class MergedRepVGGDW(nn.Module):
        def __init__(self, conv):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            return nn.functional.silu(self.conv(x))

    for parent in list(model.modules()):
        for key, m in list(parent.named_children()):
            if isinstance(m, yolov10_ref.RepVGGDW):
                big, small = m.conv.conv, m.conv1.conv
                with torch.no_grad():
                    big.weight += nn.functional.pad(small.weight, [2, 2, 2, 2])
                    big.bias += small.bias
                setattr(parent, key, MergedRepVGGDW(m.conv))
    return model


def build(name, wdir, plan, device, dt):
    """(model, make_inputs(batch) -> args tuple) of one model on the device in dtype dt."""
    import torch
    d = os.path.join(wdir, name)
    spec = plan['inputs'][name]
    g = torch.Generator(device='cpu').manual_seed(7)
    if name.startswith('yolov10') or name == 'convnextv2_base':
        import convnextv2_ref
        import yolov10_ref
        ref = yolov10_ref if name.startswith('yolov10') else convnextv2_ref
        m = ref.load_model(os.path.join(d, 'ckpt'), torch.float32)
        if name.startswith('yolov10'):
            m = fuse_yolo(m)
        m = m.to(device=device, dtype=dt, memory_format=torch.channels_last)
        S = spec['imageSize']
        lo, hi = (0, 1) if name.startswith('yolov10') else (-2, 2)

        def inputs(b):
            x = torch.rand((b, 3, S, S), generator=g).mul(hi - lo).add(lo)
            return (x.to(device=device, dtype=dt).contiguous(memory_format=torch.channels_last),)
        return m, inputs
    import flux_ref
    with open(os.path.join(d, 'config.json')) as f:
        cfg = json.load(f)
    prev = torch.get_default_dtype()
    # built in the model dtype on the device: FLUX.1-dev's 12B parameters never exist in f32 or on the host (the CPU
    # smoke builds on the CPU as it is, without torch.device's context: Debian's torch 1.13 has none)
    torch.set_default_dtype(dt)
    try:
        with torch.device(device) if device != 'cpu' else contextlib.nullcontext():
            m = flux_ref.FluxTransformer(cfg) if name == 'flux_transformer' else flux_ref.AutoencoderKLDecoder(cfg)
    finally:
        torch.set_default_dtype(prev)
    m = m.eval()
    if name == 'flux_transformer':
        def inputs(b):
            n, t = spec['imageTokens'], spec['textTokens']
            h = w = int(math.isqrt(n))
            ids = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij'), -1).reshape(-1, 2).float()
            return (torch.randn((b, n, spec['inChannels']), generator=g).to(device, dt), (torch.randn((b, t, spec['jointDim']), generator=g) * 0.2).to(device, dt),
                    (torch.randn((b, spec['pooledDim']), generator=g) * 0.5).to(device, dt), torch.full((b,), 0.75, device=device),
                    torch.cat([torch.zeros(n, 1), ids], 1).to(device), torch.zeros(t, 3, device=device), torch.full((b,), 3.5, device=device))
        return m, inputs

    def vae_inputs(b):
        return (torch.randn((b, *spec['latent']), generator=g).to(device, dt),)
    return m, vae_inputs


def gemm_attention_floor(counter, device, dt, time_ms):
    """Every distinct Linear shape of the counted forward timed alone (F.linear, bias where the layer has one) and
    every attention shape with the fastest SDPA backend, times their counts: {linears, attentions, gemmMs, attentionMs,
    sumMs}."""
    import flux_ref
    import torch
    import torch.nn.functional as F
    out = {'linears': [], 'attentions': []}
    gemm = 0.0
    for (M, K, N, bias), count in sorted(counter.linears.items()):
        x, w = torch.randn(M, K, device=device, dtype=dt), torch.randn(N, K, device=device, dtype=dt)
        bv = torch.randn(N, device=device, dtype=dt) if bias else None
        ms, _ = time_ms(lambda: F.linear(x, w, bv), FLOOR_BUDGET_S)
        gemm += ms * count
        out['linears'].append({'m': M, 'k': K, 'n': N, 'bias': bias, 'count': count, 'ms': ms, 'tflops': 2 * M * K * N / (ms / 1e3) / 1e12})
        del x, w, bv
    att = 0.0
    for (qs, ks, vs), count in sorted(counter.attentions.items()):
        q, k, v = (torch.randn(s, device=device, dtype=dt) for s in (qs, ks, vs))
        if device == 'cuda':
            from torch_sdpa import time_sdpa
            r = time_sdpa(lambda fn: time_ms(fn, FLOOR_BUDGET_S)[0], lambda: F.scaled_dot_product_attention(q, k, v))
        else:
            ms, _ = time_ms(lambda: flux_ref.attention(q, k, v), FLOOR_BUDGET_S)  # SDPA where this torch has it
            r = {'bestMs': ms, 'bestBackend': 'default', 'defaultMs': ms}
        att += r['bestMs'] * count
        out['attentions'].append({'q': list(qs), 'k': list(ks), 'v': list(vs), 'count': count, **r})
        del q, k, v
    out.update(gemmMs=gemm, attentionMs=att, sumMs=gemm + att)
    return out


def compile_model(name, model, mode):
    """torch.compile of the model in `mode` (None: default); FLUX's transformer per block, in place (returns the model)."""
    import torch
    kw = {} if mode == 'default' else {'mode': mode}
    if name == 'flux_transformer':
        # 19 + 38 instances of two block classes: one compiled code per class where torch inlines nn.Modules (2.5+),
        # else one per instance; either way none may fall back to eager for hitting the recompile limit
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 128)
        if hasattr(torch._dynamo.config, 'accumulated_cache_size_limit'):
            torch._dynamo.config.accumulated_cache_size_limit = max(torch._dynamo.config.accumulated_cache_size_limit, 512)
        for b in list(model.transformer_blocks) + list(model.single_transformer_blocks):
            b.compile(**kw)
        return model
    return torch.compile(model, dynamic=False, **kw)  # one static graph per batch size, as ours captures


def cmd_torch(a):
    import torch
    with open(os.path.join(a.dir, 'plan.json')) as f:
        plan = json.load(f)
    name = a.model
    rows = [r for r in plan['rows'] if r['model'] == name]
    out_path = os.path.join(a.dir, name, 'torch.json')
    search = plan.get('convAlgoSearch', 'benchmark')
    res = {'side': 'torch', 'model': name, 'device': a.device, 'versions': versions(), 'rows': {}, 'errors': [],
           'settings': {'cudnnBenchmark': search == 'benchmark', 'compile': 'torch.compile default mode' + (' per block (regional)' if name == 'flux_transformer' else ''),
                        'cudagraphs': 'torch.compile mode="reduce-overhead"', 'yolo': 'Conv+BN folded, RepVGGDW merged (ultralytics fuse)'}}

    def save():
        with open(out_path, 'w') as f:
            json.dump(res, f, indent=1)
    save()
    torch.backends.cudnn.benchmark = search == 'benchmark'  # the plan's policy, the one our side runs too (vision.mjs)
    dt = {'f16': torch.float16, 'bf16': torch.bfloat16, 'f32': torch.float32}[rows[0]['dtype']]
    time_ms = make_timer(a.device, plan)
    t0 = time.time()
    model, inputs = build(name, a.dir, plan, a.device, dt)
    res['buildS'] = round(time.time() - t0, 1)
    print(f'vision torch {name}: built ({res["buildS"]} s)', flush=True)
    xs = {r['batch']: inputs(r['batch']) for r in rows}
    with torch.no_grad():
        for r in rows:
            row = res['rows'].setdefault(r['id'], {})
            try:
                counter = FlopCounter(model)
                row['flops'] = counter.count(lambda: model(*xs[r['batch']]))
                sync(a.device)
                row['eagerMs'], row['eagerIters'] = time_ms(lambda: model(*xs[r['batch']]))
                print(f"vision torch {r['id']}: eager {row['eagerMs']:.3f} ms, {row['flops']['total'] / 1e9:.1f} GFLOP", flush=True)
                if name == 'flux_transformer':
                    row['floor'] = gemm_attention_floor(counter, a.device, dt, time_ms)
                    print(f"vision torch {r['id']}: GEMM {row['floor']['gemmMs']:.2f} ms + attention {row['floor']['attentionMs']:.2f} ms = {row['floor']['sumMs']:.2f} ms alone", flush=True)
            except Exception as e:  # noqa: BLE001 - recorded; the compiled runs may still go
                res['errors'].append({'row': r['id'], 'run': 'eager', 'error': f'{type(e).__name__}: {e}', 'traceback': traceback.format_exc()[-2000:]})
            save()
        if a.no_compile or a.device != 'cuda':
            res['compileSkipped'] = '--no-compile' if a.no_compile else 'CPU smoke run (inductor on the CPU is not what is measured)'
            save()
            return
        modes = [m for m in ('default', 'reduce-overhead') if any(m in r['compile'] for r in rows)]
        for i, mode in enumerate(modes):
            key = 'compileMs' if mode == 'default' else 'compileCudagraphsMs'
            try:
                if i:
                    torch._dynamo.reset()  # a fresh compile in the next mode, not the first mode's cached code
                cm = compile_model(name, model, mode)
            except Exception as e:  # noqa: BLE001
                res['errors'].append({'run': f'compile {mode}', 'error': f'{type(e).__name__}: {e}'})
                continue
            for r in (r for r in rows if mode in r['compile']):
                row = res['rows'][r['id']]
                x = xs[r['batch']]
                if mode == 'reduce-overhead':
                    def fn(x=x):
                        torch.compiler.cudagraph_mark_step_begin()
                        return cm(*x)
                else:
                    def fn(x=x):
                        return cm(*x)
                try:
                    c0 = time.time()
                    fn()
                    fn()  # reduce-overhead records its graph on the second call
                    sync(a.device)
                    row[key.replace('Ms', 'S')] = round(time.time() - c0, 1)
                    row[key], row[key.replace('Ms', 'Iters')] = time_ms(fn)
                    print(f"vision torch {r['id']}: compile {mode} {row[key]:.3f} ms (compiled in {row[key.replace('Ms', 'S')]} s)", flush=True)
                except Exception as e:  # noqa: BLE001
                    res['errors'].append({'row': r['id'], 'run': f'compile {mode}', 'error': f'{type(e).__name__}: {e}', 'traceback': traceback.format_exc()[-2000:]})
                save()
            if name == 'flux_transformer':
                break  # compiled in place: one mode
    save()


def cmd_rate(a):
    """torch.matmul's dense bf16 rate (8192^3; 512^3 on the CPU) -> WORK/rate-torch.json."""
    import torch
    n = 8192 if a.device == 'cuda' else 512
    plan = {'timeBudgetS': 1.0, 'minIters': 5, 'maxIters': 50}
    x, y = (torch.randn(n, n, device=a.device, dtype=torch.bfloat16) for _ in range(2))
    ms, _ = make_timer(a.device, plan)(lambda: torch.matmul(x, y))
    r = {'n': n, 'ms': ms, 'tflops': 2 * n ** 3 / (ms / 1e3) / 1e12, 'versions': versions()}
    with open(os.path.join(a.dir, 'rate-torch.json'), 'w') as f:
        json.dump(r, f, indent=1)
    print(f"vision: torch.matmul bf16 {n}^3: {r['tflops']:.0f} TFLOP/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    c = sub.add_parser('configs')
    c.add_argument('--dir', required=True)
    c.add_argument('--models', default=','.join(MODELS))
    c.add_argument('--flux-layers', default=','.join(map(str, FLUX_FULL)))
    c.add_argument('--quick', action='store_true')
    c.add_argument('--tiny', action='store_true')
    c.add_argument('--convnext-dtype', default='f16', choices=['f16', 'bf16', 'f32'])
    c.add_argument('--conv-algo-search', default='benchmark', choices=['benchmark', 'heuristic'])
    p = sub.add_parser('preflight')
    p.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])
    r = sub.add_parser('rate')
    r.add_argument('--dir', required=True)
    r.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])
    t = sub.add_parser('torch')
    t.add_argument('--dir', required=True)
    t.add_argument('--model', required=True, choices=MODELS)
    t.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])
    t.add_argument('--no-compile', action='store_true')
    a = ap.parse_args()
    {'configs': cmd_configs, 'preflight': cmd_preflight, 'rate': cmd_rate, 'torch': cmd_torch}[a.cmd](a)


if __name__ == '__main__':
    main()
