#!/usr/bin/env bash
# Issue 7, bs-1 decode: the step time under each launch setting, in one process start per setting (no ncu; ~40 s
# each). Llama-3-8B shape, random bf16 weights, the bs-1 CUDA graph (bench/suites/decode-profile/decode_profile.mjs, its run "a"):
#   SETTING  a variant of variants.mjs (the one table of variants: plain, chain, pdl, both, gemv, gemv48, rkv, greedy,
#            glu, defaults; `run-node variants.mjs names`), each a tuning override the process gets as
#            FASTKERNELS_TUNING=<file> over the device's tuning file (docs/tuning.md), or a custom setting
#            section.key=value[,section.key=value...] (e.g. attention.decodeMmaMinSplitTokens=512), recorded under its text.
#   (a setting named again, for an A/B/A run, is recorded as NAME#2, NAME#3, ...)
#   BENCH_ABLATE=OP[:OP] (alone or in a custom setting) launches nothing for those ops
#   (bench/suites/decode-profile/decode-ablate.mjs): garbage tokens, the step time an upper bound on a fusion's gain
# Writes $OUT/decode_ab.json ({ commit, settings: { name: { stepMs, graphReplayMs, decodeTokS, hostMs, rc } } }) and
# prints a table last.
#   dist/gpu-host/bench/run decode-ab [SETTING ...]      (default: plain gemv defaults)
#   STEPS_TIMED=64 (decode steps timed per setting); PROMPT=64 (prompt tokens); MAX_MODEL_LEN (the context the bs-1
#   graph is captured for; default prompt + steps + 64; PROMPT=128 STEPS_TIMED=256 MAX_MODEL_LEN=2176 is the serve
#   bench's bs-1 decode)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_decode_setup decode-ab
args=("$@"); [ ${#args[@]} -gt 0 ] || args=(plain gemv defaults)
settings=("${args[@]}")
# a setting named twice (an A/B/A run) keeps both results: the second is recorded as NAME#2, and so on
labels=()
for i in "${!settings[@]}"; do
  n=1
  for ((j = 0; j < i; j++)); do [ "${settings[$j]}" = "${settings[$i]}" ] && n=$((n + 1)); done
  if [ $n -gt 1 ]; then labels+=("${settings[$i]}#$n"); else labels+=("${settings[$i]}"); fi
done
echo "decode-ab: bundle $bundle (commit ${commit:-?}), out $OUT, settings ${settings[*]}"
rm -f "$OUT"/decode-ab-* "$OUT/decode_ab.json"  # nothing from an earlier run is reported as this one's
# every setting starts from the device's tuning file: every FASTKERNELS_* variable of the caller's shell (FASTKERNELS_TUNING
# too) is cleared for each run except those that say where things are (nothing leaks into a "defaults" run)
keep_vars=(CACHE_DIR CUDA_ADDON CUDA_LIB_DIRS CUDA_INCLUDE_DIRS BUNDLE DEVICE GPU PYTHON NCCL_ADDON NCCL_LIB_DIRS)
clear=()
while IFS= read -r v; do
  name="${v#FASTKERNELS_}"
  [[ " ${keep_vars[*]} " == *" $name "* ]] && continue
  echo "decode-ab: $v=$(printenv "$v") from the caller is ignored (settings start from the device's tuning file)" >&2
  clear+=(-u "$v")
done < <(compgen -e | grep '^FASTKERNELS_' || true)
node_bin="$("$bundle/run" --print-node)"
# every setting checked first (variants.mjs says what is wrong), so a typo stops the run before any is measured
for s in "${settings[@]}"; do "$node_bin" "$here/variants.mjs" check "$s" || exit 2; done
for i in "${!settings[@]}"; do
  s="${settings[$i]}"
  l="${labels[$i]}"
  env=()
  while IFS= read -r a; do env+=("$a"); done < <("$node_bin" "$here/variants.mjs" env "$s" "$OUT/decode-ab-$l.tuning.json")
  t0=$SECONDS
  rc=0
  env ${clear[@]+"${clear[@]}"} ${env[@]+"${env[@]}"} "$bundle/run-node" "$script" --model "$model" --steps "${STEPS_TIMED:-64}" --prompt "${PROMPT:-64}" ${MAX_MODEL_LEN:+--max-model-len "$MAX_MODEL_LEN"} --json "$OUT/decode-ab-$l.json" --graph-timing 50 \
    > "$OUT/decode-ab-$l.log" 2>&1 || rc=$?
  echo "$rc" > "$OUT/decode-ab-$l.rc"
  echo "decode-ab: $l: exit $rc, $((SECONDS - t0)) s ($(grep -o 'decodeTokS=[0-9.]*' "$OUT/decode-ab-$l.log" | tail -1))"
  # after every setting, so a run cut short by a time limit keeps what it measured
  "$bundle/run-node" "$here/summary.mjs" "$OUT" "${commit:-}" "${labels[@]}" > "$OUT/decode-ab-table.txt"
done
cat "$OUT/decode-ab-table.txt"
