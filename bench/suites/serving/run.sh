#!/usr/bin/env bash
# Issue 29 on the GPU host: `fastkernels serve` over HTTP, measured by `fastkernels bench-serve` (the load generator
# vLLM users know: TTFT / TPOT / ITL / e2e percentiles, throughput, goodput). Llama-3-8B shape, random bf16 weights on
# the device, a 128k byte-level tokenizer (tokenizer_128k.mjs) so answers are detokenised as a real model's are.
#   1. throughput: 256 requests, in/out U[100, 1024], all at once (target: >= 95% of the in-process serve throughput
#      of the same run, serve_llama.mjs's throughput phase, and >= 9,000 output tok/s)
#   2. rate: Poisson 4 req/s, 200 requests (targets: TTFT p50 < 40 ms, TPOT p50 < 8 ms; p90/p99 reported)
#   3. disconnect: 1,000 concurrent streaming clients, 10% leaving mid-stream (target: every other request completes,
#      KV usage back to 0, the server up, /metrics consistent)
#   4. HF transformers behind serve_hf_openai.py (one request at a time), measured by the same bench-serve on
#      --hf-prompts N (default 4; HF_NUM_PROMPTS still read) requests of the same workload, cut after --hf-timeout
#      S seconds (default 150: HF eager makes ~30 tok/s, a 1,000-token answer takes half a minute)
# Writes $OUT/serving.json after step 3 and again after step 4 (a cut HF step loses nothing measured before it); the
# last lines are the targets.
#   dist/gpu-host/bench/run serving [--no-hf] [--no-inprocess] [--hf-prompts N] [--hf-timeout S]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup serving
model="$OUT/serving-llama3-8b"
fk_llama3_8b_config "$model/config.json"
hf=1; inproc=1; hf_prompts="${HF_NUM_PROMPTS:-4}"; hf_timeout=150
while [ $# -gt 0 ]; do
  case "$1" in
    --no-hf) hf=0; shift ;;
    --no-inprocess) inproc=0; shift ;;
    --hf-prompts) hf_prompts="$2"; shift 2 ;;
    --hf-timeout) hf_timeout="$2"; shift 2 ;;
    *) echo "serving: unknown argument $1 (--no-hf, --no-inprocess, --hf-prompts N, --hf-timeout SECONDS)" >&2; exit 1 ;;
  esac
done
node_bin="$("$bundle/run" --print-node)"
"$node_bin" "$drv/tokenizer_128k.mjs" "$model"
echo "serving: bundle $bundle (commit ${commit:-?}), out $OUT"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# wait_port LOG PID: the port a server printed ("serving NAME on http://127.0.0.1:PORT/"), or exit when it died
wait_port() {
  local i
  for i in $(seq 1 900); do
    local p; p="$(grep -o 'on http://127\.0\.0\.1:[0-9]*' "$1" | head -1 | sed 's/.*://')" || true
    [ -n "$p" ] && { echo "$p"; return 0; }
    kill -0 "$2" 2>/dev/null || { echo "serving: the server exited; its log:" >&2; tail -30 "$1" >&2; return 1; }
    sleep 1
  done
  echo "serving: no server after 900 s" >&2; return 1
}

# 0. the in-process figure of the same run (the serve suite's throughput phase: same model, same workload)
if [ "$inproc" = 1 ] && [ -f "$bundle/bench/suites/serve/serve_llama.mjs" ]; then
  "$bundle/run-node" "$bundle/bench/suites/serve/serve_llama.mjs" --model "$model" --json "$OUT/serving-inprocess.json" --no-self-test || echo "serving: the in-process run failed" >&2
fi

# 1-3. our server
"$bundle/run" serve --model "$model" --random-init device --port 0 --max-num-seqs 256 --max-waiting 100000 > "$OUT/serving-server.log" 2>&1 &
pids+=($!); srv=$!
port="$(wait_port "$OUT/serving-server.log" "$srv")"
base="http://127.0.0.1:$port"
bs() { "$bundle/run" bench-serve --base-url "$base" --id-range 128000 --seed 0 "$@"; }
bs --num-prompts 256 --input-len 100:1024 --output-len 100:1024 --warmup 2 --json-out "$OUT/serving-throughput.json"
bs --num-prompts 200 --input-len 100:1024 --output-len 100:1024 --request-rate 4 --goodput ttft:40 tpot:8 --warmup 0 --json-out "$OUT/serving-rate4.json"
bs --num-prompts 1000 --input-len 100:300 --output-len 64:256 --disconnect-fraction 0.1 --warmup 0 --json-out "$OUT/serving-disconnect.json"
sleep 1
curl -s "$base/metrics" > "$OUT/serving-metrics-after.txt" || true
curl -s "$base/health" > "$OUT/serving-health-after.json" || true
kill -TERM "$srv"; wait "$srv" || true
"$node_bin" "$drv/merge.mjs" "$OUT"   # our figures are on disk before the (slow, optional) HF step

# 4. HF transformers behind a small server, the same client
if [ "$hf" = 1 ] && [ -n "$PY" ] && "$PY" -c 'import torch, transformers' 2>/dev/null; then
  hport=$((20000 + RANDOM % 20000))
  "$PY" "$here/serve_hf_openai.py" --config "$model/config.json" --port "$hport" > "$OUT/serving-hf-server.log" 2>&1 &
  pids+=($!); hsrv=$!
  hport="$(wait_port "$OUT/serving-hf-server.log" "$hsrv")"
  timeout "$hf_timeout" "$bundle/run" bench-serve --base-url "http://127.0.0.1:$hport" --id-range 128000 --seed 0 --num-prompts "$hf_prompts" --input-len 100:1024 --output-len 100:1024 --max-concurrency 1 --warmup 1 --json-out "$OUT/serving-hf.json" \
    || echo "serving: the HF run failed or was cut after $hf_timeout s (--hf-timeout); HF figures left out" >&2
  kill -TERM "$hsrv" || true
else
  echo "serving: HF comparison skipped (--no-hf, or no python with torch and transformers)" >&2
fi

"$node_bin" "$drv/merge.mjs" "$OUT"
