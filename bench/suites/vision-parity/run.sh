#!/usr/bin/env bash
# Vision parity on the GPU host (issues 33, 34): our FLUX.1 transformer (FLUX.1-dev widths, the first few blocks) and
# VAE decoder, YOLOv10n / s at 640 and ConvNeXt-V2-base at 224 (the bundled driver, --backend cuda, f32 and bf16)
# against the plain-PyTorch oracles of bench/reference/ (float64 on the GPU; diffusers / ultralytics / HF module
# definitions re-written on torch alone: the host has neither diffusers nor ultralytics) on the same seeded
# checkpoints and the same input tensors: raw outputs, no image pre- or postprocessing. Writes
# $OUT/vision-parity.json; the table is last.
#   dist/gpu-host/bench/run vision-parity [--models yolov10n,yolov10s,convnextv2_base,flux_transformer,flux_vae]
#       [--dtypes f32,bf16] [--backend cuda|cpu] [--oracle-device cuda|cpu] [--flux-size 1024] [--flux-layers 2,2]
#       [--batch 2] [--tiny]
# --tiny: the CI fixtures' tiny configs; with --backend cpu the oracle runs on the CPU too (a smoke run of the whole
# chain without a GPU: `FASTKERNELS_BUNDLE=... OUT=/tmp/vp bench/suites/vision-parity/run.sh --tiny --backend cpu`).
# Steps: configs + inputs (vision_parity.py configs), init-weights (our CLI) for the YOLO / ConvNeXt checkpoints,
# preflight (torch, CUDA, bench/reference), vision-parity.mjs per dtype (FLUX's checkpoints written on the first,
# bf16, diffusers' names), vision_parity.py compare. A model whose run fails is recorded with its log and the others
# still run. Work files: $OUT/vision-parity-work (WORK=... to move them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup vision-parity
models="yolov10n,yolov10s,convnextv2_base,flux_transformer,flux_vae"; dtypes="f32,bf16"; backend=cuda; fsize=1024; flayers="2,2"; batch=2; tiny=""; odev=""
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --dtypes) dtypes="$2"; shift 2 ;;
    --backend) backend="$2"; shift 2 ;;
    --flux-size) fsize="$2"; shift 2 ;;
    --flux-layers) flayers="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --tiny) tiny="--tiny"; shift ;;
    --oracle-device) odev="$2"; shift 2 ;;
    *) echo "vision-parity: unknown argument $1 (--models, --dtypes f32,bf16, --backend cuda|cpu, --oracle-device cuda|cpu, --flux-size N, --flux-layers D,S, --batch N, --tiny)" >&2; exit 1 ;;
  esac
done
case "$backend" in cuda|cpu) ;; *) echo "vision-parity: --backend must be cuda or cpu, got $backend" >&2; exit 1 ;; esac
device=cuda; [ -n "$tiny" ] && [ "$backend" = cpu ] && device=cpu
device="${odev:-$device}"
case "$device" in cuda|cpu) ;; *) echo "vision-parity: --oracle-device must be cuda or cpu, got $device" >&2; exit 1 ;; esac
WORK="${WORK:-$OUT/vision-parity-work}"
echo "vision-parity: bundle $bundle (commit ${commit:-?}), python $PY, ours on $backend ($dtypes), oracle on $device, out $OUT, work $WORK"
t0=$SECONDS
"$PY" "$here/vision_parity.py" configs --dir "$WORK" --flux-size "$fsize" --flux-layers "$flayers" --batch "$batch" $tiny
"$PY" "$here/vision_parity.py" preflight --device "$device" || { echo "vision-parity: stopping before the GPU steps (see the PREFLIGHT line above)" >&2; exit 3; }
IFS=',' read -r -a mlist <<< "$models"
for m in "${mlist[@]}"; do
  case "$m" in flux_*) continue ;; esac
  [ -f "$WORK/$m/ckpt/model.safetensors" ] && continue
  "$bundle/run" init-weights --config "$WORK/$m/config.json" --out "$WORK/$m/ckpt" --seed 1 --dtype f32 --backend "$backend" --json > "$WORK/$m/init.json" \
    || { echo "vision-parity: init-weights $m failed" >&2; exit 1; }
done
echo "vision-parity: checkpoints written ($((SECONDS - t0)) s)"
IFS=',' read -r -a dlist <<< "$dtypes"
for dt in "${dlist[@]}"; do
  for m in "${mlist[@]}"; do
    echo "vision-parity: ours $m $dt on $backend"
    timeout "${RUN_TIMEOUT:-600}" "$bundle/run-node" bench/suites/vision-parity/vision-parity.mjs --work "$WORK" --models "$m" --dtype "$dt" --backend "$backend" --init \
      > "$WORK/$m/ours-$dt.log" 2>&1 || echo "vision-parity:   exit $? (see $WORK/$m/ours-$dt.log)" >&2
    tail -n 1 "$WORK/$m/ours-$dt.log" || true
  done
done
timeout "${COMPARE_TIMEOUT:-1200}" "$PY" "$here/vision_parity.py" compare --dir "$WORK" --json "$OUT/vision-parity.json" --models "$models" \
  --dtypes "$dtypes" --backend "$backend" --device "$device" --meta-commit "$commit"
echo "vision-parity: total $((SECONDS - t0)) s"
