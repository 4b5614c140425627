#!/usr/bin/env bash
# Issue 7 benchmark on the GPU host: the production path (LLMEngine: continuous batching, chunked prefill, CUDA-graph
# decode) on a Llama-3-8B shape with random bf16 weights filled on the device. One run of serve_llama.mjs:
# bs-1 decode tok/s (target >= 240), host time per decode step at bs 64 (target < 5%), the 256-request nano-vllm-shaped
# workload's output tok/s (target >= 9,000) and the e2e self-test (100% greedy agreement). Then HF transformers on the
# same requests (serve_hf.py: static batches, random bf16 weights; HF_TIME_LIMIT s, default 150), merged into
# serve.json as `hf`. Writes $OUT/serve.json; the last lines are the targets. Budget: < 6 minutes without HF, about
# 9 with it (--quick: 64 requests, shorter self-test).
#   dist/gpu-host/bench/run serve [--quick] [--no-self-test] [--no-graphs] [--no-hf]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup serve
model="$OUT/serve-llama3-8b"
fk_llama3_8b_config "$model/config.json"
hf=1; args=()
for x in "$@"; do if [ "$x" = --no-hf ]; then hf=0; else args+=("$x"); fi; done
echo "serve: bundle $bundle (commit ${commit:-?}), out $OUT"
t0=$SECONDS
"$bundle/run-node" "$drv/serve_llama.mjs" --model "$model" --json "$OUT/serve.json" "${args[@]}"
echo "serve: took $((SECONDS - t0)) s; $OUT/serve.json"

if [ "$hf" = 1 ] && [ -f "$OUT/serve-workload.jsonl" ]; then
  if [ -n "$PY" ] && "$PY" -c 'import torch, transformers' 2>/dev/null; then
    t1=$SECONDS
    if "$PY" "$here/serve_hf.py" --config "$model/config.json" --workload "$OUT/serve-workload.jsonl" --json "$OUT/serve-hf.json" --time-limit "${HF_TIME_LIMIT:-150}"; then
      # merge into serve.json, with ours / HF on the same requests
      "$("$bundle/run" --print-node)" -e '
        const fs = require("node:fs");
        const [serve, hfFile] = process.argv.slice(1);
        const s = JSON.parse(fs.readFileSync(serve, "utf8"));
        const h = JSON.parse(fs.readFileSync(hfFile, "utf8"));
        const ours = s.phases && s.phases.throughput && s.phases.throughput.outputTokS;
        s.hf = { ...h, oursOverHf: ours && h.output_tok_s ? ours / h.output_tok_s : null };
        fs.writeFileSync(serve, JSON.stringify(s, null, 2));
        console.log(`serve: 256-request workload, ours ${ours ? ours.toFixed(0) : "?"} output tok/s, HF ${h.output_tok_s ? h.output_tok_s.toFixed(0) : "?"} (${h.requests_done}/${h.requests} requests): ${s.hf.oursOverHf ? s.hf.oursOverHf.toFixed(2) + "x" : "-"}`);
      ' "$OUT/serve.json" "$OUT/serve-hf.json"
    else
      echo "serve: the HF run failed (see above); serve.json has no hf field" >&2
    fi
    echo "serve: HF took $((SECONDS - t1)) s"
  else
    echo "serve: no python with torch and transformers (PYTHON=...): HF comparison skipped" >&2
  fi
fi
