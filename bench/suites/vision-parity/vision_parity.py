#!/usr/bin/env python3
"""Vision parity (issues 33, 34): our FLUX.1 transformer and VAE decoder, YOLOv10 n / s and ConvNeXt-V2-base against
the plain-PyTorch oracles of bench/reference/ (flux_ref.py, yolov10_ref.py, convnextv2_ref.py: written from diffusers',
ultralytics' and HF's module definitions, loading our checkpoints by their production names) on the same checkpoint
and the same input tensors, no image pre- or postprocessing in between. bench/suites/vision-parity/run.sh drives it:

  vision_parity.py configs --dir WORK [--flux-size 1024] [--flux-layers 2,2] [--batch 2] [--tiny]
      WORK/<model>/config.json and WORK/<model>/inputs.safetensors (seeded): yolov10n / yolov10s (COCO's 80 classes,
      640 x 640 images in [0, 1)), convnextv2_base (ImageNet-1k head, 224 x 224, normalised-image range), flux_transformer
      (FLUX.1-dev's widths with the first N double + M single blocks; the packed latents of a --flux-size image, 512 T5
      tokens, the CLIP pooled vector, t = 0.75, guidance 3.5), flux_vae (FLUX.1-dev's VAE; latents of a --flux-size
      image). --tiny: the CI fixtures' tiny configs instead (a CPU smoke run of the whole suite).
  (run.sh: init-weights for the YOLO / ConvNeXt checkpoints, vision-parity.mjs --init for FLUX's, then ours per dtype)
  vision_parity.py preflight [--device cuda|cpu]
  vision_parity.py compare --dir WORK --json OUT/vision-parity.json --models ... --dtypes f32,bf16 [--device cuda]
      per model: the oracle in float64 (the truth) and in each dtype (PyTorch's own rounding at that precision, its
      default TF32 policy: convs yes, matmuls no), ours per dtype; max |x - ref64| / max |ref64| ("rel") and the cosine, for ours and for torch.
"""
import argparse
import json
import os
import sys
import time
import traceback

here = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.normpath(os.path.join(here, '..', '..', 'reference'))
sys.path.insert(0, REF_DIR)
sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'lib')))
import torch_env  # noqa: E402  (bench/lib: versions and the preflight every PyTorch-side script shares)

MODELS = ('yolov10n', 'yolov10s', 'convnextv2_base', 'flux_transformer', 'flux_vae')
# ours must be within max(FLOOR, SLACK x PyTorch's own error at that dtype) of the float64 oracle, in rel and in 1 - cos
FLOOR = {'f32': 1e-3, 'bf16': 3e-2}
SLACK = 4.0


def cmd_configs(a):
    import torch
    import st_io
    from vision_configs import model_configs
    g = torch.Generator().manual_seed(a.seed)
    U = lambda shape, lo, hi: torch.rand(shape, generator=g, dtype=torch.float64).mul(hi - lo).add(lo).float()
    for name, (cfg, spec) in model_configs(a.tiny, a.flux_size, a.flux_layers, a.batch).items():
        d = os.path.join(a.dir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'config.json'), 'w') as f:
            json.dump(cfg, f, indent=2)
        if name.startswith('yolov10'):
            inputs = {'pixel_values': U(spec, 0, 1)}  # pixels / 255, as the detector's preprocessing gives
        elif name == 'convnextv2_base':
            inputs = {'pixel_values': U(spec, -2, 2)}  # ImageNet-normalised range
        elif name == 'flux_transformer':
            lat = spec['size'] // spec['vae_scale']  # latent side; packed 2 x 2 -> (lat / 2)^2 tokens of 64
            h = w = lat // 2
            B = a.batch
            img_ids = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij'), -1).reshape(-1, 2).float()
            inputs = {
                'hidden_states': torch.randn((B, h * w, cfg['in_channels']), generator=g),
                'encoder_hidden_states': torch.randn((B, spec['t5_len'], cfg['joint_attention_dim']), generator=g) * 0.2,
                'pooled_projections': torch.randn((B, cfg['pooled_projection_dim']), generator=g) * 0.5,
                'timestep': torch.full((B,), 0.75), 'guidance': torch.full((B,), 3.5),
                'img_ids': torch.cat([torch.zeros(h * w, 1), img_ids], 1), 'txt_ids': torch.zeros(spec['t5_len'], 3),
            }
        else:
            lat = spec['size'] // spec['vae_scale']
            inputs = {'latents': torch.randn((a.batch, cfg['latent_channels'], lat, lat), generator=g)}
        st_io.save(os.path.join(d, 'inputs.safetensors'), inputs)
    print(f"vision-parity: configs and inputs for {', '.join(MODELS)} in {a.dir}{' (tiny)' if a.tiny else ''}")


def versions():
    return torch_env.versions()


def cmd_preflight(a):
    no_ref = lambda: None if os.path.exists(os.path.join(REF_DIR, 'flux_ref.py')) else f'no bench/reference at {REF_DIR}'
    torch_env.preflight('vision-parity', a.device, check=no_ref)


def reference(name, ckpt, dtype, inputs, device):
    """The oracle's output in dtype (float64 / float32 / bfloat16) on device, as float64 on the CPU."""
    import torch
    dt = getattr(torch, dtype)
    x = {k: v.to(device) for k, v in inputs.items()}
    with torch.no_grad():
        if name.startswith('yolov10'):
            import yolov10_ref
            y = yolov10_ref.load_model(ckpt, dt).to(device)(x['pixel_values'].to(dt))
        elif name == 'convnextv2_base':
            import convnextv2_ref
            y = convnextv2_ref.load_model(ckpt, dt).to(device)(x['pixel_values'].to(dt))
        elif name == 'flux_transformer':
            import flux_ref
            y = flux_ref.load_model('transformer', ckpt, dt).to(device)(
                x['hidden_states'].to(dt), x['encoder_hidden_states'].to(dt), x['pooled_projections'].to(dt), x['timestep'], x['img_ids'], x['txt_ids'], x['guidance'])
        else:
            import flux_ref
            y = flux_ref.load_model('vae', ckpt, dt).to(device)(x['latents'].to(dt))
    out = y.double().cpu()
    if device == 'cuda':
        torch.cuda.empty_cache()
    return out


def errors(got, ref):
    import torch
    d = (got - ref).abs().max().item()
    scale = ref.abs().max().item()
    cos = torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0).item()
    return {'rel': d / scale if scale else float('inf'), 'max_abs': d, 'ref_max': scale, 'cos': cos}


def compare_model(name, wdir, dtypes, device):
    import torch
    import st_io
    d = os.path.join(wdir, name)
    inputs = st_io.load(os.path.join(d, 'inputs.safetensors'))
    ckpt = os.path.join(d, 'ckpt')
    res = {'model': name, 'inputs': {k: list(v.shape) for k, v in inputs.items()}}
    t0 = time.time()
    ref64 = reference(name, ckpt, 'float64', inputs, device)
    res['oracle_seconds'] = round(time.time() - t0, 1)
    res['shape'] = list(ref64.shape)
    res['dtypes'] = {}
    for dt in dtypes:
        r = {}
        r['torch'] = errors(reference(name, ckpt, {'f32': 'float32', 'bf16': 'bfloat16'}[dt], inputs, device), ref64)
        p = os.path.join(d, f'ours-{dt}.safetensors')
        if not os.path.exists(p):
            err = os.path.join(d, f'ours-{dt}.log')
            r['error'] = 'ours wrote nothing: ' + (open(err).read()[-3000:] if os.path.exists(err) else '(no log)')
        else:
            got = st_io.load(p)['out'].double()
            if list(got.shape) != res['shape']:
                r['error'] = f'ours has shape {list(got.shape)}, the oracle {res["shape"]}'
            else:
                r['ours'] = errors(got, ref64)
                bound = max(FLOOR[dt], SLACK * r['torch']['rel'])
                r['bound'] = bound
                cos_bound = max(FLOOR[dt], SLACK * (1 - r['torch']['cos']))
                r['verdict'] = 'match' if r['ours']['rel'] <= bound and 1 - r['ours']['cos'] <= cos_bound else 'MISMATCH'
        res['dtypes'][dt] = r
    return res


def cmd_compare(a):
    import torch
    # PyTorch's own defaults, the policy ours follows too: f32 matmuls in full f32, f32 cuDNN convs on TF32 tensor
    # cores. Exact-f32 torch against TF32 ours made chaotic random-weight models (YOLOv10) look 1000x off.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    dtypes = a.dtypes.split(',')
    out = {'commit': a.meta_commit, 'versions': versions(), 'backend': a.backend, 'device': a.device, 'dtypes': dtypes,
           'verdict_rule': f'ours rel <= max(FLOOR, {SLACK} x torch rel at that dtype) and 1 - cos <= max(FLOOR, {SLACK} x (1 - torch cos)), FLOOR {FLOOR}; rel = max|x - oracle_f64| / max|oracle_f64|',
           'models': {}}
    t0 = time.time()
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    for name in a.models.split(','):
        try:
            out['models'][name] = compare_model(name, a.dir, dtypes, a.device)
        except Exception as e:  # noqa: BLE001 - record and go on with the other models
            out['models'][name] = {'model': name, 'error': f'{type(e).__name__}: {e}', 'traceback': traceback.format_exc()[-4000:]}
        out['seconds'] = round(time.time() - t0, 1)
        with open(a.json, 'w') as f:
            json.dump(out, f, indent=1)
    v = out['versions']
    print(f"\nvision-parity.json: {a.json} (commit {a.meta_commit or '?'}; torch {v.get('torch')}, {v.get('gpu')}); ours on {a.backend}, "
          f"oracle (bench/reference, float64) on {a.device}; rel = max |x - oracle| / max |oracle|")
    print(f"{'model':17s} {'dtype':5s} {'shape':>20s} {'ours rel':>10s} {'ours cos':>12s} {'torch rel':>10s} {'torch cos':>12s} {'bound':>9s}  verdict")
    for name, r in out['models'].items():
        if 'error' in r:
            print(f'{name:17s} ERROR {r["error"][:300]}')
            continue
        for dt, x in r['dtypes'].items():
            if 'error' in x:
                print(f'{name:17s} {dt:5s} ERROR {x["error"][:300]}')
                continue
            o = x['ours']
            print(f"{name:17s} {dt:5s} {'x'.join(map(str, r['shape'])):>20s} {o['rel']:10.2e} {o['cos']:12.9f} {x['torch']['rel']:10.2e} {x['torch']['cos']:12.9f} {x['bound']:9.2e}  {x['verdict']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    c = sub.add_parser('configs')
    c.add_argument('--dir', required=True)
    c.add_argument('--flux-size', type=int, default=1024)
    c.add_argument('--flux-layers', default='2,2')
    c.add_argument('--batch', type=int, default=2)
    c.add_argument('--seed', type=int, default=7)
    c.add_argument('--tiny', action='store_true')
    p = sub.add_parser('preflight')
    p.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])
    m = sub.add_parser('compare')
    m.add_argument('--dir', required=True)
    m.add_argument('--json', required=True)
    m.add_argument('--models', default=','.join(MODELS))
    m.add_argument('--dtypes', default='f32,bf16')
    m.add_argument('--backend', default='cuda')
    m.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])
    m.add_argument('--meta-commit', default='')
    a = ap.parse_args()
    {'configs': cmd_configs, 'preflight': cmd_preflight, 'compare': cmd_compare}[a.cmd](a)


if __name__ == '__main__':
    main()
