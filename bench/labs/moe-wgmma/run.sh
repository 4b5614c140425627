#!/usr/bin/env bash
# Issue 31, the MoE GEMM at prefill on Hopper: builds bench/labs/moe-wgmma/moe_wgmma_lab.cu on the GPU host (nvcc there;
# no Node, no bundle) three times, BN 256 (the kernel's default: m64n256k16, 4 stages), BN 128 (m64n128k16, 6 stages:
# the wgmma form the FA3 kernel verified, the second build to compare when BN 256 comes out WRONG) and 256p (BN 256 on
# the persistent grid, FK_MOE_WG_PERSISTENT=1, 3 stages), and runs each case of each in its own process (a fault loses only its case; a hang is cut at 120 s and skips that build's later cases): the
# wgmma + TMA route at bs 128 and bs 64 against fk_fused_moe (the engine's mma.sync kernel) and cuBLAS's dense-equivalent
# GEMM, bf16, checked against a float32 reference and fk_fused_moe. Run from the repository's working tree.
#   OUT=/tmp/out bench/labs/moe-wgmma/run.sh [CASE ...]   (default: all 5 cases; a few minutes, most of it the checks)
# Writes $OUT/moe-wgmma-bn<BN>.build.log, $OUT/moe-wgmma-bn<BN>-<case>.log and $OUT/moe-wgmma.jsonl (a line a case and
# build), and prints the check lines, then the table. Exit 1 when a case fails its check, faults or hangs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_lab_setup
fk_lab_cublas "moe-wgmma: no cuBLAS headers found: the cuBLAS column is left out"  # sets blas
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(small mixtral-w13 mixtral-w2 qwen3-w13 qwen3-w2)
: > "$OUT/moe-wgmma.jsonl"
rc=0
# builds: NAME:FLAGS (256p: the persistent grid, BN 256)
builds=("256:-DFK_MOE_WG_BN=256" "128:-DFK_MOE_WG_BN=128" "256p:-DFK_MOE_WG_BN=256 -DFK_MOE_WG_PERSISTENT=1")
for b in "${builds[@]}"; do
  bn="${b%%:*}"
  read -r -a flags <<< "${b#*:}"
  bin="$OUT/moe_wgmma_lab_bn$bn"
  log="$OUT/moe-wgmma-bn$bn.build.log"
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v "${flags[@]}" "$here/moe_wgmma_lab.cu" "${blas[@]}" -o "$bin" \
    > "$log" 2>&1 || { cat "$log"; exit 1; }
  grep -A2 'Function properties for fk_fused_moe_wgmma' "$log" | grep -E 'spill|registers' | sed "s/^/moe-wgmma: BN $bn: /" || true
  hung=""
  for c in "${cases[@]}"; do
    clog="$OUT/moe-wgmma-bn$bn-$c.log"
    if [ -n "$hung" ]; then
      echo "moe-wgmma: BN $bn $c: skipped after the hang in $hung" | tee "$clog"
      continue
    fi
    code=0
    timeout 120 "$bin" "$c" > "$clog" 2>&1 || code=$?
    if [ $code -ne 0 ]; then
      rc=1
      if [ $code -eq 124 ]; then
        echo "moe-wgmma: BN $bn $c: timed out after 120 s (a pipeline hang? rebuild with -DFK_MBAR_WATCHDOG_CYCLES=2000000000)" | tee -a "$clog"
        hung=$c
      fi
      grep -q '^moe-wgmma' "$clog" || tail -5 "$clog"
    fi
    grep '^moe-wgmma: \|^moe-wgmma tuning: ' "$clog" || true
    sed -n 's/^moe-wgmma json: //p' "$clog" >> "$OUT/moe-wgmma.jsonl"
  done
  rm -f "$bin"
done
echo
echo "moe-wgmma table (bf16; ms: median of 20, L2 not flushed; wgmma = gather + GEMM at bs 128, wg_bs64 = tile map + gather + GEMM"
echo "  at bs 64; engine = fk_fused_moe at bs 128 (tile m128); TF: 2 slots N K / time; %dense: wgmma TF / cuBLAS dense TF (target"
echo "  >= 70% at T 4096); x: engine ms / wgmma ms)"
for b in "${builds[@]}"; do
  bn="${b%%:*}"
  echo "BN $bn:"
  printf '%-12s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %7s  %s\n' case gather gemm wgmma wg_bs64 engine cublas wg_TF eng_TF dense_TF %dense x check
  for c in "${cases[@]}"; do
    sed -n 's/^moe-wgmma row: //p' "$OUT/moe-wgmma-bn$bn-$c.log" | grep . || printf '%-12s %s\n' "$c" "(no result: see $OUT/moe-wgmma-bn$bn-$c.log)"
  done
done
exit $rc
