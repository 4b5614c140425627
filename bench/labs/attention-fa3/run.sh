#!/usr/bin/env bash
# Issue 28, attention at FA3 class: builds bench/labs/attention-fa3/attention_fa3_lab.cu on the GPU host (nvcc there; no
# Node, no bundle) and runs each case in its own process (a fault in the new kernel loses only its case; a hang is cut
# at 20 s and skips the cases after it): the FlashAttention-3-style kernel (attention_fa3.cu) against
# fk_varlen_prefill_wgmma at head dim 128 and the mma.sync kernel at 64 (the hd64-* cases, a second build), bf16,
# checked against that kernel and a float32 reference; `sinks` (a third build, FK_SINKS 1: gpt-oss-20b-like, head dim
# 64) against the mma.sync sinks kernel. Run from the repository's working tree.
#   OUT=/tmp/out bench/labs/attention-fa3/run.sh [CASE ...]   (default: all 12 cases; ~1 min)
# Writes $OUT/attention-fa3.build.log, $OUT/attention-fa3-<case>.log and $OUT/attention-fa3.jsonl (a line a case), and
# prints the check lines, then the table. Exit 1 when a case fails its check, faults or hangs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_lab_setup
bin="$OUT/attention_fa3_lab"  # head dim 128; "$bin-hd64": head dim 64 (the hd64-* cases); "$bin-sinks": sinks
fk_lab_build "$here/attention_fa3_lab.cu" "$bin" "$OUT/attention-fa3.build.log" 'fk_varlen_prefill_\(fa3\|wgmma\)'
fk_lab_build "$here/attention_fa3_lab_hd64.cu" "$bin-hd64" "$OUT/attention-fa3-hd64.build.log" 'fk_varlen_prefill_fa3'
fk_lab_build "$here/attention_fa3_lab_sinks.cu" "$bin-sinks" "$OUT/attention-fa3-sinks.build.log" 'fk_varlen_prefill_fa3'
rc=0
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(unit hd64-unit small hd64-small llama-4096 llama-8192 varlen flux hd64-4096 hd64-varlen hd64-dense sinks)
: > "$OUT/attention-fa3.jsonl"
hung=""
for c in "${cases[@]}"; do
  log="$OUT/attention-fa3-$c.log"
  if [ -n "$hung" ]; then  # a pipeline that hangs once hangs everywhere: keep the run short
    echo "attention-fa3: $c: skipped after the hang in $hung" | tee "$log"
    continue
  fi
  code=0
  exe="$bin"; [ "${c#hd64-}" = "$c" ] || exe="$bin-hd64"; [ "$c" != sinks ] || exe="$bin-sinks"
  timeout 20 "$exe" "$c" > "$log" 2>&1 || code=$?
  if [ $code -ne 0 ]; then
    rc=1
    if [ $code -eq 124 ]; then
      echo "attention-fa3: $c: timed out after 20 s (a pipeline hang? a healthy case takes a few s)" | tee -a "$log"
      [ "${c%unit}" != "$c" ] || hung=$c
    fi
    grep -q '^attention-fa3' "$log" || tail -5 "$log"
  fi
  grep '^attention-fa3: ' "$log" || true
  sed -n 's/^attention-fa3 json: //p' "$log" >> "$OUT/attention-fa3.jsonl"
done
echo
echo "attention-fa3 table (bf16; base: wgmma kernel at head dim 128, mma.sync at 64 (sinks: its sinks build); ms: median of 20, L2 not flushed; x: base ms / FA3 ms)"
printf '%-11s %9s %9s %8s %8s %7s %10s  %s\n' case fa3_ms base_ms fa3_TF base_TF x max_diff check
for c in "${cases[@]}"; do
  sed -n 's/^attention-fa3 row: //p' "$OUT/attention-fa3-$c.log" | grep . || printf '%-11s %s\n' "$c" "(no result: see $OUT/attention-fa3-$c.log)"
done
rm -f "$bin" "$bin-hd64" "$bin-sinks"
exit $rc
