# Shared set-up of the bench/h200*-*.sh scripts. Source it after `set -euo pipefail` and `here=<script dir>`:
#   source "$here/lib.sh"; fk_setup LABEL
# sets `bundle` ($FASTKERNELS_BUNDLE, the folder above the script inside dist/gpu-host/bench, or the repo's
# dist/gpu-host), `OUT` (created, absolute; default $bundle/bench-results), `PY` ($PYTHON, the GPU host's torch
# venv, or python3) and `commit` (the commit the bundle was built from, from its MANIFEST.json).
fk_setup() {
  local label="$1" c
  if [ -n "${FASTKERNELS_BUNDLE:-}" ]; then bundle="$FASTKERNELS_BUNDLE"
  elif [ -x "$here/../run-node" ]; then bundle="$(cd "$here/.." && pwd)"
  elif [ -x "$here/../dist/gpu-host/run-node" ]; then bundle="$(cd "$here/../dist/gpu-host" && pwd)"
  else echo "$label: cannot find the gpu-host bundle (run npm run gpu-host, or set FASTKERNELS_BUNDLE)" >&2; exit 1; fi
  OUT="${OUT:-$bundle/bench-results}"
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  PY="${PYTHON:-}"
  if [ -z "$PY" ]; then
    for c in /opt/torch/.venv/bin/python3 python3; do if command -v "$c" >/dev/null 2>&1; then PY="$c"; break; fi; done
  fi
  commit="$(sed -n 's/.*"commit": *"\([^"]*\)".*/\1/p' "$bundle/MANIFEST.json" 2>/dev/null | head -1 || true)"
}

# fk_lab_setup: what the nvcc labs run from the repository share (h200-gemv-lab.sh, h200-gemv-persistent.sh; no bundle):
# `OUT` (required, created) and `NVCC` ($NVCC, nvcc on the PATH, or the toolkit's).
fk_lab_setup() {
  OUT="${OUT:?set OUT to a folder for the logs}"
  mkdir -p "$OUT"
  NVCC="${NVCC:-nvcc}"
  command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
}

# fk_lab_build SRC BIN LOG ENTRY_RE: nvcc SRC (a bench/*.cu lab) for sm_90a into BIN, ptxas's report in LOG (printed and
# exit 1 when the build fails), then the register and spill lines of the kernels matching ENTRY_RE.
fk_lab_build() {
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v "$1" -o "$2" > "$3" 2>&1 || { cat "$3"; exit 1; }
  grep -A2 "Function properties for $4" "$3" | grep -E 'spill|registers' || true
}

# fk_llama_config FILE HIDDEN INTERMEDIATE LAYERS HEADS KV_HEADS HEAD_DIM VOCAB MAX_POS ROPE_THETA BOS EOS: an HF
# LlamaForCausalLM config.json of that shape (bf16, no biases, untied embeddings; the benches use random weights).
fk_llama_config() {
  mkdir -p "$(dirname "$1")"
  cat > "$1" <<JSON
{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": $2, "intermediate_size": $3,
  "num_hidden_layers": $4, "num_attention_heads": $5, "num_key_value_heads": $6, "head_dim": $7, "vocab_size": $8,
  "max_position_embeddings": $9, "rms_norm_eps": 1e-05, "rope_theta": ${10}, "hidden_act": "silu",
  "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "initializer_range": 0.02,
  "bos_token_id": ${11}, "eos_token_id": ${12}, "torch_dtype": "bfloat16", "use_cache": true
}
JSON
}

# fk_llama3_8b_config FILE [LAYERS]: the Llama-3-8B-shape config.json the 8B benches share.
fk_llama3_8b_config() { fk_llama_config "$1" 4096 14336 "${2:-32}" 32 8 128 128256 8192 500000.0 128000 128001; }

# fk_decode_setup LABEL: fk_setup, then what the bs-1 decode scripts share: `model` (the 8B-shape config folder under
# $OUT) and `script` (the bundle's bench-decode-profile.mjs; exit 2 when the bundle lacks it).
fk_decode_setup() {
  fk_setup "$1"
  model="$OUT/decode-profile-llama3-8b"
  fk_llama3_8b_config "$model/config.json"
  script="$bundle/bench-decode-profile.mjs"
  [ -f "$script" ] || { echo "$1: $script is missing (rebuild the bundle: npm run gpu-host)" >&2; exit 2; }
}

# fk_nccl_env: the 2-GPU scripts' NCCL settings. NVLink multicast stays off (the host's rule: it can take shared GPUs
# out of service), and FASTKERNELS_NCCL_LIB_DIRS points at PyTorch's libnccl wheel unless set (the same library torch
# runs, so the all-reduce comparison is like for like; discovery would find it too).
fk_nccl_env() {
  export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
  if [ -z "${FASTKERNELS_NCCL_LIB_DIRS:-}" ] && [ -n "${PY:-}" ]; then
    local wheel
    wheel="$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)"
    if [ -n "$wheel" ] && [ -e "$wheel/libnccl.so.2" ]; then export FASTKERNELS_NCCL_LIB_DIRS="$wheel"; fi
  fi
}
