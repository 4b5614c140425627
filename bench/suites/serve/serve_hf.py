"""HF transformers on the serving bench's requests (issue 7: "HF transformers on the same requests for comparison").

Reads the workload JSONL that bench/serve_llama.mjs writes (one {"prompt_ids": [...], "output_len": N} per line),
builds the model from its config.json with random bf16 weights on the GPU (weights do not change the speed), and
serves the requests the way plain transformers can: static batches of requests sorted by prompt length, left-padded,
greedy, EOS ignored, every sequence of a batch decoding until the batch's longest output. Output tok/s counts only the
tokens each request asked for (the padding work of a static batch is the price HF pays). Stops starting new batches
after --time-limit seconds and reports what it finished, so the figure is a rate over the requests served.

  python3 serve_hf.py --config DIR/config.json --workload serve-workload.jsonl --json hf.json [--batch 64]
"""
import argparse
import json
import sys
from pathlib import Path
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--time-limit", type=float, default=150.0)
    ap.add_argument("--attn", default="sdpa")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoConfig
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))  # bench/lib: hf_random, shared with the other suite
    from hf_random import random_bf16_model

    reqs = []
    with open(a.workload) as f:
        for i, line in enumerate(f):
            if line.strip():
                r = json.loads(line)
                reqs.append((i, r["prompt_ids"], int(r["output_len"])))
    cfg = AutoConfig.from_pretrained(a.config)
    t0 = time.perf_counter()
    model = random_bf16_model(cfg, attn_implementation=a.attn)  # the weights of bench/e2e_llama.py's HF side
    model.generation_config.eos_token_id = None  # EOS ignored, as in our run
    model.generation_config.pad_token_id = 0
    load_s = time.perf_counter() - t0

    order = sorted(reqs, key=lambda r: len(r[1]))
    batches = [order[k:k + a.batch] for k in range(0, len(order), a.batch)]
    done_reqs = 0
    useful = 0
    generated = 0
    prompt_tokens = 0
    t_start = time.perf_counter()
    with torch.inference_mode():
        # warm-up: one tiny batch (kernel selection, allocator) outside the timed window
        ids = torch.tensor([order[0][1][:16]], device="cuda")
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4, do_sample=False)
        torch.cuda.synchronize()
        t_start = time.perf_counter()
        for b in batches:
            if time.perf_counter() - t_start > a.time_limit:
                break
            width = max(len(r[1]) for r in b)
            new = max(r[2] for r in b)
            ids = torch.zeros((len(b), width), dtype=torch.long, device="cuda")
            mask = torch.zeros((len(b), width), dtype=torch.long, device="cuda")
            for j, (_, p, _) in enumerate(b):
                ids[j, width - len(p):] = torch.tensor(p, device="cuda")
                mask[j, width - len(p):] = 1
            out = model.generate(ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False)
            torch.cuda.synchronize()
            generated += (out.shape[1] - width) * len(b)
            useful += sum(r[2] for r in b)
            prompt_tokens += sum(len(r[1]) for r in b)
            done_reqs += len(b)
    wall = time.perf_counter() - t_start
    res = {
        "side": "hf",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "attn_implementation": a.attn,
        "batch": a.batch,
        "requests": len(reqs),
        "requests_done": done_reqs,
        "complete": done_reqs == len(reqs),
        "output_tokens": useful,
        "generated_tokens": generated,
        "prompt_tokens": prompt_tokens,
        "wall_seconds": wall,
        "output_tok_s": useful / wall if wall > 0 else None,
        "load_seconds": load_s,
        "method": "static batches sorted by prompt length, left-padded, greedy, EOS ignored; output tok/s counts each request's own tokens",
    }
    with open(a.json, "w") as f:
        json.dump(res, f, indent=2)
    print(f"serve-hf: {done_reqs}/{len(reqs)} requests, {useful} output tokens in {wall:.1f} s = {res['output_tok_s']:.0f} tok/s (batch {a.batch}, {a.attn})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
