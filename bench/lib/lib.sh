# What the bench suites and labs share. A suite's run.sh sources it after `set -euo pipefail` and `here=<its folder>`:
#   source "$here/../../lib/lib.sh"; fk_setup LABEL
# sets `bundle` ($FASTKERNELS_BUNDLE, else the bundle this file sits in (dist/gpu-host/bench/lib/), else the repo's
# dist/gpu-host), `drv` (the suite's folder inside the bundle: its esbuild-bundled drivers), `OUT` (created, absolute;
# default $bundle/bench-work), `PY` ($PYTHON, the GPU host's torch venv, or python3) and `commit` (the commit the
# bundle was built from, from its MANIFEST.json).
fk_lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fk_setup() {
  local label="$1" c
  if [ -n "${FASTKERNELS_BUNDLE:-}" ]; then bundle="$FASTKERNELS_BUNDLE"
  elif [ -x "$fk_lib/../../run-node" ]; then bundle="$(cd "$fk_lib/../.." && pwd)"
  elif [ -x "$fk_lib/../../dist/gpu-host/run-node" ]; then bundle="$(cd "$fk_lib/../../dist/gpu-host" && pwd)"
  else echo "$label: cannot find the gpu-host bundle (run npm run gpu-host, or set FASTKERNELS_BUNDLE)" >&2; exit 1; fi
  drv="$bundle/bench/suites/$(basename "$here")"
  OUT="${OUT:-$bundle/bench-work}"
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  PY="${PYTHON:-}"
  if [ -z "$PY" ]; then
    for c in /opt/torch/.venv/bin/python3 python3; do if command -v "$c" >/dev/null 2>&1; then PY="$c"; break; fi; done
  fi
  commit="$(sed -n 's/.*"commit": *"\([^"]*\)".*/\1/p' "$bundle/MANIFEST.json" 2>/dev/null | head -1 || true)"
}

# fk_lab_setup: what the nvcc labs (bench/labs/*/run.sh, run from the repository: no bundle) share:
# `OUT` (required, created) and `NVCC` ($NVCC, nvcc on the PATH, or the toolkit's).
fk_lab_setup() {
  OUT="${OUT:?set OUT to a folder for the logs}"
  mkdir -p "$OUT"
  NVCC="${NVCC:-nvcc}"
  command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
}

# fk_lab_build SRC BIN LOG ENTRY_RE: nvcc SRC (a bench/labs/*/*.cu lab) for sm_90a into BIN, ptxas's report in LOG (printed and
# exit 1 when the build fails), then the register and spill lines of the kernels matching ENTRY_RE.
fk_lab_build() {
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v "$1" -o "$2" > "$3" 2>&1 || { cat "$3"; exit 1; }
  grep -A2 "Function properties for $4" "$3" | grep -E 'spill|registers' || true
}

# fk_lab_cublas NOTE: `blas`, the nvcc flags that link cuBLAS for a lab: the toolkit's (-lcublas), else the pip wheel's
# (PyTorch's) headers and library, else none (NOTE is printed: the lab builds without cuBLAS and leaves its figures out).
fk_lab_cublas() {
  local wheel lib
  blas=(-lcublas)
  if ! echo '#include <cublas_v2.h>' | "$NVCC" -x cu -E - >/dev/null 2>&1; then
    wheel="$(python3 -c 'import nvidia.cublas, os; print(list(nvidia.cublas.__path__)[0])' 2>/dev/null || true)"
    lib="$( [ -n "$wheel" ] && ls "$wheel/lib" 2>/dev/null | grep -m1 '^libcublas\.so' || true)"
    if [ -n "$lib" ] && [ -e "$wheel/include/cublas_v2.h" ]; then
      blas=(-I"$wheel/include" -L"$wheel/lib" -l:"$lib" -Xlinker -rpath="$wheel/lib")
    else
      blas=()
      echo "$1"
    fi
  fi
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
# $OUT) and `script` (the bundle's decode-profile driver; exit 2 when the bundle lacks it).
fk_decode_setup() {
  fk_setup "$1"
  model="$OUT/decode-profile-llama3-8b"
  fk_llama3_8b_config "$model/config.json"
  script="$bundle/bench/suites/decode-profile/decode_profile.mjs"
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

# fk_device_name GPU_NAME COUNT: the results folder name of COUNT cards named GPU_NAME (nvidia-smi's name):
# "NVIDIA H200" 1 -> h200, "NVIDIA H100 80GB HBM3" 2 -> h100x2; another card -> its model word in lower case.
fk_device_name() {
  local name="$1" count="${2:-1}" d
  case "$name" in
    *H200*) d=h200 ;;
    *H100*) d=h100 ;;
    *B200*) d=b200 ;;
    *A100*) d=a100 ;;
    *) d="$(echo "$name" | sed -E 's/^NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9-')" ;;
  esac
  [ -n "$d" ] || d=unknown
  if [ "$count" -gt 1 ]; then echo "${d}x$count"; else echo "$d"; fi
}

# fk_detect_device GPUS: the device name of this host's first GPUS cards ("all": every visible one) from nvidia-smi
# (exit 2 naming --device when there is no nvidia-smi or it lists no GPU).
fk_detect_device() {
  local want="$1" names count
  names="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)"
  if [ -z "$names" ]; then echo "bench: no GPU found (nvidia-smi absent or lists none): pass --device NAME (e.g. h200)" >&2; return 2; fi
  count="$(echo "$names" | wc -l)"
  [ "$want" = all ] || count=$(( want < count ? want : count ))
  fk_device_name "$(echo "$names" | head -1)" "$count"
}
