"""The embedding-head rows of encoder-parity (issue 35): BGE-M3 (dense, sparse lexical weights, ColBERT multi-vectors)
and ColBERTv2 (multi-vectors). Ours: the bundled CLI's `embed --pooling dense,sparse,multi-vector` (or multi-vector)
on the checkpoint init-weights wrote. The yardstick: HF transformers' XLMRobertaModel / BertModel loaded from the same
checkpoint, with the production heads in plain PyTorch on top (bench/reference/bge_m3_ref.py, colbert_ref.py), each
input alone, in the run's dtype, eager attention. HF's own sdpa run of the same is the low-precision bound (the issue:
fp16 / bf16 within HF's own eager-vs-sdpa difference); in f32 the fixed thresholds below apply and sdpa is reported.

Metrics per output (ours vs HF eager, and HF sdpa vs HF eager):
  dense         min cosine over the inputs, max abs error (normalised vectors)
  sparse        token-set equality (which ids carry a positive weight after FlagEmbedding's filtering), the largest
                weight among the ids only one side has (a relu-boundary flip is near zero), max abs error of the
                weights relative to the largest weight
  multi-vector  row counts equal, min cosine per token over every row, max abs error
encoder_parity.py calls compare_heads(); `--hf-backbone plain` swaps transformers for encoder_ref.py's plain-torch
backbone (a dry run of this file where transformers is missing: the numbers then say nothing about HF).
"""
import json
import os
import sys

REF_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'reference'))
HEAD_MODELS = ('bge_m3', 'colbertv2')
# the poolings our `embed` runs per head model
POOLINGS = {'bge_m3': 'dense,sparse,multi-vector', 'colbertv2': 'multi-vector'}
# f32: the issue's cosine; errors of normalised vectors / weights relative to the largest one
F32 = {'min_cos': 0.99999, 'max_abs': 2e-3, 'sparse_rel': 2e-3}
# low precision without an sdpa yardstick (the plain dry run): the xlm_roberta rows' bf16 thresholds
LOW_FALLBACK = {'min_cos': 0.999, 'max_abs': 3e-2, 'sparse_rel': 3e-2}
# floors under the sdpa yardstick (where HF's two paths agree to the last bit, a bound of 0 would demand the same)
FLOOR = {'cos_gap': 1e-6, 'max_abs': 1e-4, 'sparse_rel': 1e-4}
# XLM-R's tokenizer specials FlagEmbedding drops from the lexical weights: <s>, <pad>, </s>, <unk>
XLMR_UNUSED = (0, 1, 2, 3)


def _ref_modules():
    if REF_DIR not in sys.path:
        sys.path.insert(0, REF_DIR)
    import bge_m3_ref
    import colbert_ref
    import encoder_ref
    import st_io
    return bge_m3_ref, colbert_ref, encoder_ref, st_io


def hf_backbone(name, ckpt, dtype, impl, device, tensors):
    """transformers' XLMRobertaModel / BertModel of our checkpoint's config, attention `impl`, then the checkpoint's
    backbone tensors loaded by name (ColBERT's `bert.` prefix removed here, not left to from_pretrained's prefix
    rules): a callable (ids, mask) -> last_hidden_state; a backbone parameter the checkpoint lacks is an error."""
    import transformers
    _, _, encoder_ref, _ = _ref_modules()
    cls = transformers.XLMRobertaModel if name == 'bge_m3' else transformers.BertModel
    try:
        model = cls.from_pretrained(ckpt, dtype=dtype, attn_implementation=impl)
    except TypeError:
        model = cls.from_pretrained(ckpt, torch_dtype=dtype, attn_implementation=impl)
    state = {k: v.to(dtype) for k, v in encoder_ref.backbone_state(tensors, 'bert.' if name == 'colbertv2' else '').items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith('pooler.') and not k.endswith(('position_ids', 'token_type_ids'))]
    if missing or unexpected:
        raise RuntimeError(f'{cls.__name__} from {ckpt}: backbone parameters missing {missing[:8]}, unexpected {list(unexpected)[:8]}')
    got = getattr(model.config, '_attn_implementation', impl)
    if got != impl:
        raise RuntimeError(f'{cls.__name__}: asked for {impl} attention, the model runs {got}')
    model = model.to(device).eval()
    return lambda ids, mask: model(input_ids=ids, attention_mask=mask).last_hidden_state


def plain_backbone(name, ckpt, dtype, device, tensors):
    _, _, encoder_ref, _ = _ref_modules()
    return encoder_ref.load_backbone(ckpt, dtype=dtype, prefix='bert.' if name == 'colbertv2' else '', device=device, tensors=tensors)


def reference_rows(name, ckpt, cfg, seqs, backbone, dtype, device, tensors):
    """The heads of bench/reference on `backbone`: per input {"embedding", "sparse", "multi_vector"} (as available)."""
    bge_m3_ref, colbert_ref, _, _ = _ref_modules()
    if name == 'bge_m3':
        heads = bge_m3_ref.load_heads(tensors, dtype=dtype, device=device)
        return [{'embedding': r['dense'], 'sparse': r['sparse'], 'multi_vector': r['multi_vector']}
                for r in bge_m3_ref.embed(backbone, heads, seqs, XLMR_UNUSED, device=device)]
    head = colbert_ref.load_head(tensors, dtype=dtype, device=device)
    return [{'multi_vector': v} for v in colbert_ref.doc_vectors(backbone, head, seqs, cfg.get('pad_token_id', 0), (), device=device)]


def _rows_metrics(a, b):
    """min cosine / max abs of matching rows (lists of vectors), and whether the row counts agree."""
    import torch
    if len(a) != len(b):
        return {'rows_equal': False, 'min_cos': float('nan'), 'max_abs': float('inf')}
    if not a:
        return {'rows_equal': True, 'min_cos': 1.0, 'max_abs': 0.0}
    x = torch.tensor(a, dtype=torch.float64)
    y = torch.tensor(b, dtype=torch.float64)
    cos = (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1)).clamp_min(1e-30)
    return {'rows_equal': True, 'min_cos': float(cos.min()), 'max_abs': float((x - y).abs().max())}


def _sparse_metrics(a, b):
    """Token sets and weights of two lexical-weight dicts (b the yardstick)."""
    ka, kb = set(a), set(b)
    scale = max([1e-30, *map(abs, b.values())])
    only = ka ^ kb
    common = ka & kb
    return {
        'tokens_equal': not only, 'only_one_side': len(only),
        'flip_max_rel': max([0.0, *(max(a.get(k, 0.0), b.get(k, 0.0)) / scale for k in only)]),
        'max_rel': max([0.0, *(abs(a[k] - b[k]) / scale for k in common)]),
        'max_abs': max([0.0, *(abs(a[k] - b[k]) for k in common)]),
    }


def compare_outputs(got, want):
    """Metrics of every output `want` has, worst over the inputs (got / want: lists of per-input dicts)."""
    out = {}
    if 'embedding' in want[0]:
        per = [_rows_metrics([g['embedding']], [w['embedding']]) for g, w in zip(got, want)]
        out['dense'] = {'min_cos': min(p['min_cos'] for p in per), 'max_abs': max(p['max_abs'] for p in per)}
    if 'sparse' in want[0]:
        per = [_sparse_metrics(g['sparse'], w['sparse']) for g, w in zip(got, want)]
        out['sparse'] = {'tokens_equal': all(p['tokens_equal'] for p in per), 'inputs_with_token_diff': sum(not p['tokens_equal'] for p in per),
                         'flip_max_rel': max(p['flip_max_rel'] for p in per), 'max_rel': max(p['max_rel'] for p in per), 'max_abs': max(p['max_abs'] for p in per)}
    per = [_rows_metrics(g['multi_vector'], w['multi_vector']) for g, w in zip(got, want)]
    out['multi_vector'] = {'rows_equal': all(p['rows_equal'] for p in per), 'min_cos': min(p['min_cos'] for p in per), 'max_abs': max(p['max_abs'] for p in per)}
    return out


def bounds(dtype, yard, factor):
    """The thresholds of a run: f32's fixed ones; low precision: `factor` x HF's eager-vs-sdpa metric (floored), or the
    fallback thresholds where there is no sdpa run."""
    if dtype == 'f32' or yard is None:
        t = F32 if dtype == 'f32' else LOW_FALLBACK
        return {o: {'min_cos': t['min_cos'], 'max_abs': t['max_abs'], 'sparse_rel': t['sparse_rel']} for o in ('dense', 'sparse', 'multi_vector')}
    b = {}
    for o, m in yard.items():
        if o == 'sparse':
            rel = factor * max(m['max_rel'], m['flip_max_rel'], FLOOR['sparse_rel'])
            b[o] = {'sparse_rel': rel}
        else:
            b[o] = {'min_cos': 1 - factor * max(1 - m['min_cos'], FLOOR['cos_gap']), 'max_abs': factor * max(m['max_abs'], FLOOR['max_abs'])}
    return b


def verdict(metrics, bnd):
    """'match' when every output is within its bound; else 'MISMATCH' and the outputs that are not."""
    bad = []
    for o, m in metrics.items():
        b = bnd[o]
        if o == 'sparse':
            # a token only one side keeps must be a near-zero weight (a relu-boundary flip), the weights within the bound
            if m['max_rel'] > b['sparse_rel'] or m['flip_max_rel'] > b['sparse_rel']:
                bad.append(o)
        elif not m.get('rows_equal', True) or m['min_cos'] < b['min_cos'] or m['max_abs'] > b['max_abs']:
            bad.append(o)
    return ('match' if not bad else 'MISMATCH'), bad


def read_ours(path, name):
    with open(path) as f:
        rows = sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r['index'])
    keys = ('embedding', 'sparse', 'multi_vector') if name == 'bge_m3' else ('multi_vector',)
    return [{k: r[k] for k in keys} for r in rows]


def compare_heads(name, mdir, dtype, *, device='cuda', backbone_kind='hf', factor=2.0):
    """One head model's row of encoder-parity.json."""
    import torch
    td = {'f32': torch.float32, 'bf16': torch.bfloat16, 'f16': torch.float16}[dtype]
    with open(os.path.join(mdir, 'config.json')) as f:
        cfg = json.load(f)
    res = {'model': name, 'dtype': dtype, 'architecture': cfg['architectures'][0], 'backbone': 'transformers' if backbone_kind == 'hf' else 'encoder_ref.py (plain torch, a dry run)', 'poolings': POOLINGS[name]}
    ours_path = os.path.join(mdir, 'ours_heads.jsonl')
    if not os.path.exists(ours_path) or os.path.getsize(ours_path) == 0:
        err = os.path.join(mdir, 'ours_heads.stderr')
        res['error'] = f'our embed --pooling {POOLINGS[name]} wrote nothing: ' + (open(err).read()[-3000:] if os.path.exists(err) else '(no stderr)')
        return res
    with open(os.path.join(mdir, 'inputs.jsonl')) as f:
        seqs = [json.loads(line) for line in f if line.strip()]
    ours = read_ours(ours_path, name)
    ckpt = os.path.join(mdir, 'ckpt')
    _, _, _, st_io = _ref_modules()
    tensors = st_io.load_dir(ckpt)
    if backbone_kind == 'hf':
        eager = reference_rows(name, ckpt, cfg, seqs, hf_backbone(name, ckpt, td, 'eager', device, tensors), td, device, tensors)
        sdpa = reference_rows(name, ckpt, cfg, seqs, hf_backbone(name, ckpt, td, 'sdpa', device, tensors), td, device, tensors)
    else:
        eager = reference_rows(name, ckpt, cfg, seqs, plain_backbone(name, ckpt, td, device, tensors), td, device, tensors)
        sdpa = None
    res['inputs'] = len(seqs)
    res['tokens'] = sum(len(s) for s in seqs)
    res['metrics'] = compare_outputs(ours, eager)
    res['hf_sdpa_vs_eager'] = compare_outputs(sdpa, eager) if sdpa is not None else None
    res['bound_factor'] = factor
    res['bounds'] = bounds(dtype, res['hf_sdpa_vs_eager'], factor)
    res['bound_from'] = 'fixed (f32)' if dtype == 'f32' else (f'{factor} x HF sdpa vs eager' if sdpa is not None else 'fixed (no sdpa run)')
    res['verdict'], res['failed_outputs'] = verdict(res['metrics'], res['bounds'])
    if dtype != 'f32':
        # context for the verdict: how far ours and HF's eager run each are from HF eager in float32 (same weights)
        f32 = reference_rows(name, ckpt, cfg, seqs, hf_backbone(name, ckpt, torch.float32, 'eager', device, tensors) if backbone_kind == 'hf'
                             else plain_backbone(name, ckpt, torch.float32, device, tensors), torch.float32, device, tensors)
        res['vs_f32'] = {'ours': compare_outputs(ours, f32), 'hf_eager': compare_outputs(eager, f32)}
    return res


def table_lines(models):
    """The head rows of the report: one line per output."""
    lines = [f"{'model':10s} {'output':13s} {'min cos':>11s} {'max abs':>9s} {'sparse rel':>10s} {'tokens':>7s} {'sdpa cos':>11s} {'sdpa abs':>9s}  verdict"]
    for name, r in models.items():
        if name not in HEAD_MODELS:
            continue
        if 'error' in r:
            lines.append(f"{name:10s} ERROR {r['error'][:300]}")
            continue
        y = r.get('hf_sdpa_vs_eager') or {}
        for o, m in r['metrics'].items():
            s = y.get(o, {})
            bad = o in r['failed_outputs']
            if o == 'sparse':
                cells = f"{'':>11s} {m['max_abs']:9.2e} {m['max_rel']:10.2e} {'same' if m['tokens_equal'] else str(m['inputs_with_token_diff']) + ' diff':>7s} {'':>11s} {s.get('max_abs', float('nan')):9.2e}"
            else:
                cells = f"{m['min_cos']:11.7f} {m['max_abs']:9.2e} {'':>10s} {'' if m.get('rows_equal', True) else 'ROWS':>7s} {s.get('min_cos', float('nan')):11.7f} {s.get('max_abs', float('nan')):9.2e}"
            lines.append(f"{name:10s} {o:13s} {cells}  {'MISMATCH' if bad else 'match'}")
        v = r.get('vs_f32')
        if v:
            parts = []
            for o, m in v['ours'].items():
                h = v['hf_eager'][o]
                parts.append(f"{o} rel {m['max_rel']:.2e} (HF {h['max_rel']:.2e})" if o == 'sparse' else f"{o} min cos {m['min_cos']:.6f} (HF {h['min_cos']:.6f})")
            lines.append(f"{'':10s} vs HF f32 eager: ours / HF's own {r.get('dtype', 'low-precision')} eager: " + ', '.join(parts))
    return lines
