#!/usr/bin/env bash
# Vision speed on the GPU host (issues 33, 34): our YOLOv10n / s at 640 (fp16; batch 1 and 32), ConvNeXt-V2-base at 384
# (fp16, batch 32; --convnext-dtype bf16 for docs/detection.md's production dtype), the FLUX.1-dev transformer step
# (bf16, 1024^2: 4096 image + 512 text tokens, 19 double + 38 single blocks) and FLUX.1's VAE decoder (bf16, 1024^2)
# against the plain-PyTorch references of bench/reference/ in the same run: eager, torch.compile and, where a target
# names it, torch.compile with CUDA graphs; FLOPs, TFLOP/s and the fraction of the dense bf16 matmul rate measured
# here; FLUX's step beside its GEMMs + attention timed alone. Writes
# $OUT/vision.json; the table is last, issue 33's / 34's targets (H200; informative elsewhere) its last lines.
#   dist/gpu-host/bench/run vision [--models yolov10n,convnextv2_base,flux_transformer,flux_vae,yolov10s] [--quick]
#       [--flux-layers 19,38 (tiny: 2,2)] [--no-compile] [--no-torch] [--deadline 540] [--convnext-dtype f16]
#       [--conv-algo-search benchmark|heuristic] [--backend cuda|cpu] [--tiny]
# --conv-algo-search (default benchmark): how BOTH sides pick cuDNN's conv algorithms, so the comparison is like for
# like: benchmark = each shape's candidates timed once (torch.backends.cudnn.benchmark, our conv.algoSearch), what
# fixed-shape inference runs; heuristic = cuDNN's heuristics' first choice on both sides.
# --tiny --backend cpu: the CI fixtures' tiny configs, both sides on the CPU (a smoke run of the whole chain without a
# GPU; its timings mean nothing): `FASTKERNELS_BUNDLE=... OUT=/tmp/vs bench/suites/vision/run.sh --tiny --backend cpu`.
# Steps, each model its own processes (a failure or a timeout is recorded and the others still run):
#   configs + plan (vision_bench.py configs: bench/reference/vision_configs.py, vision-parity's configs), init-weights
#   (our CLI) for the YOLO / ConvNeXt checkpoints, the matrix rates, then per model ours (vision.mjs) and torch
#   (vision_bench.py torch), then merge.mjs. Work files: $OUT/vision-work (WORK=... to move them).
# Budget on an H200 (estimate, not yet measured): ~20 s checkpoints, ~1-1.5 min our side (NVRTC compiles, graph
# captures, FLUX's 12B weights filled on the device), ~4 min torch, most of it inductor compiles (YOLOv10n bs 1 in two
# modes and bs 32, ConvNeXt, FLUX's two block kinds, the VAE, YOLOv10s bs 1 and 32; less with a warm inductor cache):
# ~5.5-6 min cold. --deadline (540 s) keeps it inside one 10-minute device call whatever happens (YOLOv10s, last, is
# cut first); --quick shortens the timed loops and skips YOLOv10s's compiles (~4.5 min), --no-compile drops them all.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup vision
# the informative yolov10s last: the --deadline cuts it first
models="yolov10n,convnextv2_base,flux_transformer,flux_vae,yolov10s"; backend=cuda; flayers=""; tiny=""; quick=""; nocompile=""; notorch=""; deadline=540; cxdtype=f16; convsearch=benchmark
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --backend) backend="$2"; shift 2 ;;
    --flux-layers) flayers="$2"; shift 2 ;;
    --tiny) tiny="--tiny"; shift ;;
    --quick) quick="--quick"; shift ;;
    --no-compile) nocompile="--no-compile"; shift ;;
    --no-torch) notorch=1; shift ;;
    --deadline) deadline="$2"; shift 2 ;;
    --convnext-dtype) cxdtype="$2"; shift 2 ;;
    --conv-algo-search) convsearch="$2"; shift 2 ;;
    *) echo "vision: unknown argument $1 (--models a,b, --quick, --flux-layers D,S, --no-compile, --no-torch, --deadline S, --convnext-dtype f16|bf16|f32, --conv-algo-search benchmark|heuristic, --backend cuda|cpu, --tiny)" >&2; exit 1 ;;
  esac
done
case "$backend" in cuda|cpu) ;; *) echo "vision: --backend must be cuda or cpu, got $backend" >&2; exit 1 ;; esac
case "$convsearch" in benchmark|heuristic) ;; *) echo "vision: --conv-algo-search must be benchmark or heuristic, got $convsearch" >&2; exit 1 ;; esac
[ -n "$flayers" ] || { if [ -n "$tiny" ]; then flayers="2,2"; else flayers="19,38"; fi; }
[[ "$deadline" =~ ^[0-9]+$ ]] || { echo "vision: --deadline must be seconds, got $deadline" >&2; exit 1; }
[[ "$flayers" =~ ^[0-9]+,[0-9]+$ ]] || { echo "vision: --flux-layers must be D,S (double, single blocks), got $flayers" >&2; exit 1; }
device=cuda; [ "$backend" = cpu ] && device=cpu
WORK="${WORK:-$OUT/vision-work}"
mkdir -p "$WORK"
echo "vision: bundle $bundle (commit ${commit:-?}), python $PY, ours on $backend, torch on $device, models $models, FLUX blocks $flayers, out $OUT, work $WORK"
t0=$SECONDS
rm -f "$WORK"/rate-*.json
"$PY" "$here/vision_bench.py" configs --dir "$WORK" --models "$models" --flux-layers "$flayers" --convnext-dtype "$cxdtype" --conv-algo-search "$convsearch" $quick $tiny
IFS=',' read -r -a mlist <<< "$models"

# step LOG TIMEOUT CMD...: the command's output into LOG and, indented, here; its exit status is reported, not fatal.
# No step runs past the suite's --deadline (seconds from the start; default 540, inside one 10-minute device call, so
# the merge always comes): a step is cut to what is left, and skipped when under 20 s is.
step() {
  local log="$1" limit="$2" rc left; shift 2
  left=$((deadline - (SECONDS - t0)))
  if [ "$left" -lt 20 ]; then
    echo "vision: skipped: the --deadline of $deadline s is reached" | tee "$log" >&2
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  set +e
  timeout "$limit" "$@" 2>&1 | tee "$log" | sed 's/^/    /'
  rc=${PIPESTATUS[0]}
  set -e
  [ $rc -eq 0 ] || echo "vision:   exit $rc$([ $rc -eq 124 ] && echo " (timed out after $limit s)") (see $log)" >&2
  return 0
}

# the YOLO / ConvNeXt checkpoints, as vision-parity writes them (BatchNorms calibrated on the backend)
for m in "${mlist[@]}"; do
  case "$m" in flux_*) continue ;; esac
  [ -f "$WORK/$m/ckpt/model.safetensors" ] && cmp -s "$WORK/$m/config.json" "$WORK/$m/ckpt/config.json" && continue
  echo "vision: init-weights $m"
  timeout 180 "$bundle/run" init-weights --config "$WORK/$m/config.json" --out "$WORK/$m/ckpt" --seed 1 --dtype f32 --backend "$backend" --json > "$WORK/$m/init.json" \
    || echo "vision: init-weights $m failed (its rows will say so)" >&2
done
for m in "${mlist[@]}"; do rm -f "$WORK/$m/ours.json" "$WORK/$m/torch.json"; done
echo "vision: checkpoints ready ($((SECONDS - t0)) s)"

torch_ok=""; rm -f "$WORK/torch-skipped.txt"
if [ -n "$notorch" ]; then echo "--no-torch" > "$WORK/torch-skipped.txt"
else
  "$PY" "$here/vision_bench.py" preflight --device "$device" > "$WORK/preflight.log" 2>&1 && torch_ok=1
  cat "$WORK/preflight.log"
  if [ -z "$torch_ok" ]; then
    { printf 'preflight failed: '; tail -n 1 "$WORK/preflight.log"; } > "$WORK/torch-skipped.txt"
    echo "vision: no PyTorch side (see the PREFLIGHT line above): ours only, the targets NOT MEASURED" >&2
  fi
fi
echo "vision: matrix rate"
step "$WORK/rate-ours.log" 120 "$bundle/run-node" "$drv/vision.mjs" --work "$WORK" --matrix-rate --backend "$backend"
if [ -n "$torch_ok" ]; then step "$WORK/rate-torch.log" 120 "$PY" "$here/vision_bench.py" rate --dir "$WORK" --device "$device"; fi

for m in "${mlist[@]}"; do
  echo "vision: ours $m on $backend ($((SECONDS - t0)) s)"
  step "$WORK/$m/ours.log" "${OURS_TIMEOUT:-180}" "$bundle/run-node" "$drv/vision.mjs" --work "$WORK" --model "$m" --backend "$backend"
  if [ -n "$torch_ok" ]; then
    echo "vision: torch $m on $device ($((SECONDS - t0)) s)"
    step "$WORK/$m/torch.log" "${TORCH_TIMEOUT:-240}" "$PY" "$here/vision_bench.py" torch --dir "$WORK" --model "$m" --device "$device" $nocompile
  fi
done
"$("$bundle/run" --print-node)" "$here/merge.mjs" "$WORK" "$OUT/vision.json" "${commit:-}"
echo "vision: total $((SECONDS - t0)) s"
