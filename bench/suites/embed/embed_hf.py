"""HF transformers on the embed suite's documents (issue 35: "HF transformers sdpa with padded batches of 64, the usual way
to run it", and under torch.compile, in the same run).

Reads the workload JSONL that embed.mjs writes (one {"input_ids": [...]} a line), builds XLMRobertaModel (no pooler)
from the BGE-M3-shape config.json with random bf16 weights on the GPU (matrices N(0, 0.02^2), vectors 1: the values do
not change the speed), and embeds the documents as FlagEmbedding / sentence-transformers do: sorted by length
(longest first), padded batches of --batch with the attention mask, the dense vector = normalize(last_hidden_state[:,
0]) copied to the host. tokens/s counts the documents' tokens, not the padding (the padding is the price a padded
batch pays). Runs: 'sdpa' (eager modules, attn_implementation sdpa: PyTorch's default SDPA dispatch), then 'compile'
(torch.compile(dynamic=True) of the same model; its compile and warm-up time reported, excluded). Each run stops
starting batches after --time-limit seconds and reports the rate over what it finished.

  python3 embed_hf.py --config DIR/config.json --workload docs.jsonl --json hf.json [--batch 64] [--no-compile]
"""
import argparse
import json
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--warmup", type=int, default=4, help="batches run before each timed pass")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--device", default="cuda", help="cuda (the measurement); cpu only to smoke-test the script")
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import AutoConfig, AutoModel, XLMRobertaModel

    docs = []
    with open(a.workload) as f:
        for line in f:
            if line.strip():
                docs.append(json.loads(line)["input_ids"])
    tokens = sum(len(d) for d in docs)
    result = {
        "side": "hf", "device": torch.cuda.get_device_name(0) if a.device == "cuda" else a.device,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "settings": {"batch": a.batch, "timeLimitS": a.time_limit, "attn": "sdpa", "dtype": "bfloat16", "sorted": "longest first"},
        "workload": {"n": len(docs), "tokens": tokens, "minLen": min(map(len, docs)), "maxLen": max(map(len, docs))},
        "runs": {}, "skipped": [], "errors": [],
    }

    def save():
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)

    save()
    cfg = AutoConfig.from_pretrained(a.config)
    pad = cfg.pad_token_id if cfg.pad_token_id is not None else 1
    model = None
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    with torch.device(a.device):
        # transformers 5 names it dtype, 4 torch_dtype; add_pooling_layer=False as the embedding heads run it
        for kw in ({"dtype": torch.bfloat16}, {"torch_dtype": torch.bfloat16}, {}):
            try:
                model = AutoModel.from_config(cfg, attn_implementation="sdpa", add_pooling_layer=False, **kw)
                break
            except TypeError:
                continue
    if not isinstance(model, XLMRobertaModel):
        raise SystemExit(f"embed-hf: {a.config} built {type(model).__name__}, not XLMRobertaModel")
    model = model.to(device=a.device, dtype=torch.bfloat16).eval()
    g = torch.Generator(device=a.device).manual_seed(0)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=g)
    sync()

    order = sorted(range(len(docs)), key=lambda i: -len(docs[i]))
    batches = [order[k:k + a.batch] for k in range(0, len(order), a.batch)]

    def tensors(batch):
        S = max(len(docs[i]) for i in batch)
        ids = torch.full((len(batch), S), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), S), dtype=torch.long)
        for r, i in enumerate(batch):
            ids[r, :len(docs[i])] = torch.tensor(docs[i])
            mask[r, :len(docs[i])] = 1
        return ids.to(a.device, non_blocking=True), mask.to(a.device, non_blocking=True), len(batch) * S

    def embed(fn, batch):
        ids, mask, padded = tensors(batch)
        h = fn(input_ids=ids, attention_mask=mask).last_hidden_state
        F.normalize(h[:, 0].float(), dim=-1).cpu()  # the dense vectors on the host, as ours
        return padded

    def run(name, fn):
        t_warm = time.perf_counter()
        with torch.inference_mode():
            # warm-up: the longest, a middle and the shortest batches (kernel selection; compile's shapes)
            picks = sorted({0, len(batches) // 2, len(batches) - 1})[: max(1, a.warmup)]
            for k in picks:
                embed(fn, batches[k])
            sync()
            warm_s = time.perf_counter() - t_warm
            t0 = time.perf_counter()
            done = padded = toks = 0
            for b in batches:
                if time.perf_counter() - t0 > a.time_limit:
                    break
                padded += embed(fn, b)
                toks += sum(len(docs[i]) for i in b)
                done += len(b)
            sync()
            s = time.perf_counter() - t0
        r = {"seconds": s, "docs": done, "tokens": toks, "paddedTokens": padded, "seqPerS": done / s, "tokPerS": toks / s, "warmupS": warm_s}
        if name == "compile":
            r["compileS"] = warm_s
        result["runs"][name] = r
        save()
        print(f"embed-hf {name}: {done}/{len(docs)} docs in {s:.2f} s: {r['seqPerS']:.1f} seq/s, {r['tokPerS']:.0f} tokens/s ({padded} padded tokens; warm-up {warm_s:.1f} s)", flush=True)

    try:
        run("sdpa", model)
    except Exception as e:  # noqa: BLE001 - reported in the JSON, the merge still runs
        result["errors"].append({"run": "sdpa", "error": repr(e)[:2000]})
        save()
    if a.no_compile:
        result["skipped"].append("compile")
    else:
        try:
            run("compile", torch.compile(model, dynamic=True))
        except Exception as e:  # noqa: BLE001
            result["errors"].append({"run": "compile", "error": repr(e)[:2000]})
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
