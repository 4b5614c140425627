#!/usr/bin/env bash
# Encoder parity on the GPU host (issues 33, 35): our encoder runner (the bundled CLI's `embed`) against HF
# transformers on the same random checkpoints: XLM-RoBERTa (BGE-M3's encoder), CLIP's text encoder and T5's encoder
# (FLUX's): per input, the first row and the mean of the last hidden states, L2-normalised, on both sides: cosine and
# max abs error. And the embedding heads (heads_parity.py): BGE-M3's dense / sparse / multi-vector and ColBERTv2's
# multi-vectors against HF XLMRobertaModel / BertModel + the plain-PyTorch heads of bench/reference (f32: cosine >=
# 0.99999; bf16 / f16: within --bound-factor x HF's own eager-vs-sdpa difference). Writes $OUT/encoder-parity.json
# (f32) or $OUT/encoder-parity-<dtype>.json (bf16, f16: bench/run records each under its own name); the tables are last.
#   dist/gpu-host/bench/run encoder-parity [--models xlm_roberta,clip_text,t5_encoder,bge_m3,colbertv2]
#                                          [--dtype f32|bf16|f16] [--backend cuda|cpu] [--n 16] [--bound-factor 2]
# Steps: configs (encoder_parity.py configs), init-weights (our CLI, CPU), preflight (torch + CUDA), embed per model
# (cls and mean; the head rows: one run with their poolings), encoder_parity.py compare. A model whose embed fails is
# recorded with its stderr and the others still run. Work files: $OUT/encoder-parity-work (WORK=... to move them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup encoder-parity
models="xlm_roberta,clip_text,t5_encoder,bge_m3,colbertv2"; dtype=f32; backend=cuda; n=16; factor=2
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --dtype) dtype="$2"; shift 2 ;;
    --backend) backend="$2"; shift 2 ;;
    --n) n="$2"; shift 2 ;;
    --bound-factor) factor="$2"; shift 2 ;;
    *) echo "encoder-parity: unknown argument $1 (--models, --dtype f32|bf16|f16, --backend cuda|cpu, --n N, --bound-factor F)" >&2; exit 1 ;;
  esac
done
case "$dtype" in f32|bf16|f16) ;; *) echo "encoder-parity: --dtype must be f32, bf16 or f16, got $dtype" >&2; exit 1 ;; esac
case "$backend" in cuda|cpu) ;; *) echo "encoder-parity: --backend must be cuda or cpu, got $backend" >&2; exit 1 ;; esac
WORK="${WORK:-$OUT/encoder-parity-work-$dtype-$backend}"
echo "encoder-parity: bundle $bundle (commit ${commit:-?}), python $PY, $dtype, ours on $backend, out $OUT, work $WORK"
t0=$SECONDS
"$PY" "$here/encoder_parity.py" configs --dir "$WORK" --n "$n" --dtype "$dtype"
IFS=',' read -r -a mlist <<< "$models"
for m in "${mlist[@]}"; do
  "$bundle/run" init-weights --config "$WORK/$m/config.json" --out "$WORK/$m/ckpt" --seed 1 --dtype "$dtype" --json > "$WORK/$m/init.json" \
    || { echo "encoder-parity: init-weights $m failed" >&2; exit 1; }
done
echo "encoder-parity: checkpoints written ($((SECONDS - t0)) s)"
"$PY" "$here/encoder_parity.py" preflight || { echo "encoder-parity: stopping before the GPU steps (see the PREFLIGHT line above)" >&2; exit 3; }
for m in "${mlist[@]}"; do
  # cls / mean rows: one embed per pooling (ours_cls, ours_mean); head rows: one embed with all their poolings (ours_heads)
  for p in $("$PY" "$here/encoder_parity.py" poolings "$m"); do
    f=$([ "$p" = cls ] || [ "$p" = mean ] && echo "$p" || echo heads)
    echo "encoder-parity: embed $m --pooling $p on $backend"
    timeout "${EMBED_TIMEOUT:-150}" "$bundle/run" embed --model "$WORK/$m/ckpt" --input "$WORK/$m/inputs.jsonl" --pooling "$p" --backend "$backend" \
      --dtype "$dtype" --out "$WORK/$m/ours_$f.jsonl" 2> "$WORK/$m/ours_$f.stderr" \
      || { echo "encoder-parity:   FAILED (exit $?); stderr tail:" >&2; tail -n 20 "$WORK/$m/ours_$f.stderr" >&2 || true; rm -f "$WORK/$m/ours_$f.jsonl"; }
  done
done
result="$OUT/encoder-parity.json"
[ "$dtype" = f32 ] || result="$OUT/encoder-parity-$dtype.json"
timeout "${COMPARE_TIMEOUT:-300}" "$PY" "$here/encoder_parity.py" compare --dir "$WORK" --json "$result" --models "$models" \
  --dtype "$dtype" --backend "$backend" --bound-factor "$factor" --meta-commit "$commit"
echo "encoder-parity: total $((SECONDS - t0)) s"
