#!/usr/bin/env python3
"""Issue 6 GPU parity: our Llama-family engine (bundled CLI, --backend cuda) against HF transformers on the same
random checkpoint, in bf16 (the default) or float32 (--dtype f32: both sides in float32, TF32 off in torch, so
bf16 near-ties cannot make greedy decoding diverge). bench/suites/parity/run.sh drives it:

  parity.py configs --dir WORK [--prompt-len 200] [--max-tokens 64] [--dtype bf16|f32]
      writes WORK/<name>/config.json for llama (llama3 rope scaling), qwen2 (q/k/v bias, tied embeddings) and
      mistral (sliding window < sequence) with torch_dtype bfloat16 or float32, and WORK/prompt.json (seeded
      random ids, and the dtype, which compare reads). Needs only the stdlib.
  (suites/parity/run.sh: fastkernels init-weights -> WORK/<name>/ckpt; fastkernels generate --backend cuda --json
      --logits-out WORK/<name>/ours_logits.safetensors --prompt-logits > WORK/<name>/ours.json)
  parity.py compare --dir WORK --json OUT/parity.json [--meta-commit C]
      loads each checkpoint in HF (the configs' dtype, cuda; sdpa, and eager as a noise floor) and compares
        (a) prompt logits: our prompt_logits.0 [P, V] vs HF forward logits [P, V]: max/mean abs error, top-1 agreement
        (b) decode logits, teacher-forced: our logits.0 [N, V] (the logits that produced each generated token) vs HF
            forward on prompt + our tokens: same metrics (valid at every step, divergence or not)
        (c) greedy tokens: ours vs HF greedy with its KV cache (EOS ignored: no stopping, no suppression), and
            HF generate(do_sample=False) as a cross-check: identical count, first divergence and the logit
            margins there (HF top-1 minus top-2; ours: our token minus HF's token).
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

MODELS = ("llama", "qwen2", "mistral")
# the other families' causal LMs (--models): MoE (mixtral, qwen3_moe), hybrid linear attention (qwen3_next: HF's
# pure-PyTorch path when FLA is absent), gpt-oss (sinks, YaRN, alternating windows; bf16 experts, HF's eager attention)
MORE_MODELS = ("mixtral", "qwen3_moe", "qwen3_next", "gpt_oss")
ALL_MODELS = MODELS + MORE_MODELS
# HF attention implementations per model where the default list does not apply: gpt-oss's sinks need its eager path
ATTN_OVERRIDE = {"gpt_oss": ["eager"]}
COMMON = {
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
    "use_cache": True,
}


DTYPES = {"bf16": "bfloat16", "f32": "float32"}
# A top-1 disagreement is a near-tie when HF's top-2 gap is at most this many times the row's largest logit error.
NEAR_TIE_ERRORS = 2


def model_configs(window: int, dtype: str = "bf16", head_dim: int = 64):
    # the hidden size stays 1024: 16 / 4 heads of 64, or 8 / 2 of 128 (Llama-3's head size)
    heads = COMMON["hidden_size"] // head_dim
    common = {**COMMON, "torch_dtype": DTYPES[dtype], "head_dim": head_dim, "num_attention_heads": heads, "num_key_value_heads": heads // 4}
    llama_rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 256}
    return {
        # llama3 scaling with original_max_position_embeddings 256: wavelengths > 256 (most of the low
        # frequencies at theta 5e5) are divided by 8 and 64..256 are smoothed, so positions < 300 see it.
        "llama": {**common, "architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 500000.0,
                  "rope_parameters": llama_rope, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False},
        "qwen2": {**common, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_theta": 1000000.0,
                  "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": True,
                  "use_sliding_window": False, "sliding_window": None, "max_window_layers": 4},
        "mistral": {**common, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "rope_theta": 10000.0,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "sliding_window": window,
                    "tie_word_embeddings": False},
        # 8 experts, top-2 (Mixtral-8x7B's routing) at a quarter of the dense width each
        "mixtral": {**common, "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "rope_theta": 1000000.0,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "num_local_experts": 8,
                    "num_experts_per_tok": 2, "intermediate_size": 704, "sliding_window": None, "router_aux_loss_coef": 0.02,
                    "output_router_logits": False, "tie_word_embeddings": False},
        # 16 experts, top-4, q/k norms, a dense first layer (mlp_only_layers)
        "qwen3_moe": {**common, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "rope_theta": 1000000.0,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "num_experts": 16,
                      "num_experts_per_tok": 4, "moe_intermediate_size": 256, "decoder_sparse_step": 1, "mlp_only_layers": [0],
                      "norm_topk_prob": True, "attention_bias": False, "use_sliding_window": False, "sliding_window": None,
                      "output_router_logits": False, "tie_word_embeddings": False},
        # 3 gated-DeltaNet layers : 1 gated full-attention layer, Qwen3-Next's ratios of heads and partial rotary
        "qwen3_next": {**common, "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "rope_theta": 10000000.0,
                       "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0}, "partial_rotary_factor": 0.25,
                       "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
                       "full_attention_interval": 4, "linear_num_key_heads": 4, "linear_num_value_heads": 8,
                       "linear_key_head_dim": 64, "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4,
                       "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 256,
                       "shared_expert_intermediate_size": 256, "decoder_sparse_step": 1, "mlp_only_layers": [],
                       "norm_topk_prob": True, "attention_bias": False, "output_router_logits": False, "tie_word_embeddings": False},
        # alternating sliding (window) / full layers, learned sinks, YaRN over a short original context so the prompt
        # sees the scaled frequencies, clamped SwiGLU experts with biases
        "gpt_oss": {**common, "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "rope_theta": 150000.0,
                    "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                     "original_max_position_embeddings": 128, "truncate": False},
                    "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 8.0, "beta_fast": 32.0,
                                        "beta_slow": 1.0, "original_max_position_embeddings": 128, "truncate": False},
                    "sliding_window": window, "layer_types": ["sliding_attention", "full_attention"] * (common["num_hidden_layers"] // 2),
                    "num_local_experts": 8, "num_experts_per_tok": 2, "experts_per_token": 2, "intermediate_size": 512,
                    "swiglu_limit": 7.0, "attention_bias": True, "router_aux_loss_coef": 0.9, "output_router_logits": False,
                    "initial_context_length": 128, "tie_word_embeddings": False},
    }


def cmd_configs(a):
    os.makedirs(a.dir, exist_ok=True)
    for name, cfg in model_configs(a.window, a.dtype, a.head_dim).items():
        os.makedirs(os.path.join(a.dir, name), exist_ok=True)
        with open(os.path.join(a.dir, name, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
    rng = random.Random(a.seed)
    ids = [rng.randrange(3, COMMON["vocab_size"]) for _ in range(a.prompt_len)]
    with open(os.path.join(a.dir, "prompt.json"), "w") as f:
        json.dump({"prompt_ids": ids, "max_tokens": a.max_tokens, "window": a.window, "dtype": a.dtype}, f)
    print(f"parity: {a.dtype} configs for {', '.join(ALL_MODELS)} and a {a.prompt_len}-token prompt in {a.dir} "
          f"(mistral window {a.window} < {a.prompt_len + a.max_tokens} tokens)")


# ----------------------------------------------------------------------------------------------- compare

def _row_stats(ours, ref):
    """ours, ref: float32 [R, V] on the same device. Per-row max abs error, top-1s, ref top1-top2 margin."""
    d = (ours - ref).abs()
    top2 = ref.topk(2, dim=-1)
    return {
        "err_max": d.max(dim=-1).values,
        "err_mean": d.mean(dim=-1),
        "ref_absmax": ref.abs().max(dim=-1).values,
        "ours_top": ours.argmax(dim=-1),
        "ref_top": top2.indices[:, 0],
        "ref_margin": (top2.values[:, 0] - top2.values[:, 1]),
        "ours_gap": ours.gather(1, ours.argmax(dim=-1, keepdim=True))[:, 0] - ours.gather(1, top2.indices[:, :1])[:, 0],
    }


def logits_report(ours, ref, pos0=0):
    s = _row_stats(ours, ref)
    agree = (s["ours_top"] == s["ref_top"])
    R = ours.shape[0]
    dis = []
    for r in (~agree).nonzero().flatten().tolist():
        dis.append({"row": r, "position": pos0 + r, "ours_top": int(s["ours_top"][r]), "hf_top": int(s["ref_top"][r]),
                    "hf_margin": float(s["ref_margin"][r]), "ours_margin_over_hf_top": float(s["ours_gap"][r]),
                    "row_err_max": float(s["err_max"][r]),
                    # a near-tie: HF's own top-2 gap is within what the error we see on that row can move it: the two
                    # logits may err in opposite directions, so their gap by up to twice the row's largest error
                    # (run 19, head dim 128: a flip at a 0.047 gap on a row of error 0.031, the same with either
                    # prefill kernel)
                    "near_tie": bool(s["ref_margin"][r] <= NEAR_TIE_ERRORS * s["err_max"][r])})
    return {
        "rows": R,
        "max_abs_err": float(s["err_max"].max()),
        "mean_abs_err": float(s["err_mean"].mean()),
        "p99_row_max_abs_err": float(s["err_max"].float().quantile(0.99)) if R > 1 else float(s["err_max"].max()),
        "max_abs_ref": float(s["ref_absmax"].max()),
        "rel_err": float(s["err_max"].max() / s["ref_absmax"].max().clamp_min(1e-30)),
        "top1_agree": int(agree.sum()),
        "top1_agree_frac": float(agree.float().mean()),
        "min_hf_margin": float(s["ref_margin"].min()),
        "disagreements": dis[:32],
        "disagreements_all_near_tie": all(x["near_tie"] for x in dis),
        "per_row_max_abs_err": [round(float(x), 5) for x in s["err_max"].tolist()],
    }


def torch_dtype(dtype):
    import torch
    return {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]


def load_hf(ckpt, attn, dtype="bf16"):
    from transformers import AutoModelForCausalLM
    kw = dict(attn_implementation=attn, output_loading_info=True)
    td = torch_dtype(dtype)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(ckpt, dtype=td, **kw)
    except TypeError:
        model, info = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=td, **kw)
    model = model.cuda().eval()
    info = {k: [str(x) for x in v][:20] if isinstance(v, (set, list, tuple)) else str(v)[:500] for k, v in (info or {}).items()}
    return model, info


def hf_facts(model):
    cfg = model.config
    rot = getattr(getattr(model, "model", None), "rotary_emb", None)
    return {
        "class": type(model).__name__,
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "rope_type": getattr(rot, "rope_type", None),
        "rope_parameters": getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None),
        "sliding_window": getattr(cfg, "sliding_window", None),
        "layer_types": getattr(cfg, "layer_types", None),
        "tie_word_embeddings": getattr(cfg, "tie_word_embeddings", None),
        "lm_head_tied": bool(model.get_output_embeddings() is not None and model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()),
        "dtype": str(next(model.parameters()).dtype),
    }


def hf_forward_logits(model, ids):
    import torch
    with torch.no_grad():
        x = torch.tensor([ids], device="cuda")
        return model(input_ids=x, use_cache=False).logits[0].float()


def hf_greedy(model, prompt, n):
    """HF greedy decoding with its KV cache, one token a step, no stopping and no logits processors."""
    import torch
    toks, margins = [], []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt], device="cuda"), use_cache=True)
        for i in range(n):
            last = out.logits[0, -1].float()
            t2 = last.topk(2)
            tok = int(t2.indices[0])
            toks.append(tok)
            margins.append(float(t2.values[0] - t2.values[1]))
            if i + 1 < n:
                out = model(input_ids=torch.tensor([[tok]], device="cuda"), past_key_values=out.past_key_values, use_cache=True)
    return toks, margins


def hf_generate(model, prompt, n):
    import torch
    from transformers import GenerationConfig
    gc = GenerationConfig(do_sample=False, max_new_tokens=n, min_new_tokens=0, eos_token_id=None, pad_token_id=0,
                          bos_token_id=None, num_beams=1)
    with torch.no_grad():
        x = torch.tensor([prompt], device="cuda")
        y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=gc)
    return y[0, len(prompt):].tolist()


def first_divergence(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_model(name, wdir, prompt, n, attn_list, dtype="bf16"):
    import torch
    from safetensors.torch import load_file
    mdir = os.path.join(wdir, name)
    res = {"model": name, "config": json.load(open(os.path.join(mdir, "config.json")))}
    ours_json = os.path.join(mdir, "ours.json")
    if not os.path.exists(ours_json) or os.path.getsize(ours_json) == 0:
        err = os.path.join(mdir, "ours.stderr")
        res["error"] = "our generate did not produce ours.json: " + (open(err).read()[-3000:] if os.path.exists(err) else "(no stderr)")
        return res
    ours = json.load(open(ours_json))
    res["ours"] = {k: ours.get(k) for k in ("backend", "dtype", "weights", "timing")}
    ours_toks = ours["outputs"][0]["token_ids"]
    L = load_file(os.path.join(mdir, "ours_logits.safetensors"))
    ours_prompt = L["prompt_logits.0"].cuda().float()
    ours_steps = L["logits.0"].cuda().float()
    P = len(prompt)
    assert ours_prompt.shape[0] == P, f"prompt_logits.0 has {ours_prompt.shape[0]} rows, prompt has {P}"
    res["ours_internal"] = {
        # our own consistency: the step logits' argmax is the token we emitted (greedy), and the last prompt row
        # equals the first step's logits (two runs of the same prefill)
        "greedy_matches_own_logits": int((ours_steps.argmax(-1).cpu() == torch.tensor(ours_toks)).sum()),
        "prompt_last_vs_step0_max_abs": float((ours_prompt[-1] - ours_steps[0]).abs().max()),
    }
    full = prompt + ours_toks[: n - 1]
    per_attn = {}
    for attn in attn_list:
        try:
            t0 = time.time()
            model, info = load_hf(os.path.join(mdir, "ckpt"), attn, dtype)
            entry = {"loading_info": info, "hf": hf_facts(model)}
            ref = hf_forward_logits(model, full)
            entry["prompt_logits"] = logits_report(ours_prompt, ref[:P])
            entry["decode_logits_teacher_forced"] = logits_report(ours_steps, ref[P - 1: P - 1 + n], pos0=P - 1)
            hf_toks, hf_margins = hf_greedy(model, prompt, n)
            fd = first_divergence(ours_toks, hf_toks)
            g = {"steps": n, "hf_tokens": hf_toks, "identical": sum(1 for x, y in zip(ours_toks, hf_toks) if x == y),
                 "identical_prefix": n if fd is None else fd, "first_divergence": fd}
            if fd is not None and fd < n:
                # both sides saw the same context up to fd: HF's margin there, and how our logits rank HF's token
                g["at_divergence"] = {"step": fd, "ours_token": ours_toks[fd], "hf_token": hf_toks[fd],
                                      "hf_margin_top1_top2": hf_margins[fd],
                                      "ours_logit_gap_ours_minus_hf_token": float(ours_steps[fd, ours_toks[fd]] - ours_steps[fd, hf_toks[fd]]),
                                      "teacher_forced_row_err_max": entry["decode_logits_teacher_forced"]["per_row_max_abs_err"][fd]}
            try:
                gen = hf_generate(model, prompt, n)
                g["hf_generate_tokens_equal_greedy_loop"] = gen == hf_toks
                g["hf_generate_identical_to_ours"] = sum(1 for x, y in zip(ours_toks, gen) if x == y)
            except Exception as e:  # noqa: BLE001 - a cross-check only
                g["hf_generate_error"] = f"{type(e).__name__}: {e}"[:500]
            entry["greedy"] = g
            entry["seconds"] = round(time.time() - t0, 2)
            per_attn[attn] = (entry, ref)
            del model
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 - the first implementation is the comparison; the others are extras
            if attn == attn_list[0]:
                raise
            res.setdefault("hf_errors", {})[attn] = f"{type(e).__name__}: {e}"[:1000]
    res["hf"] = {k: v[0] for k, v in per_attn.items()}
    if len(per_attn) > 1:
        # HF's own implementation noise: the same weights under two attention implementations
        (a_name, (_, a_ref)), (b_name, (_, b_ref)) = list(per_attn.items())[:2]
        res["hf_noise_floor"] = {"between": [a_name, b_name],
                                 "prompt": {k: v for k, v in logits_report(a_ref[:P], b_ref[:P]).items() if k in ("max_abs_err", "mean_abs_err", "top1_agree_frac")},
                                 "decode": {k: v for k, v in logits_report(a_ref[P - 1:P - 1 + n], b_ref[P - 1:P - 1 + n]).items() if k in ("max_abs_err", "mean_abs_err", "top1_agree_frac")}}
    prim = res["hf"][attn_list[0]]
    pl, dl, g = prim["prompt_logits"], prim["decode_logits_teacher_forced"], prim["greedy"]
    near = pl["disagreements_all_near_tie"] and dl["disagreements_all_near_tie"]
    if g["first_divergence"] is not None:
        at = g.get("at_divergence", {})
        near = near and at.get("hf_margin_top1_top2", 1e9) <= NEAR_TIE_ERRORS * max(at.get("teacher_forced_row_err_max", 0), 1e-9)
    clean = pl["top1_agree"] == pl["rows"] and dl["top1_agree"] == dl["rows"] and g["first_divergence"] is None
    res["verdict"] = "identical" if clean else ("near-tie" if near else "MISMATCH")
    res["summary"] = {
        "prompt_max_abs_err": pl["max_abs_err"], "prompt_mean_abs_err": pl["mean_abs_err"], "prompt_top1": f"{pl['top1_agree']}/{pl['rows']}",
        "decode_max_abs_err": dl["max_abs_err"], "decode_top1": f"{dl['top1_agree']}/{dl['rows']}",
        "greedy_identical": f"{g['identical']}/{n}", "first_divergence": g["first_divergence"],
        "max_abs_logit": pl["max_abs_ref"],
    }
    return res


def versions():
    return torch_env.versions(('transformers', 'safetensors'))


def cmd_preflight(_a):
    """Exit 3 with one clear line when torch / transformers / CUDA are missing (what compare needs)."""
    torch_env.preflight('parity', 'cuda', ('transformers', 'safetensors'))


def fmt(x, f):
    return format(x, f) if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else "-"


def cmd_compare(a):
    import torch
    prompt_file = json.load(open(os.path.join(a.dir, "prompt.json")))
    prompt, n = prompt_file["prompt_ids"], prompt_file["max_tokens"]
    dtype = a.dtype or prompt_file.get("dtype", "bf16")
    if dtype == "f32":
        # plain IEEE float32 on the HF side: no TF32 in matmuls or convolutions
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    attn_list = [x for x in a.attn.split(",") if x]
    out = {"commit": a.meta_commit, "versions": versions(), "dtype": dtype, "prompt_len": len(prompt), "max_tokens": n,
           "attn_implementations": attn_list, "models": {}}
    t0 = time.time()
    torch.manual_seed(0)
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)

    def save():
        out["seconds"] = round(time.time() - t0, 1)
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)

    for name in a.models.split(","):
        try:
            out["models"][name] = compare_model(name, a.dir, prompt, n, ATTN_OVERRIDE.get(name, attn_list), dtype)
        except Exception as e:  # noqa: BLE001 - record and go on with the other models
            out["models"][name] = {"model": name, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
        save()  # after every model: a timeout keeps what was done
    # the table, last
    v = out["versions"]
    print(f"\nparity.json: {a.json} (commit {a.meta_commit or '?'}; torch {v.get('torch')}, transformers {v.get('transformers')}, {v.get('gpu')}); "
          f"{dtype}; prompt {len(prompt)} tokens + {n} greedy steps; HF attention {attn_list[0]} (noise floor vs {','.join(attn_list[1:]) or '-'})")
    for name, r in out["models"].items():
        if "error" in r:
            print(f"  {name}: ERROR {r['error'][:300]}")
            continue
        hf = r["hf"][ATTN_OVERRIDE.get(name, attn_list)[0]]
        for d in hf["prompt_logits"]["disagreements"][:3] + hf["decode_logits_teacher_forced"]["disagreements"][:3]:
            print(f"  {name}: top-1 differs at position {d['position']}: ours {d['ours_top']}, hf {d['hf_top']}, hf margin {d['hf_margin']:.4f}, row err {d['row_err_max']:.4f}{' (near-tie)' if d['near_tie'] else ''}")
        at = hf["greedy"].get("at_divergence")
        if at:
            print(f"  {name}: greedy diverges at step {at['step']}: ours {at['ours_token']}, hf {at['hf_token']}; hf margin {at['hf_margin_top1_top2']:.4f}, "
                  f"our gap {at['ours_logit_gap_ours_minus_hf_token']:.4f}, row err {at['teacher_forced_row_err_max']:.4f}")
        nf = r.get("hf_noise_floor")
        if nf:
            print(f"  {name}: HF {nf['between'][0]} vs {nf['between'][1]}: prompt max abs {nf['prompt']['max_abs_err']:.4f}, decode max abs {nf['decode']['max_abs_err']:.4f}")
    print(f"\n{'model':10s} {'prompt maxerr':>13s} {'meanerr':>8s} {'|logit|max':>10s} {'prompt top1':>11s} {'decode maxerr':>13s} {'decode top1':>11s} {'greedy':>7s} {'1st div':>7s} {'HF noise':>8s}  verdict")
    for name, r in out["models"].items():
        if "error" in r:
            print(f"{name:10s} ERROR (see parity.json)")
            continue
        s = r["summary"]
        nf = r.get("hf_noise_floor", {}).get("prompt", {}).get("max_abs_err")
        print(f"{name:10s} {fmt(s['prompt_max_abs_err'], '13.4f')} {fmt(s['prompt_mean_abs_err'], '8.5f')} {fmt(s['max_abs_logit'], '10.3f')} {s['prompt_top1']:>11s} "
              f"{fmt(s['decode_max_abs_err'], '13.4f')} {s['decode_top1']:>11s} {s['greedy_identical']:>7s} {str(s['first_divergence'] if s['first_divergence'] is not None else '-'):>7s} {fmt(nf, '8.4f')}  {r['verdict']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("configs")
    c.add_argument("--dir", required=True)
    c.add_argument("--prompt-len", type=int, default=200)
    c.add_argument("--max-tokens", type=int, default=64)
    c.add_argument("--window", type=int, default=64)
    c.add_argument("--seed", type=int, default=6)
    c.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="checkpoint and compute dtype of both sides")
    c.add_argument("--head-dim", type=int, choices=(64, 128), default=64, help="attention head size (the hidden size stays 1024)")
    sub.add_parser("preflight")
    m = sub.add_parser("compare")
    m.add_argument("--dir", required=True)
    m.add_argument("--json", required=True)
    m.add_argument("--models", default=",".join(MODELS))
    m.add_argument("--attn", default="sdpa,eager", help="HF attention implementations; the first is compared, the others give HF's own noise floor")
    m.add_argument("--meta-commit", default="")
    m.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="HF dtype [default: the one in WORK/prompt.json, else bf16]")
    a = ap.parse_args()
    {"configs": cmd_configs, "preflight": cmd_preflight, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
