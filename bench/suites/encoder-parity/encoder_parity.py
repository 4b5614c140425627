#!/usr/bin/env python3
"""Encoder parity (issues 33, 35): our encoder runner (the bundled CLI's `embed`) against HF transformers on the same
random checkpoint, for the encoders the catalog serves: XLM-RoBERTa (BGE-M3's encoder), CLIP's text encoder and T5's
encoder (FLUX's two text encoders), and the embedding heads of BGE-M3 (dense, sparse, multi-vector) and ColBERTv2
(multi-vector) on HF's backbones with the plain-PyTorch heads of bench/reference (heads_parity.py).
bench/suites/encoder-parity/run.sh drives it:

  encoder_parity.py configs --dir WORK [--n 16] [--dtype f32|bf16|f16]
      writes WORK/<name>/config.json per model and WORK/<name>/inputs.jsonl (seeded token-id arrays of lengths
      U[4, max]: no special or pad ids for the backbone rows; <s> ... </s> / [CLS] [D] ... [SEP] for the head rows,
      as their tokenizers give, with repeated ids so the lexical weights' max per id matters). Needs only the stdlib.
  encoder_parity.py poolings NAME
      prints the --pooling our embed runs for a model (cls / mean rows: "cls mean", one run each; head rows: one run).
  (run.sh: fastkernels init-weights -> WORK/<name>/ckpt; fastkernels embed per pooling)
  encoder_parity.py compare --dir WORK --json OUT/encoder-parity.json [--models ...] [--device cuda]
      backbone rows: each checkpoint with the transformers class its config names (XLMRobertaModel, CLIPTextModel,
      T5EncoderModel), eager attention, the configs' dtype; per input: last_hidden_state's first row (cls) and its
      mean over the sequence (mean), each L2-normalised as ours are, against our vectors: cosine and max abs error.
      head rows: heads_parity.compare_heads (eager HF + reference heads; HF sdpa as the low-precision bound).
"""
import argparse
import json
import math
import os
import random
import sys
import time
import traceback

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'lib')))
import torch_env  # noqa: E402  (bench/lib: versions and the preflight every PyTorch-side script shares)

from heads_parity import HEAD_MODELS, POOLINGS, compare_heads, table_lines

DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
# the verdict: every vector within these of HF's (normalised vectors: 1e-3 is 0.1% of the norm)
MAX_ABS = {"f32": 2e-3, "bf16": 3e-2, "f16": 3e-2}
MIN_COS = {"f32": 0.99999, "bf16": 0.999, "f16": 0.999}


def model_configs(dtype):
    td = DTYPES[dtype]
    return {
        # BGE-M3's encoder at a quarter of its depth and 3/4 of its width
        "xlm_roberta": ({"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "vocab_size": 32000, "hidden_size": 768,
                         "num_hidden_layers": 4, "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                         "max_position_embeddings": 514, "type_vocab_size": 1, "layer_norm_eps": 1e-05, "pad_token_id": 1,
                         "bos_token_id": 0, "eos_token_id": 2, "position_embedding_type": "absolute", "initializer_range": 0.02,
                         "torch_dtype": td}, 200),
        # CLIP ViT-L/14's text encoder shape (FLUX's pooled prompt), 4 of its 12 layers; 77 positions
        "clip_text": ({"architectures": ["CLIPTextModel"], "model_type": "clip_text_model", "vocab_size": 49408, "hidden_size": 768,
                       "intermediate_size": 3072, "num_hidden_layers": 4, "num_attention_heads": 12, "max_position_embeddings": 77,
                       "hidden_act": "quick_gelu", "layer_norm_eps": 1e-05, "projection_dim": 768, "bos_token_id": 49406,
                       "eos_token_id": 49407, "pad_token_id": 1, "initializer_range": 0.02, "torch_dtype": td}, 77),
        # T5 v1.1's encoder form (gated-gelu, relative position buckets), FLUX's T5-XXL at a small width, 4 layers
        "t5_encoder": ({"architectures": ["T5EncoderModel"], "model_type": "t5", "vocab_size": 32128, "d_model": 512, "d_kv": 64,
                        "d_ff": 1024, "num_heads": 8, "num_layers": 4, "feed_forward_proj": "gated-gelu", "dense_act_fn": "gelu_new",
                        "is_gated_act": True, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
                        "layer_norm_epsilon": 1e-06, "pad_token_id": 0, "eos_token_id": 1, "torch_dtype": td}, 256),
        # BGE-M3: the xlm_roberta row's encoder with the sparse_linear / colbert_linear heads init-weights writes
        "bge_m3": ({"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "vocab_size": 32000, "hidden_size": 768,
                    "num_hidden_layers": 4, "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                    "max_position_embeddings": 514, "type_vocab_size": 1, "layer_norm_eps": 1e-05, "pad_token_id": 1,
                    "bos_token_id": 0, "eos_token_id": 2, "position_embedding_type": "absolute", "initializer_range": 0.02,
                    "torch_dtype": td}, 200),
        # ColBERTv2: colbert-ir/colbertv2.0's HF_ColBERT (BERT-base widths, 4 of its 12 layers), 128-dim vectors
        "colbertv2": ({"architectures": ["HF_ColBERT"], "model_type": "bert", "vocab_size": 30522, "hidden_size": 768,
                       "num_hidden_layers": 4, "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                       "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0,
                       "dim": 128, "initializer_range": 0.02, "torch_dtype": td}, 180),
    }


MODELS = ("xlm_roberta", "clip_text", "t5_encoder") + HEAD_MODELS


def head_input(name, rng, n, vocab):
    """A head row's input as its tokenizer frames it; half the body from a pool of 40 ids, so ids repeat. BGE-M3:
    <s> (0) ... </s> (2), body ids from 4 (no <pad> 1, <unk> 3: our embed's special ids are config.json's pad / bos /
    eos, FlagEmbedding's add <unk>). ColBERTv2: [CLS] (101) [D] (2, colbert-ir's document marker) ... [SEP] (102)."""
    lo = 4 if name == "bge_m3" else 1000
    pool = [rng.randrange(lo, vocab) for _ in range(40)]
    body = [rng.choice(pool) if rng.random() < 0.5 else rng.randrange(lo, vocab) for _ in range(max(n - 2, 1))]
    return [0, *body, 2] if name == "bge_m3" else [101, 2, *body[1:], 102]


def cmd_configs(a):
    rng = random.Random(a.seed)
    for name, (cfg, max_len) in model_configs(a.dtype).items():
        d = os.path.join(a.dir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        vocab = cfg["vocab_size"]
        # no special / pad ids (0-2, and CLIP's bos / eos at the top of its vocabulary): the rows are plain tokens
        top = vocab - 2 if name == "clip_text" else vocab
        with open(os.path.join(d, "inputs.jsonl"), "w") as f:
            for _ in range(a.n):
                n = rng.randint(4, max_len)
                ids = head_input(name, rng, n, vocab) if name in HEAD_MODELS else [rng.randrange(3, top) for _ in range(n)]
                f.write(json.dumps(ids) + "\n")
    print(f"encoder-parity: {a.dtype} configs and {a.n} inputs for {', '.join(MODELS)} in {a.dir}")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def compare_model(name, wdir, dtype):
    import torch
    import transformers
    mdir = os.path.join(wdir, name)
    cfg = json.load(open(os.path.join(mdir, "config.json")))
    res = {"model": name, "architecture": cfg["architectures"][0]}
    inputs = read_jsonl(os.path.join(mdir, "inputs.jsonl"))
    ours = {}
    for pooling in ("cls", "mean"):
        p = os.path.join(mdir, f"ours_{pooling}.jsonl")
        if not os.path.exists(p) or os.path.getsize(p) == 0:
            err = os.path.join(mdir, f"ours_{pooling}.stderr")
            res["error"] = f"our embed --pooling {pooling} wrote nothing: " + (open(err).read()[-3000:] if os.path.exists(err) else "(no stderr)")
            return res
        rows = sorted(read_jsonl(p), key=lambda r: r["index"])
        ours[pooling] = [r["embedding"] for r in rows]
    cls = getattr(transformers, cfg["architectures"][0])
    td = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    kw = dict(attn_implementation="eager")
    try:
        model = cls.from_pretrained(os.path.join(mdir, "ckpt"), dtype=td, **kw)
    except TypeError:
        model = cls.from_pretrained(os.path.join(mdir, "ckpt"), torch_dtype=td, **kw)
    model = model.cuda().eval()
    per = {"cls": [], "mean": []}
    with torch.no_grad():
        for i, ids in enumerate(inputs):
            x = torch.tensor([ids], device="cuda")
            h = model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[0].float()
            for pooling, v in (("cls", h[0]), ("mean", h.mean(0))):
                ref = torch.nn.functional.normalize(v, dim=0)
                got = torch.tensor(ours[pooling][i], device="cuda", dtype=torch.float32)
                per[pooling].append({"cos": float(torch.dot(ref, got) / got.norm().clamp_min(1e-30)), "max_abs": float((ref - got).abs().max())})
    res["inputs"] = len(inputs)
    res["tokens"] = sum(len(x) for x in inputs)
    res["poolings"] = {p: {"min_cos": min(r["cos"] for r in rs), "max_abs": max(r["max_abs"] for r in rs),
                           "worst_input": max(range(len(rs)), key=lambda j: rs[j]["max_abs"])} for p, rs in per.items()}
    ok = all(s["max_abs"] <= MAX_ABS[dtype] and s["min_cos"] >= MIN_COS[dtype] for s in res["poolings"].values())
    res["verdict"] = "match" if ok else "MISMATCH"
    del model
    torch.cuda.empty_cache()
    return res


def versions():
    return torch_env.versions(('transformers', 'safetensors'))


def cmd_preflight(_a):
    torch_env.preflight('encoder-parity', 'cuda', ('transformers', 'safetensors'))


def cmd_poolings(a):
    print(POOLINGS[a.name] if a.name in HEAD_MODELS else "cls mean")


def cmd_compare(a):
    out = {"commit": a.meta_commit, "versions": versions(), "dtype": a.dtype, "backend": a.backend, "thresholds": {"max_abs": MAX_ABS[a.dtype], "min_cos": MIN_COS[a.dtype]},
           "head_bound_factor": a.bound_factor, "models": {}}
    t0 = time.time()
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    for name in a.models.split(","):
        try:
            if name in HEAD_MODELS:
                out["models"][name] = compare_heads(name, os.path.join(a.dir, name), a.dtype, device=a.device, backbone_kind=a.hf_backbone, factor=a.bound_factor)
            else:
                out["models"][name] = compare_model(name, a.dir, a.dtype)
        except Exception as e:  # noqa: BLE001 - record and go on with the other models
            out["models"][name] = {"model": name, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
        out["seconds"] = round(time.time() - t0, 1)
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    v = out["versions"]
    print(f"\nencoder-parity.json: {a.json} (commit {a.meta_commit or '?'}; torch {v.get('torch')}, transformers {v.get('transformers')}, {v.get('gpu')}); "
          f"{a.dtype}, ours on {a.backend}; HF eager attention; vectors L2-normalised on both sides")
    if any(n not in HEAD_MODELS for n in out["models"]):
        print(f"{'model':12s} {'inputs':>6s} {'tokens':>7s} {'cls min cos':>12s} {'cls max abs':>12s} {'mean min cos':>13s} {'mean max abs':>13s}  verdict")
    for name, r in out["models"].items():
        if name in HEAD_MODELS:
            continue
        if "error" in r:
            print(f"{name:12s} ERROR {r['error'][:300]}")
            continue
        c, m = r["poolings"]["cls"], r["poolings"]["mean"]
        print(f"{name:12s} {r['inputs']:6d} {r['tokens']:7d} {c['min_cos']:12.7f} {c['max_abs']:12.2e} {m['min_cos']:13.7f} {m['max_abs']:13.2e}  {r['verdict']}")
    heads = [n for n in out["models"] if n in HEAD_MODELS]
    if heads:
        bound = sorted({out["models"][n].get("bound_from", "-") for n in heads})
        print(f"\nembedding heads: ours vs HF eager + bench/reference heads (bounds: {', '.join(bound)}); sdpa columns: HF sdpa vs HF eager")
        print("\n".join(table_lines(out["models"])))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("configs")
    c.add_argument("--dir", required=True)
    c.add_argument("--n", type=int, default=16)
    c.add_argument("--seed", type=int, default=5)
    c.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    sub.add_parser("preflight")
    p = sub.add_parser("poolings")
    p.add_argument("name")
    m = sub.add_parser("compare")
    m.add_argument("--dir", required=True)
    m.add_argument("--json", required=True)
    m.add_argument("--models", default=",".join(MODELS))
    m.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    m.add_argument("--backend", default="cuda")
    m.add_argument("--meta-commit", default="")
    m.add_argument("--device", default="cuda", help="where HF and the reference heads run (head rows)")
    m.add_argument("--hf-backbone", choices=["hf", "plain"], default="hf", help="plain: encoder_ref.py instead of transformers (a dry run, head rows)")
    m.add_argument("--bound-factor", type=float, default=2.0, help="low precision: ours may differ from HF eager by this many times HF sdpa's difference")
    a = ap.parse_args()
    {"configs": cmd_configs, "preflight": cmd_preflight, "poolings": cmd_poolings, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
