# A device call's script sources this from the bundle root (`source bench/lib/session.sh`): W, the work folder (fresh),
# and `step NAME SECONDS CMD ...`, which runs CMD under a time limit into $W/NAME.log, notes `NAME rc=.. Ns` in
# $W/steps.txt and re-tars $W to $OUT/call.tgz after every step, so a call cut by its limit still returns what it
# finished (model folders and weights left out). The GPU's name, clocks and memory go to $W/gpu.txt first.
# docs/gpu-session-plan.md: keep the steps' seconds 30 s under the call's limit.
W="${W:-/tmp/w}"
rm -rf "$W"
mkdir -p "$W"
export FASTKERNELS_PYTHON="${FASTKERNELS_PYTHON:-python3}"
step() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  timeout "$limit" "$@" > "$W/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$W/steps.txt"
  (cd "$W" && tar czf "${OUT:?OUT is the output folder of the device call}/call.tgz" --exclude='*-model' --exclude='*.safetensors' --exclude='*.bin' .)
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader 2>/dev/null | tee "$W/gpu.txt"
