#!/usr/bin/env bash
# Issue 35's offline embedding speed on the GPU host: BGE-M3's real shape (XLM-RoBERTa large: 24 layers, hidden 1024,
# 16 heads, intermediate 4096, vocab 250002; random bf16 weights) embedding N documents with lengths U[32, 512]
# (seeded token ids, the same on both sides; N = 10000, --quick 1000), dense vectors on the host:
#   ours  embed.mjs: the encoder runner's packed varlen path (requests packed under --max-num-batched-tokens, cu_seqlens,
#         flash_attn_varlen, the dense head; weights filled on the device), sequences/s and tokens/s
#   HF    embed_hf.py: XLMRobertaModel, sdpa, padded batches of 64 sorted by length, bf16; then under torch.compile
#   serve `serve` on the same model folder (random bf16 weights filled on the device), then bench-serve --endpoint
#         embeddings: 64 concurrent clients, one document a request (base64, as the openai clients ask), over the same
#         workload file in order, after a warm-up pass of its first 1024 documents (not recorded): req/s, tokens/s,
#         latency percentiles ($OUT/embed_serve.json)
# merged by merge.mjs into $OUT/embed.json; the last lines are issue 35's targets (>= 2x HF sdpa, >= 1.2x compile,
# serving >= 0.9x the offline tokens/s of the same run).
#   dist/gpu-host/bench/run embed [--quick] [--n N] [--max-num-batched-tokens T] [--no-hf] [--no-compile] [--no-serve]
#                                 [--serve-port 8765]
# Each step runs under a timeout (OURS_TIMEOUT=300, HF_TIMEOUT=360 s; HF_TIME_LIMIT=120 s a pass; SERVE_START_TIMEOUT=180
# s for the server to answer /health, SERVE_TIMEOUT=300 s a bench-serve pass) and writes its JSON as it goes; the merge
# runs after the offline sides and again after the serving step, so no figure is lost to a later one. Budget: about
# 1 min ours, 2-5 min HF (torch.compile's compile included), 1-2 min serving.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup embed
hf=1; serve=1; serve_port=8765; tokens_per_forward=16384; serve_clients=64; hf_args=(); args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-hf) hf=0 ;;
    --no-compile) hf_args+=(--no-compile) ;;
    --no-serve) serve=0 ;;
    --serve-port) serve_port="${2:?--serve-port needs a port}"; shift ;;
    --max-num-batched-tokens) tokens_per_forward="${2:?--max-num-batched-tokens needs a value}"; args+=("$1" "$2"); shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
echo "embed: bundle $bundle (commit ${commit:-?}), python $PY, out $OUT"
model="$OUT/embed-bge-m3"
mkdir -p "$model"
cat > "$model/config.json" <<'JSON'
{
  "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "vocab_size": 250002, "hidden_size": 1024,
  "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096, "hidden_act": "gelu",
  "max_position_embeddings": 8194, "type_vocab_size": 1, "layer_norm_eps": 1e-05, "pad_token_id": 1, "bos_token_id": 0,
  "eos_token_id": 2, "position_embedding_type": "absolute", "initializer_range": 0.02, "torch_dtype": "bfloat16"
}
JSON
rm -f "$OUT/embed_ours.json" "$OUT/embed_hf.json" "$OUT/embed-workload.jsonl" "$OUT/embed_serve.json" "$OUT/embed_serve_warmup.json"
t0=$SECONDS
timeout "${OURS_TIMEOUT:-300}" "$bundle/run-node" "$drv/embed.mjs" --model "$model" --json "$OUT/embed_ours.json" --workload "$OUT/embed-workload.jsonl" ${args[@]+"${args[@]}"} \
  || echo "embed: ours exited with $? (partial results, if any, are kept)" >&2
echo "embed: ours took $((SECONDS - t0)) s"
if [ "$hf" = 1 ] && [ -s "$OUT/embed-workload.jsonl" ]; then
  if [ -n "$PY" ] && "$PY" -c 'import torch, transformers' 2>/dev/null; then
    t1=$SECONDS
    timeout "${HF_TIMEOUT:-360}" "$PY" "$here/embed_hf.py" --config "$model/config.json" --workload "$OUT/embed-workload.jsonl" --json "$OUT/embed_hf.json" \
      --batch 64 --time-limit "${HF_TIME_LIMIT:-120}" ${hf_args[@]+"${hf_args[@]}"} \
      || echo "embed: HF exited with $? (partial results, if any, are kept)" >&2
    echo "embed: HF took $((SECONDS - t1)) s"
  else
    echo "embed: no python with torch and transformers (PYTHON=...): HF comparison skipped" >&2
  fi
fi
node="$("$bundle/run" --print-node)"
merge() { "$node" "$here/merge.mjs" "$OUT/embed_ours.json" "$OUT/embed_hf.json" "$OUT/embed.json" "${commit:-}" --serve "$OUT/embed_serve.json"; }
merge
if [ "$serve" = 1 ] && [ -s "$OUT/embed-workload.jsonl" ]; then
  # /v1/embeddings under 64 clients over the same documents; the offline figures above are already in embed.json
  t2=$SECONDS
  docs=$(grep -c . "$OUT/embed-workload.jsonl")
  warm=$(( docs < 1024 ? docs : 1024 ))
  base="http://127.0.0.1:$serve_port"
  "$bundle/run" serve --model "$model" --backend cuda --dtype bf16 --port "$serve_port" --max-num-batched-tokens "$tokens_per_forward" > "$OUT/embed-serve.log" 2>&1 &
  spid=$!
  up=0
  for _ in $(seq 1 "${SERVE_START_TIMEOUT:-180}"); do
    kill -0 "$spid" 2>/dev/null || break
    if "$node" -e "fetch('$base/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))" 2>/dev/null; then up=1; break; fi
    sleep 1
  done
  if [ "$up" = 1 ]; then
    echo "embed: serving on $base after $((SECONDS - t2)) s; bench-serve: $warm warm-up documents, then $docs from $serve_clients clients"
    bs=("$bundle/run" bench-serve --endpoint embeddings --base-url "$base" --dataset token-ids --dataset-path "$OUT/embed-workload.jsonl"
        --max-concurrency "$serve_clients" --warmup 0 --encoding-format base64 --timeout 120)
    timeout "${SERVE_TIMEOUT:-300}" "${bs[@]}" --num-prompts "$warm" --json-out "$OUT/embed_serve_warmup.json" > /dev/null \
      || echo "embed: the serving warm-up pass exited with $?" >&2
    timeout "${SERVE_TIMEOUT:-300}" "${bs[@]}" --num-prompts "$docs" --json-out "$OUT/embed_serve.json" \
      || echo "embed: bench-serve exited with $? (the serving figure, if any, is kept)" >&2
  else
    echo "embed: the server did not answer /health within ${SERVE_START_TIMEOUT:-180} s or exited: serving skipped; $OUT/embed-serve.log's tail:" >&2
    tail -n 20 "$OUT/embed-serve.log" >&2 || true
  fi
  # SIGTERM drains (nothing is in flight now); SIGKILL if it is still there after 30 s
  kill -TERM "$spid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$spid" 2>/dev/null || break; sleep 1; done
  kill -KILL "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  echo "embed: serving took $((SECONDS - t2)) s"
  merge
fi
echo "embed: total $((SECONDS - t0)) s"
