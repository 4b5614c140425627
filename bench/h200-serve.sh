#!/usr/bin/env bash
# Issue 7 benchmark on the GPU host: the production path (LLMEngine: continuous batching, chunked prefill, CUDA-graph
# decode) on a Llama-3-8B shape with random bf16 weights filled on the device. One run of bench-serve-llama.mjs:
# bs-1 decode tok/s (target >= 240), host time per decode step at bs 64 (target < 5%), the 256-request nano-vllm-shaped
# workload's output tok/s (target >= 9,000) and the e2e self-test (100% greedy agreement). Writes $OUT/serve.json;
# the last lines are the targets. Budget: < 6 minutes (--quick: 64 requests, shorter self-test).
#   OUT=/tmp/out dist/gpu-host/bench/h200-serve.sh [--quick] [--no-self-test] [--no-graphs]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
fk_setup serve
model="$OUT/serve-llama3-8b"
mkdir -p "$model"
cat > "$model/config.json" <<'JSON'
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "vocab_size": 128256,
  "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "hidden_act": "silu",
  "attention_bias": false,
  "mlp_bias": false,
  "tie_word_embeddings": false,
  "initializer_range": 0.02,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "torch_dtype": "bfloat16",
  "use_cache": true
}
JSON
echo "serve: bundle $bundle (commit ${commit:-?}), out $OUT"
t0=$SECONDS
"$bundle/run-node" "$bundle/bench-serve-llama.mjs" --model "$model" --json "$OUT/serve.json" "$@"
echo "serve: took $((SECONDS - t0)) s; $OUT/serve.json"
