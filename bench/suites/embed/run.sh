#!/usr/bin/env bash
# Issue 35's offline embedding speed on the GPU host: BGE-M3's real shape (XLM-RoBERTa large: 24 layers, hidden 1024,
# 16 heads, intermediate 4096, vocab 250002; random bf16 weights) embedding N documents with lengths U[32, 512]
# (seeded token ids, the same on both sides; N = 10000, --quick 1000), dense vectors on the host:
#   ours  embed.mjs: the encoder runner's packed varlen path (requests packed under --max-num-batched-tokens, cu_seqlens,
#         flash_attn_varlen, the dense head; weights filled on the device), sequences/s and tokens/s
#   HF    embed_hf.py: XLMRobertaModel, sdpa, padded batches of 64 sorted by length, bf16; then under torch.compile
# merged by merge.mjs into $OUT/embed.json; the last lines are issue 35's targets (>= 2x HF sdpa, >= 1.2x compile).
#   dist/gpu-host/bench/run embed [--quick] [--n N] [--max-num-batched-tokens T] [--no-hf] [--no-compile]
# Each side runs under a timeout (OURS_TIMEOUT=300, HF_TIMEOUT=360 s; HF_TIME_LIMIT=120 s a pass) and writes its JSON as
# it goes, so the merge always comes. Budget: about 1 min ours, 2-5 min HF (torch.compile's compile included).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup embed
hf=1; hf_args=(); args=()
for x in "$@"; do
  case "$x" in
    --no-hf) hf=0 ;;
    --no-compile) hf_args+=(--no-compile) ;;
    *) args+=("$x") ;;
  esac
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
rm -f "$OUT/embed_ours.json" "$OUT/embed_hf.json" "$OUT/embed-workload.jsonl"
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
"$("$bundle/run" --print-node)" "$here/merge.mjs" "$OUT/embed_ours.json" "$OUT/embed_hf.json" "$OUT/embed.json" "${commit:-}"
echo "embed: total $((SECONDS - t0)) s"
