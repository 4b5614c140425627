#!/usr/bin/env bash
# Issue 6 GPU parity on the GPU host: our Llama-family engine (the bundled CLI, --backend cuda) against HF
# transformers on the same random bf16 checkpoints (llama with llama3 rope scaling, qwen2 with q/k/v bias and tied
# embeddings, mistral with a sliding window smaller than the sequence). Writes $OUT/parity.json; the table is last.
#   dist/gpu-host/bench/run parity [--models llama,qwen2,mistral] [--prompt-len 200] [--max-tokens 64]
#                                                   [--dtype bf16|f32] [--head-dim 64|128] [--backend cuda|cpu]
# --models also takes the other families' causal LMs: mixtral, qwen3_moe (MoE), qwen3_next (gated DeltaNet + gated
# attention), gpt_oss (sinks, YaRN, alternating windows; HF's eager attention). --backend cpu runs our side on the CPU
# backend (a family whose CUDA kernels do not exist yet; slow: use --dtype f32 and a short --prompt-len); HF stays on
# the GPU. MoE routing in bf16 can flip an expert on a near-tie: --dtype f32 is the sharper check there.
# --head-dim 128: 8 / 2 heads of 128 (Llama-3's head size, which the wgmma prefill kernel takes on the H200) instead of
# 16 / 4 of 64; writes $OUT/parity-hd128.json (parity-f32-hd128.json with --dtype f32).
# --dtype f32: checkpoints, our engine and HF all in float32 (TF32 off in torch), so bf16 near-ties cannot make
# greedy decoding diverge; writes $OUT/parity-f32.json (work files in $OUT/parity-work-f32). bf16 is the default.
# Steps: configs (parity.py configs), init-weights (our CLI, CPU), preflight (torch + CUDA), generate --backend cuda
# per model (--logits-out with --prompt-logits), parity.py compare. A model whose generate fails is recorded with
# its stderr in parity.json and the others still run. Work files: $OUT/parity-work (WORK=... to move them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup parity
models="llama,qwen2,mistral"; plen=200; ntok=64; dtype=bf16; hd=64; backend=cuda
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --prompt-len) plen="$2"; shift 2 ;;
    --max-tokens) ntok="$2"; shift 2 ;;
    --dtype) dtype="$2"; shift 2 ;;
    --head-dim) hd="$2"; shift 2 ;;
    --backend) backend="$2"; shift 2 ;;
    *) echo "parity: unknown argument $1" >&2; exit 1 ;;
  esac
done
case "$dtype" in
  bf16) WORK="${WORK:-$OUT/parity-work}"; json="$OUT/parity.json" ;;
  f32) WORK="${WORK:-$OUT/parity-work-f32}"; json="$OUT/parity-f32.json" ;;
  *) echo "parity: --dtype must be bf16 or f32, got $dtype" >&2; exit 1 ;;
esac
case "$backend" in
  cuda) ;;
  cpu) WORK="$WORK-cpu"; json="${json%.json}-cpu.json" ;;
  *) echo "parity: --backend must be cuda or cpu, got $backend" >&2; exit 1 ;;
esac
case "$hd" in
  64) ;;
  128) WORK="$WORK-hd128"; json="${json%.json}-hd128.json" ;;
  *) echo "parity: --head-dim must be 64 or 128, got $hd" >&2; exit 1 ;;
esac
echo "parity: bundle $bundle (commit ${commit:-?}), python $PY, dtype $dtype, ours on $backend, out $OUT, work $WORK"
t0=$SECONDS

"$PY" "$here/parity.py" configs --dir "$WORK" --prompt-len "$plen" --max-tokens "$ntok" --dtype "$dtype" --head-dim "$hd"
ids="$("$PY" -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$WORK/prompt.json")"

IFS=',' read -r -a mlist <<< "$models"
pids=()
for m in "${mlist[@]}"; do
  echo "parity: init-weights $m (seed 1, $dtype)"
  "$bundle/run" init-weights --config "$WORK/$m/config.json" --out "$WORK/$m/ckpt" --seed 1 --dtype "$dtype" --json > "$WORK/$m/init.json" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "parity: init-weights failed (exit $?)" >&2; exit 1; }; done
echo "parity: checkpoints written ($((SECONDS - t0)) s)"

# Everything below needs the GPU: fail here, clearly, when torch or CUDA is missing.
"$PY" "$here/parity.py" preflight || { echo "parity: stopping before the GPU steps (see the PREFLIGHT line above)" >&2; exit 3; }

for m in "${mlist[@]}"; do
  echo "parity: generate $m on $backend ($plen prompt tokens, $ntok greedy steps)"
  rm -f "$WORK/$m/ours.json" "$WORK/$m/ours_logits.safetensors"
  s=$SECONDS
  if timeout "${GEN_TIMEOUT:-150}" "$bundle/run" generate --model "$WORK/$m/ckpt" --backend "$backend" --dtype "$dtype" --prompt-ids "$ids" --max-tokens "$ntok" --temperature 0 \
       --json --logits-out "$WORK/$m/ours_logits.safetensors" --prompt-logits > "$WORK/$m/ours.json" 2> "$WORK/$m/ours.stderr"; then
    echo "parity:   ok ($((SECONDS - s)) s)"
  else
    rc=$?
    echo "parity:   FAILED (exit $rc); stderr tail:" >&2
    tail -n 20 "$WORK/$m/ours.stderr" >&2 || true
    rm -f "$WORK/$m/ours.json"
  fi
done

timeout "${COMPARE_TIMEOUT:-200}" "$PY" "$here/parity.py" compare --dir "$WORK" --json "$json" --dtype "$dtype" --models "$models" --meta-commit "$commit"
echo "parity: total $((SECONDS - t0)) s"
