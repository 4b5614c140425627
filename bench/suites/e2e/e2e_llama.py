#!/usr/bin/env python3
"""Issue 6 end-to-end benchmark, HF side: the same Llama config in transformers (bf16, random weights created and
initialised on the GPU: from_config under torch.device('cuda'), matrices N(0, 0.02^2), norms 1), eager PyTorch
(no torch.compile, no CUDA graphs), per attention implementation:
  prefill  1 x --prefill-len: model(ids, use_cache=True, logits_to_keep=1), as generate's first step
  decode   B prompts of --decode-prompt tokens, then --decode-steps greedy steps with the KV cache (argmax and a
           host read of the tokens every step, as generate's stopping check does): B * steps / time
Warm-up before each measurement; the median of --repeats. Writes --json after every measurement.
  e2e_llama.py --model DIR_WITH_CONFIG_JSON --json out.json [--attn sdpa,eager] [--batches 1,32] [--budget-s 150]
"""
import argparse
import json
import os
import sys
from pathlib import Path
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="folder with config.json")
    ap.add_argument("--json", required=True)
    ap.add_argument("--prefill-len", type=int, default=4096)
    ap.add_argument("--decode-prompt", type=int, default=128)
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--attn", default="sdpa,eager")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=150.0, help="skip what is left once this many seconds have passed")
    a = ap.parse_args()
    t_start = time.time()

    import torch
    import transformers
    from transformers import AutoConfig
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))  # bench/lib: hf_random, shared with the other suite
    from hf_random import random_bf16_model

    if not torch.cuda.is_available():
        print("e2e-llama.py: torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    batches = [int(x) for x in a.batches.split(",") if x]
    res = {"side": "hf", "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
                                      "python": sys.version.split()[0]},
           "device": torch.cuda.get_device_name(0), "settings": vars(a), "runs": {}, "errors": [], "skipped": []}

    def save():
        res["seconds"] = round(time.time() - t_start, 1)
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)

    def log(m):
        print(f"e2e-llama.py: {m}", file=sys.stderr, flush=True)

    cfg = AutoConfig.from_pretrained(a.model)
    t0 = time.time()
    model = random_bf16_model(cfg)
    res["init_s"] = round(time.time() - t0, 2)
    res["params"] = sum(p.numel() for p in model.parameters())
    log(f"{type(model).__name__} with {res['params'] / 1e9:.2f} B params on the GPU in {res['init_s']} s")
    V = cfg.vocab_size
    gen = torch.Generator(device="cuda").manual_seed(1)
    rand_ids = lambda b, n: torch.randint(3, V, (b, n), device="cuda", generator=gen)  # noqa: E731

    def fwd(ids, **kw):
        try:
            return model(input_ids=ids, use_cache=True, logits_to_keep=1, **kw)
        except TypeError:
            return model(input_ids=ids, use_cache=True, **kw)

    def timed(fn):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3, out

    def set_attn(name):
        try:
            model.set_attn_implementation(name)
        except AttributeError:
            model.config._attn_implementation = name
        return getattr(model.config, "_attn_implementation", name)

    def over_budget(what):
        if time.time() - t_start > a.budget_s:
            res["skipped"].append(what)
            log(f"skipping {what}: past the {a.budget_s:.0f} s budget")
            return True
        return False

    for attn in [x for x in a.attn.split(",") if x]:
        try:
            got = set_attn(attn)
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"run": attn, "error": f"{type(e).__name__}: {e}"})
            continue
        runs = res["runs"].setdefault(attn, {"attn_implementation": got})
        with torch.no_grad():
            if not over_budget(f"{attn} prefill"):
                try:
                    x = rand_ids(1, a.prefill_len)
                    timed(lambda: fwd(x))
                    ms = sorted(timed(lambda: fwd(x))[0] for _ in range(a.repeats))
                    m = ms[len(ms) // 2]
                    runs["prefill"] = {"batch": 1, "promptLen": a.prefill_len, "ms": m, "samplesMs": ms, "tokensPerS": a.prefill_len / m * 1e3}
                    log(f"{attn} prefill 1x{a.prefill_len}: {m:.1f} ms, {runs['prefill']['tokensPerS']:.0f} tok/s")
                except Exception as e:  # noqa: BLE001
                    res["errors"].append({"run": f"{attn} prefill", "error": f"{type(e).__name__}: {e}"[:1000]})
                    log(f"{attn} prefill FAILED: {e}")
                torch.cuda.empty_cache()
                save()
            for B in batches:
                if over_budget(f"{attn} decode bs{B}"):
                    continue
                try:
                    samples = []
                    for r in range(a.repeats + 1):
                        out = fwd(rand_ids(B, a.decode_prompt))
                        tok = out.logits[:, -1].argmax(-1, keepdim=True)
                        pkv = out.past_key_values
                        torch.cuda.synchronize()
                        t = time.perf_counter()
                        for _ in range(a.decode_steps):
                            out = model(input_ids=tok, past_key_values=pkv, use_cache=True)
                            pkv = out.past_key_values
                            tok = out.logits[:, -1].argmax(-1, keepdim=True)
                            tok.cpu()  # generate's per-step host check
                        torch.cuda.synchronize()
                        ms = (time.perf_counter() - t) * 1e3
                        if r > 0:
                            samples.append(ms)
                        del out, pkv
                    samples.sort()
                    m = samples[len(samples) // 2]
                    runs[f"decode_bs{B}"] = {"batch": B, "promptLen": a.decode_prompt, "steps": a.decode_steps, "ms": m, "samplesMs": samples,
                                             "msPerStep": m / a.decode_steps, "tokensPerS": B * a.decode_steps / m * 1e3}
                    log(f"{attn} decode bs{B}: {m / a.decode_steps:.2f} ms/step, {runs[f'decode_bs{B}']['tokensPerS']:.1f} tok/s")
                except Exception as e:  # noqa: BLE001
                    res["errors"].append({"run": f"{attn} decode bs{B}", "error": f"{type(e).__name__}: {e}"[:1000]})
                    log(f"{attn} decode bs{B} FAILED: {e}")
                torch.cuda.empty_cache()
                save()
    res["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    save()
    log(f"done in {res['seconds']} s: {a.json}")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
