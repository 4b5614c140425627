#!/usr/bin/env bash
# Issue 7, bs-1 decode: the step time under each launch setting, in one process start per setting (no ncu; ~40 s
# each). Llama-3-8B shape, random bf16 weights, the bs-1 CUDA graph (bench/decode_profile.mjs, its run "a"):
#   plain   the three settings below off (run 10's engine, but with rotary at 16 blocks per SM, no matter at bs 1)
#   chain   FASTKERNELS_CHAIN_DECODE=1: the next step launched before this one's tokens are read (EngineOptions.chainDecode)
#   pdl     FASTKERNELS_PDL=1: the spine kernels as programmatic dependent launches in the graphs (LAUNCH_TUNING.pdl)
#   both    both
#   gemv    both, and the GEMV (fk_gemv_stream) for every M-1 linear: FASTKERNELS_GEMV_MAX_ROWS=1 (LINEAR_TUNING.gemvMaxRows);
#           run 11's defaults (FK_UNR 8, 32 warps an SM; the run-12 launch cuts below off)
#   gemv48  gemv at FK_UNR 4 with 48 warps per SM (FASTKERNELS_GEMV_UNROLL=4 FASTKERNELS_GEMV_WARPS_PER_SM=48; the
#           default since run 13)
#   rkv     gemv, and rotary + the kv-cache write in one launch (FASTKERNELS_FUSE_ROTARY_KV=1, ROTARY_TUNING.fuseKvStore)
#   greedy  gemv, and the bs-1 greedy sampler split over CTAs (FASTKERNELS_SAMPLER_GREEDY_SPLIT_ROWS=1,
#           SAMPLER_TUNING.greedySplitMaxRows)
#   glu     gemv, and gate_up + silu in one GEMV launch (FASTKERNELS_FUSE_GLU=1, LINEAR_TUNING.gemvFuseGlu; since run 12's
#           review on the SM-balanced grid, gemvStreamGridBalanced; on by default since run 13)
#   defaults  no FASTKERNELS_* switch set: the shipped defaults (since run 15: gemv48 + rkv + greedy + glu, the RMSNorm in
#           the GEMV, the GEMVs' at-exit trigger, early decode cache loads, 64-key splits; run 14's 2 stages, 16 CTAs an SM)
#   (a setting named again, for an A/B/A run, is recorded as NAME#2, NAME#3, ...)
#   NAME=V[,NAME=V...]  the defaults with these FASTKERNELS_* variables set (the prefix may be left out), recorded under
#           the same text without the prefix: e.g. DECODE_MIN_SPLIT_TOKENS=512 (ATTENTION_TUNING.decodeMmaMinSplitTokens);
#           BENCH_ABLATE=OP[:OP] launches nothing for those ops (bench/decode-ablate.mjs: rmsNorm, fusedAddRmsNorm,
#           rotaryStoreKvcache, rotaryEmbedding, storeKvcache_, pagedDecodeAttention): garbage tokens, the step time an
#           upper bound on a fusion's gain
# (run 12 also measured PDL-early launches, a GEMV L2 prefetch and the decode combine inside the decode kernel: all
# slower, removed; decode_ab-run12-early-pf.json, decode_ab-run12-fusions.json)
# Writes $OUT/decode_ab.json ({ commit, settings: { name: { stepMs, graphReplayMs, decodeTokS, hostMs, rc } } }) and
# prints a table last.
#   OUT=/tmp/out dist/gpu-host/bench/h200-decode-ab.sh [SETTING ...]      (default: plain gemv defaults)
#   STEPS_TIMED=64 (decode steps timed per setting); PROMPT=64 (prompt tokens); MAX_MODEL_LEN (the context the bs-1
#   graph is captured for; default prompt + steps + 64; PROMPT=128 STEPS_TIMED=256 MAX_MODEL_LEN=2176 is the serve
#   bench's bs-1 decode)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
fk_decode_setup decode-ab
args=("$@"); [ ${#args[@]} -gt 0 ] || args=(plain gemv defaults)
# a custom setting's name in files and the JSON: its assignments without the FASTKERNELS_ prefix
settings=()
for a in "${args[@]}"; do settings+=("${a//FASTKERNELS_/}"); done
# a setting named twice (an A/B/A run) keeps both results: the second is recorded as NAME#2, and so on
labels=()
for i in "${!settings[@]}"; do
  n=1
  for ((j = 0; j < i; j++)); do [ "${settings[$j]}" = "${settings[$i]}" ] && n=$((n + 1)); done
  if [ $n -gt 1 ]; then labels+=("${settings[$i]}#$n"); else labels+=("${settings[$i]}"); fi
done
echo "decode-ab: bundle $bundle (commit ${commit:-?}), out $OUT, settings ${settings[*]}"
rm -f "$OUT"/decode-ab-* "$OUT/decode_ab.json"  # nothing from an earlier run is reported as this one's
# the run-12 launch cuts off (a setting that turns one on names it again after these: for env, the later value wins)
# every setting starts from the shipped defaults: every FASTKERNELS_* variable of the caller's shell is cleared for each
# run except those that say where things are (a speed switch added later can never leak into a "defaults" run)
keep_vars=(CACHE_DIR CUDA_ADDON CUDA_LIB_DIRS CUDA_INCLUDE_DIRS BUNDLE DEVICE GPU PYTHON NCCL_ADDON NCCL_LIB_DIRS)
clear=()
while IFS= read -r v; do
  name="${v#FASTKERNELS_}"
  [[ " ${keep_vars[*]} " == *" $name "* ]] && continue
  echo "decode-ab: $v=$(printenv "$v") from the caller is ignored (settings start from the defaults)" >&2
  clear+=(-u "$v")
done < <(compgen -e | grep '^FASTKERNELS_' || true)
# the presets below are earlier runs' engines: every launch cut since run 12 off, and run 13's decode settings (the late
# trigger, early cache loads, 64-key splits, 2 stages and 16 CTAs an SM came in runs 14-15)
cuts_off=(FASTKERNELS_FUSE_ROTARY_KV=0 FASTKERNELS_SAMPLER_GREEDY_SPLIT_ROWS=0 FASTKERNELS_FUSE_GLU=0 FASTKERNELS_FUSE_NORM=0
  FASTKERNELS_GEMV_LATE_TRIGGER=off FASTKERNELS_DECODE_EARLY_KV=0 FASTKERNELS_DECODE_MIN_SPLIT_TOKENS=128
  FASTKERNELS_DECODE_MMA_STAGES=0 FASTKERNELS_DECODE_CTAS_PER_SM=32)
gemv=(FASTKERNELS_CHAIN_DECODE=1 FASTKERNELS_PDL=1 FASTKERNELS_GEMV_MAX_ROWS=1 FASTKERNELS_GEMV_UNROLL=8 FASTKERNELS_GEMV_WARPS_PER_SM=32 "${cuts_off[@]}")
for i in "${!settings[@]}"; do
  s="${settings[$i]}"
  case "$s" in
    plain) env=(FASTKERNELS_CHAIN_DECODE=0 FASTKERNELS_PDL=0 FASTKERNELS_GEMV_MAX_ROWS=0 "${cuts_off[@]}") ;;
    chain) env=(FASTKERNELS_CHAIN_DECODE=1 FASTKERNELS_PDL=0 FASTKERNELS_GEMV_MAX_ROWS=0 "${cuts_off[@]}") ;;
    pdl) env=(FASTKERNELS_CHAIN_DECODE=0 FASTKERNELS_PDL=1 FASTKERNELS_GEMV_MAX_ROWS=0 "${cuts_off[@]}") ;;
    both) env=(FASTKERNELS_CHAIN_DECODE=1 FASTKERNELS_PDL=1 FASTKERNELS_GEMV_MAX_ROWS=0 "${cuts_off[@]}") ;;
    gemv) env=("${gemv[@]}") ;;
    gemv48) env=("${gemv[@]}" FASTKERNELS_GEMV_UNROLL=4 FASTKERNELS_GEMV_WARPS_PER_SM=48) ;;
    rkv) env=("${gemv[@]}" FASTKERNELS_FUSE_ROTARY_KV=1) ;;
    greedy) env=("${gemv[@]}" FASTKERNELS_SAMPLER_GREEDY_SPLIT_ROWS=1) ;;
    glu) env=("${gemv[@]}" FASTKERNELS_FUSE_GLU=1) ;;
    defaults) env=() ;;
    *=*)
      env=()
      IFS=',' read -ra kv <<< "$s"
      for a in "${kv[@]}"; do
        if ! [[ "$a" =~ ^[A-Z0-9_]+=[A-Za-z0-9_.:-]*$ ]]; then
          echo "decode-ab: setting '${args[$i]}': '$a' is not NAME=VALUE (a FASTKERNELS_* variable, prefix optional)" >&2; exit 2
        fi
        env+=("FASTKERNELS_$a")
      done ;;
    *) echo "decode-ab: unknown setting '$s' (plain, chain, pdl, both, gemv, gemv48, rkv, greedy, glu, defaults, or NAME=VALUE[,NAME=VALUE])" >&2; exit 2 ;;
  esac
  l="${labels[$i]}"
  t0=$SECONDS
  rc=0
  env ${clear[@]+"${clear[@]}"} ${env[@]+"${env[@]}"} "$bundle/run-node" "$script" --model "$model" --steps "${STEPS_TIMED:-64}" --prompt "${PROMPT:-64}" ${MAX_MODEL_LEN:+--max-model-len "$MAX_MODEL_LEN"} --json "$OUT/decode-ab-$l.json" --graph-timing 50 \
    > "$OUT/decode-ab-$l.log" 2>&1 || rc=$?
  echo "$rc" > "$OUT/decode-ab-$l.rc"
  echo "decode-ab: $l: exit $rc, $((SECONDS - t0)) s ($(grep -o 'decodeTokS=[0-9.]*' "$OUT/decode-ab-$l.log" | tail -1))"
  # after every setting, so a run cut short by a time limit keeps what it measured
  "$bundle/run-node" "$here/decode-ab-summary.mjs" "$OUT" "${commit:-}" "${labels[@]}" > "$OUT/decode-ab-table.txt"
done
cat "$OUT/decode-ab-table.txt"
