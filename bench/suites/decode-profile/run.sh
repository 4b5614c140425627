#!/usr/bin/env bash
# Issue 7, bs-1 decode: where a step's ~4.75 ms go (weight-read floor ~3.8 ms). Llama-3-8B shape, random bf16 weights
# filled on the device, LLMEngine with the bs-1 CUDA graph only (bench/suites/decode-profile/decode_profile.mjs). Three steps:
#   a. without ncu: the mean decode step time (engine step records, as serve-llama reports it), the captured graph
#      replayed alone between device events, and the D2D copy bandwidth
#   b. under Nsight Compute: every kernel launch (graph kernel nodes one by one: --graph-profiling node) with
#      gpu__time_duration.sum, clocks and caches left as they are (--clock-control none --cache-control none); the
#      report is exported to $OUT/decode-profile.ncu-rep, then imported as CSV (--csv --page raw --print-units base:
#      one row per launch, in launch order) into $OUT/decode-profile-ncu.csv; ncu's own log: $OUT/decode-profile-ncu.log
#   c. post-processing (bench/suites/decode-profile/decode-profile-lib.mjs with the bundle's node): K = kernels per step (the period of the
#      names at the end of the list, N_PROFILE steps), per kernel (cuBLASLt's in one 'GEMM (cuBLASLt)' bucket) count,
#      us and share per step, kernel sum vs the step time (the gap), the GEMMs' weight bytes and GB/s.
# ncu serialises and replays kernels: only its per-kernel durations are used, never overlap or its wall time.
# Writes $OUT/decode_profile.json and prints a short table last. Exit 0 only with a kernel breakdown; without ncu (or
# with ncu failing, e.g. no permission for the counters) it says so, still writes the JSON (the step time), exits 1.
#   dist/gpu-host/bench/run decode-profile          N_PROFILE=8 (decode steps under ncu)
#   NCU=/path/to/ncu  NCU_TIMEOUT_S=200  STEPS_TIMED=64 (decode steps of run a)  COPY_GBS=4230 (instead of measuring)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_decode_setup decode-profile
N="${N_PROFILE:-8}"
node_bin="$("$bundle/run" --print-node)"
echo "decode-profile: bundle $bundle (commit ${commit:-?}), out $OUT, $N profiled decode steps"
# PROMPT / MAX_MODEL_LEN: as in suites/decode-ab/run.sh (PROMPT=128 MAX_MODEL_LEN=2176: the serve bench's bs-1 context)
ctx=(--prompt "${PROMPT:-64}")
[ -z "${MAX_MODEL_LEN:-}" ] || ctx+=(--max-model-len "$MAX_MODEL_LEN")
rm -f "$OUT/decode-profile-run.json" "$OUT/decode-profile-ncu-run.json" "$OUT/decode-profile-ncu.csv" "$OUT/decode-profile-ncu.log" "$OUT/decode-profile.ncu-rep" "$OUT/decode_profile.json"

# a. without ncu
t0=$SECONDS
copy=(--copy-bw); [ -n "${COPY_GBS:-}" ] && copy=()
rc_a=0
"$bundle/run-node" "$script" --model "$model" --steps "${STEPS_TIMED:-64}" "${ctx[@]}" --json "$OUT/decode-profile-run.json" --graph-timing 50 "${copy[@]}" || rc_a=$?
echo "decode-profile: run without ncu: exit $rc_a, $((SECONDS - t0)) s"

# b. under ncu
ncu_err=""
ncu_bin="${NCU:-}"
if [ -z "$ncu_bin" ]; then
  ncu_bin="$(command -v ncu 2>/dev/null || true)"
  if [ -z "$ncu_bin" ]; then
    for c in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu /usr/local/NVIDIA-Nsight-Compute*/ncu; do
      if [ -x "$c" ]; then ncu_bin="$c"; break; fi
    done
  fi
fi
NCU_FLAGS=(--target-processes all --graph-profiling node --metrics gpu__time_duration.sum --clock-control none --cache-control none)
if [ -z "$ncu_bin" ] || [ ! -x "$ncu_bin" ]; then
  ncu_err="ncu (Nsight Compute) not found (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute; NCU=... to point at it)"
else
  echo "decode-profile: $("$ncu_bin" --version 2>/dev/null | tail -1) ($ncu_bin)"
  t1=$SECONDS
  rc_b=0
  timeout --kill-after=10 "${NCU_TIMEOUT_S:-200}" "$ncu_bin" "${NCU_FLAGS[@]}" --export "$OUT/decode-profile" --force-overwrite \
    --log-file "$OUT/decode-profile-ncu.log" \
    "$bundle/run-node" "$script" --model "$model" --steps "$N" "${ctx[@]}" --json "$OUT/decode-profile-ncu-run.json" || rc_b=$?
  echo "decode-profile: run under ncu: exit $rc_b, $((SECONDS - t1)) s (ncu log: $OUT/decode-profile-ncu.log)"
  grep -E '^==(ERROR|WARNING)==' "$OUT/decode-profile-ncu.log" 2>/dev/null | sort | uniq -c | head -8 | sed 's/^/decode-profile: ncu: /' || true
  if grep -q 'ERR_NVGPUCTRPERM' "$OUT/decode-profile-ncu.log" 2>/dev/null; then
    ncu_err="ncu: no permission for the GPU performance counters (ERR_NVGPUCTRPERM: needs root, or the driver option NVreg_RestrictProfilingToAdminUsers=0)"
  elif [ ! -f "$OUT/decode-profile.ncu-rep" ]; then
    why="exit $rc_b"
    if [ "$rc_b" = 124 ] || [ "$rc_b" = 137 ]; then why="timed out after ${NCU_TIMEOUT_S:-200} s"; fi
    ncu_err="ncu wrote no report ($why; see $OUT/decode-profile-ncu.log)"
  else
    # one row per kernel launch in launch order; base units (nanoseconds); older ncu without --print-units: scaled units
    if ! "$ncu_bin" --import "$OUT/decode-profile.ncu-rep" --csv --page raw --print-units base > "$OUT/decode-profile-ncu.csv" 2>> "$OUT/decode-profile-ncu.log"; then
      "$ncu_bin" --import "$OUT/decode-profile.ncu-rep" --csv --page raw > "$OUT/decode-profile-ncu.csv" 2>> "$OUT/decode-profile-ncu.log" || ncu_err="ncu --import of $OUT/decode-profile.ncu-rep failed (see $OUT/decode-profile-ncu.log)"
    fi
    [ -n "$ncu_err" ] || [ "$rc_b" = 0 ] || echo "decode-profile: WARNING: the run under ncu exited $rc_b; using the launches it profiled" >&2
    echo "decode-profile: $(($(wc -l < "$OUT/decode-profile-ncu.csv") - 2)) kernel launches profiled -> $OUT/decode-profile-ncu.csv"
  fi
fi
[ -z "$ncu_err" ] || echo "decode-profile: ERROR: $ncu_err" >&2

# c. post-processing
post=(post --csv "$OUT/decode-profile-ncu.csv" --run "$OUT/decode-profile-run.json" --ncu-run "$OUT/decode-profile-ncu-run.json"
  --config "$model/config.json" --steps "$N" --out "$OUT/decode_profile.json" --commit "${commit:-}" --ncu-flags "${NCU_FLAGS[*]}")
[ -z "${COPY_GBS:-}" ] || post+=(--copy-gbs "$COPY_GBS")
[ -z "$ncu_err" ] || post+=(--ncu-error "$ncu_err")
rc_c=0
echo
"$node_bin" "$here/decode-profile-lib.mjs" "${post[@]}" || rc_c=$?
echo "decode-profile: $OUT/decode_profile.json"
[ "$rc_a" = 0 ] && [ "$rc_c" = 0 ] && [ -z "$ncu_err" ] || exit 1
