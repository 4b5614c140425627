#!/usr/bin/env bash
# Every GPU check still unverified (docs/progress.md), phase by phase, on the GPU host through the gpu-host bundle.
# Each phase has its own timeout and writes its log and JSON under $OUT as soon as it ends; every phase appends a
# line to $OUT/verify.jsonl and rewrites $OUT/verify-table.txt, so a call cut short keeps what was done. Last: a table
# (phase, status, key figure, target, PASS/MISS). Exit 0 only when every phase run is PASS.
#
#   dist/gpu-host/bench/run verify [--budget S] [PHASE ...]     (no phase, or `all`: every phase)
#   dist/gpu-host/bench/suites/verify/run.sh --list
#
# Phases (default timeout in s; T_<PHASE>=S overrides, e.g. T_SELFTEST=400, T_PARITY_F32=300):
#   exploits      (300) run-gpu-tests exploits: the 4 GPU exploits end REWARD_HACK / REWARD_HACK /
#                       INCORRECT_NUMERICAL / RUNTIME_ERROR (issue 5)      -> exploits.log, exploits.json
#   selftest      (300) run bench --self-test --level 1 --backend cuda --shapes production: every case PASSED and
#                       every task's speedup CI contains 1.0 (issue 5)      -> selftest.json, selftest.jsonl, selftest.log
#   sweep         (300) the wall time of that full L1 sweep (all tasks x production shapes), end to end, target
#                       < 180 s (issue 5). Reuses the selftest run's time when selftest ran into this $OUT (no
#                       second run); SWEEP_RERUN=1 runs it again (warm NVRTC cache) -> sweep.json
#   triton-bench  (240) run bench --backend cuda --candidates <bundle>/examples/triton-demo: the 3 Triton
#                       candidates PASSED through the CLI (issue 9)         -> triton-bench.json, triton-bench.log
#   parity-f32    (300) bench/suites/parity/run.sh --dtype f32: ours vs HF in float32, 64/64 identical greedy steps
#                       per model (issue 6)                                 -> parity-f32.json, parity-f32.log
#   serve-full    (480) bench/suites/serve/run.sh without --quick: 256 requests; bs1 >= 240 tok/s, host < 5% at bs 64,
#                       >= 9,000 output tok/s, self-test 100% (issue 7)     -> serve-full.json, serve-full.log
#   e2e-drops     (240) run e2e on a small Llama (random bf16 weights) with examples/e2e-drops: the wrong
#                       SiluAndMul dropped `incorrect`, the host-syncing RMSNorm dropped `compile` (graph
#                       capture) (issue 7)                                  -> e2e-drops.json, e2e-drops.log
#   capture       (300) capture on the same small Llama (cuda, 16 requests), then bench --self-test --captures on
#                       what it wrote: every captured case of every recorded task PASSED, none skipped (issue 7)
#                                                                           -> capture-index.json, capture-bench.json
#   triton-e2e    (240) run e2e on the same small Llama in float32 with examples/triton-rmsnorm (the Triton RMSNorm in every
#                       layer, CUDA-graph decode): ok, no drops, 100% agreement (issue 9)  -> triton-e2e.json, .log
#   spine-tuning  (280) run-gpu-tests norm-tuning sampler-multicta linear-gemv memory-tuning: every setting correct; the table names
#                       the fastest setting per case from the kernel-speed lines (issue 4)  -> spine-tuning.log
#   decode-profile (300) bench/suites/decode-profile/run.sh: a bs-1 decode step of the 8B kernel by kernel under ncu vs the
#                       measured step time (informative: where the step's time goes) (issue 7) -> decode_profile.json
#   tp-gpu-tests  (500) 2 GPUs: run-gpu-tests nccl tensor-parallel serve-tp (issue 10)      -> tp-gpu-tests.log
#   allreduce     (240) 2 GPUs: bench/suites/allreduce/run.sh, busBw >= 0.95x torch (issue 10)  -> allreduce.json
#   tp-llama      (540) 2 GPUs: bench/suites/tp/run.sh, 8B TP 2 vs TP 1 (issue 10)        -> tp_llama.json
#   tp-selftest   (360) 2 GPUs: bench/suites/verify-tp/run.sh (issue 10)                      -> tp_selftest.json
# --summarize [PHASE ...]: run nothing; print each phase's verdict, figure and target from the files already in $OUT.
# --budget S (VERIFY_BUDGET_S, default 570): the whole invocation's wall-clock budget; a phase gets at most what is
# left (minus 15 s for the table), and is SKIPPED when under 30 s are left. Keeps the table inside a 600 s call.
# Without an NVIDIA GPU (/dev/nvidiactl absent; FASTKERNELS_GPU=1 forces, =0 forbids) each phase stops at once
# with status no-gpu. PYTHON / FASTKERNELS_PYTHON: the python with torch (+ transformers, triton); else
# /opt/torch/.venv/bin/python3, else python3.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ALL_PHASES=(exploits selftest sweep triton-bench parity-f32 serve-full e2e-drops capture triton-e2e spine-tuning decode-profile decode-ab tp-gpu-tests allreduce tp-llama tp-selftest)
declare -A DEFAULT_T=([exploits]=300 [selftest]=300 [sweep]=300 [triton-bench]=240 [parity-f32]=300 [serve-full]=480 [e2e-drops]=240 [capture]=300 [triton-e2e]=240
  [spine-tuning]=280 [decode-profile]=300 [decode-ab]=360 [tp-gpu-tests]=500 [allreduce]=240 [tp-llama]=540 [tp-selftest]=360)
declare -A WHAT=(
  [exploits]="GPU exploit corpus: 4 exploits, each with the right status (issue 5)"
  [selftest]="CUDA self-test, all L1 tasks x production shapes: all PASSED, CIs contain 1 (issue 5)"
  [sweep]="wall time of the full L1 sweep < 180 s (issue 5)"
  [triton-bench]="CLI bench of examples/triton-demo on cuda: 3/3 PASSED (issue 9)"
  [parity-f32]="HF parity in float32: 64/64 identical greedy steps per model (issue 6)"
  [serve-full]="serving bench, 256 requests: bs1/host/throughput/self-test targets (issue 7)"
  [e2e-drops]="e2e drop-and-retry: wrong kernel -> incorrect, host sync -> compile (issue 7)"
  [capture]="capture a small Llama on cuda, bench every captured case: all PASSED, none skipped (issue 7)"
  [triton-e2e]="a Triton rms_norm inside the Llama engine, CUDA-graph decode (issue 9)"
  [spine-tuning]="rms_norm at 4/2/1 vectors per thread, the multi-CTA sampler, the bs-1 GEMV vs cuBLASLt, rotary / kv store launch shapes: correct, and the fastest setting per case (issue 4)"
  [decode-ab]="the bs-1 decode step under each launch setting: plain, run 11's defaults, the shipped defaults (issue 7)"
  [decode-profile]="bs-1 decode of the 8B under ncu: kernels per step, time per kernel, gap to the step time (issue 7)"
  [tp-gpu-tests]="2 GPUs: run-gpu-tests nccl tensor-parallel serve-tp (issue 10)"
  [allreduce]="2 GPUs: all-reduce busBw 1 MB..1 GB vs torch.distributed (issue 10)"
  [tp-llama]="2 GPUs: 8B greedy TP 2 = TP 1, decode tok/s bs 1/32, rank kill (issue 10)"
  [tp-selftest]="2 GPUs: e2e --tp 2 self-test, bench --tp 2 all-reduce, serve --tp 2 (issue 10)"
)

declare -A TARGET=(
  [exploits]="4/4 with the right status" [selftest]="all PASSED, CI∋1 11/11 tasks" [sweep]="< 180 s"
  [triton-bench]="3/3 PASSED" [parity-f32]="64/64 greedy, each of 3 models" [serve-full]="bs1>=240, host<5%, 256-req>=9000, 100%"
  [e2e-drops]="rms_norm:compile, silu_and_mul:incorrect"
  [capture]="every captured case PASSED, every task benched"
  [triton-e2e]="outcome ok, no drops, 100% agreement"
  [spine-tuning]="all correct (speeds informative)" [decode-profile]="informative: where a bs-1 step's time goes" [decode-ab]="informative: bs-1 step per setting (240 tok/s = 4.17 ms)" [tp-gpu-tests]="all pass" [allreduce]=">= 0.95x torch at every size"
  [tp-llama]="tokens equal (bf16 tie allowed), rank kill" [tp-selftest]="every check PASS"
)
say() { echo "verify: $*"; }
budget="${VERIFY_BUDGET_S:-570}"
summarize_only=0
phases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --list)
      for p in "${ALL_PHASES[@]}"; do printf '  %-13s %4ss  %s\n' "$p" "${DEFAULT_T[$p]}" "${WHAT[$p]}"; done
      exit 0 ;;
    --budget) budget="$2"; shift 2 ;;
    --summarize) summarize_only=1; shift ;;
    -h|--help) sed -n '2,42p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    all) phases+=("${ALL_PHASES[@]}"); shift ;;
    -*) echo "verify: unknown option $1 (--list, --budget S)" >&2; exit 2 ;;
    *)
      [ -n "${DEFAULT_T[$1]:-}" ] || { echo "verify: unknown phase '$1' (phases: ${ALL_PHASES[*]})" >&2; exit 2; }
      phases+=("$1"); shift ;;
  esac
done
[ ${#phases[@]} -gt 0 ] || phases=("${ALL_PHASES[@]}")

source "$here/../../lib/lib.sh"
fk_setup verify
[ -f "$bundle/fastkernels.mjs" ] || { echo "verify: $bundle/fastkernels.mjs is missing (the bundle was built without the CLI)" >&2; exit 2; }
export FASTKERNELS_BUNDLE="$bundle"
node_bin="$("$bundle/run" --print-node)" || { echo "verify: could not unpack the bundled node" >&2; exit 2; }
t_start=$SECONDS
say "bundle $bundle (commit ${commit:-?}), out $OUT, phases: ${phases[*]}, budget ${budget} s"

# ------------------------------------------------------------------------------------------------ helpers

have_gpu() {
  case "${FASTKERNELS_GPU:-}" in 1) return 0 ;; 0) return 1 ;; esac
  [ -e /dev/nvidiactl ]
}
NO_GPU_MSG="no NVIDIA GPU here (/dev/nvidiactl absent; FASTKERNELS_GPU=1 forces): not run"

find_python() { # $1: python modules the phase needs (comma-separated)
  local c
  for c in "${PYTHON:-}" "${FASTKERNELS_PYTHON:-}" /opt/torch/.venv/bin/python3 python3; do
    [ -n "$c" ] || continue
    command -v "$c" >/dev/null 2>&1 || continue
    if "$c" -c "import $1" >/dev/null 2>&1; then echo "$c"; return 0; fi
  done
  return 1
}

# run_timed PHASE SECONDS CMD...: the command under `timeout` (its whole process group is killed at the limit), stdout
# and stderr to $OUT/PHASE.log and the console. Sets RC (124 or 137: timed out) and SECS.
run_timed() {
  local phase="$1" t="$2"; shift 2
  local s=$SECONDS
  say "$phase: $* (timeout ${t} s)"
  timeout --kill-after=10 "$t" "$@" 2>&1 | tee -a "$OUT/$phase.log"
  RC=${PIPESTATUS[0]}
  SECS=$((SECONDS - s))
}

# summarize PHASE: reads the phase's files, prints "VERDICT<TAB>figure<TAB>target" (node, from the bundle)
summarize() {
  P="$1" O="$OUT" RC="${RC:-0}" SECS="${SECS:-0}" "$node_bin" --input-type=module -e "$SUMMARY_JS" 2>&1 || printf 'MISS\tsummary failed\t-\n'
}

ROWS=()
record() { # PHASE STATUS VERDICT FIGURE TARGET SECONDS
  local row
  row="$(printf '%s\t%s\t%s\t%s\t%s\t%s' "$@")"
  ROWS+=("$row")
  P="$1" S="$2" V="$3" F="$4" T="$5" D="$6" C="$commit" "$node_bin" -e '
    const e = process.env;
    console.log(JSON.stringify({ phase: e.P, status: e.S, verdict: e.V, figure: e.F, target: e.T, seconds: Number(e.D), commit: e.C, at: new Date().toISOString() }));
  ' >> "$OUT/verify.jsonl"
  table > "$OUT/verify-table.txt"
  say "$1: $2, $3: $4 (target $5; ${6} s)"
}

table() {
  printf '%-13s %-10s %-72s %-40s %s\n' phase status "key figure" target PASS/MISS
  printf '%-13s %-10s %-72s %-40s %s\n' ------------- ---------- "$(printf '%.0s-' {1..72})" "$(printf '%.0s-' {1..40})" ---------
  local r phase status verdict figure target secs
  for r in "${ROWS[@]}"; do
    IFS=$'\t' read -r phase status verdict figure target secs <<< "$r"
    printf '%-13s %-10s %-72s %-40s %s\n' "$phase" "$status" "$figure (${secs}s)" "$target" "$verdict"
  done
}

# finish PHASE: status from RC, verdict and figure from summarize
finish() {
  local phase="$1" status=ok line verdict figure target
  case "$RC" in 0) status=ok ;; 124|137) status=timeout ;; *) status="exit-$RC" ;; esac
  line="$(summarize "$phase" | tail -1)"
  IFS=$'\t' read -r verdict figure target <<< "$line"
  [ "$status" = ok ] || [ "$verdict" != PASS ] || verdict=MISS # a phase that did not end cleanly is no PASS
  record "$phase" "$status" "${verdict:-MISS}" "${figure:--}" "${target:--}" "$SECS"
}

# --------------------------------------------------------------------------------------------- the phases

phase_exploits() {
  FK_EXPLOITS_SKIP_SELFTEST=1 run_timed exploits "$1" "$bundle/run-gpu-tests" exploits
  finish exploits
}

run_selftest() { # PHASE TIMEOUT JSON RESULTS: the full L1 self-test sweep, production shapes
  rm -f "$4"
  run_timed "$1" "$2" "$bundle/run" bench --self-test --level 1 --backend cuda --shapes production --progress --json "$3" --results "$4"
}

sweep_timing() { # PHASE JSON: writes $OUT/PHASE.timing.json (wall seconds, exit status, cache cold/warm)
  "$node_bin" -e '
    const [, f, rc, secs, cache] = process.argv;
    require("node:fs").writeFileSync(f, JSON.stringify({ seconds: Number(secs), rc: Number(rc), nvrtcCache: cache }, null, 1) + "\n");
  ' "$OUT/$1.timing.json" "$RC" "$SECS" "$2"
}

nvrtc_cache_state() {
  local d="${FASTKERNELS_CACHE_DIR:-$HOME/.cache/fastkernels}"
  if [ -d "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ]; then echo warm; else echo cold; fi
}

phase_selftest() {
  local cache; cache="$(nvrtc_cache_state)"
  run_selftest selftest "$1" "$OUT/selftest.json" "$OUT/selftest.jsonl"
  sweep_timing selftest "$cache"
  finish selftest
}

phase_sweep() {
  if [ -f "$OUT/selftest.timing.json" ] && [ "${SWEEP_RERUN:-0}" != 1 ]; then
    say "sweep: the selftest run's wall time ($OUT/selftest.timing.json; SWEEP_RERUN=1 runs the sweep again)"
    SECS=0
    RC="$("$node_bin" -e '
      const fs = require("node:fs"); const [, o] = process.argv;
      const t = JSON.parse(fs.readFileSync(o + "/selftest.timing.json", "utf8"));
      fs.writeFileSync(o + "/sweep.json", JSON.stringify({ source: "selftest", ...t }, null, 1) + "\n");
      console.log(t.rc);
    ' "$OUT")" || RC=1
  else
    local cache; cache="$(nvrtc_cache_state)"
    run_selftest sweep "$1" "$OUT/sweep-report.json" "$OUT/sweep.jsonl"
    sweep_timing sweep "$cache"
    "$node_bin" -e '
      const fs = require("node:fs"); const [, o] = process.argv;
      const t = JSON.parse(fs.readFileSync(o + "/sweep.timing.json", "utf8"));
      fs.writeFileSync(o + "/sweep.json", JSON.stringify({ source: "sweep", ...t }, null, 1) + "\n");
    ' "$OUT"
  fi
  finish sweep
}

phase_triton_bench() {
  local py
  if ! py="$(find_python triton,torch)"; then
    RC=3; SECS=0; echo "verify: triton-bench: no python with triton and torch (PYTHON=... to point at one)" | tee -a "$OUT/triton-bench.log"
    record triton-bench no-triton MISS "no python with triton" "${TARGET[triton-bench]}" 0; return
  fi
  FASTKERNELS_PYTHON="$py" run_timed triton-bench "$1" "$bundle/run" bench --backend cuda --candidates "$bundle/examples/triton-demo" --progress --json "$OUT/triton-bench.json"
  finish triton-bench
}

phase_parity_f32() {
  local py
  if ! py="$(find_python torch,transformers,safetensors)"; then
    RC=3; SECS=0; echo "verify: parity-f32: no python with torch, transformers and safetensors (PYTHON=...)" | tee -a "$OUT/parity-f32.log"
    record parity-f32 no-torch MISS "no python with torch+transformers" "${TARGET[parity-f32]}" 0; return
  fi
  OUT="$OUT" PYTHON="$py" run_timed parity-f32 "$1" "$bundle/bench/suites/parity/run.sh" --dtype f32
  finish parity-f32
}

# A phase that is one bench script: run it under the phase's time limit with OUT passed on, then record the verdict.
bench_phase() { # PHASE TIMEOUT SCRIPT
  OUT="$OUT" run_timed "$1" "$2" "$bundle/bench/$3"
  finish "$1"
}

phase_serve_full() {
  OUT="$OUT" run_timed serve-full "$1" "$bundle/bench/suites/serve/run.sh"
  [ -f "$OUT/serve.json" ] && cp -f "$OUT/serve.json" "$OUT/serve-full.json"
  finish serve-full
}

phase_spine_tuning() {
  FASTKERNELS_GPU=1 run_timed spine-tuning "$1" "$bundle/run-gpu-tests" norm-tuning sampler-multicta linear-gemv memory-tuning
  finish spine-tuning
}

phase_decode_ab() { bench_phase decode-ab "$1" suites/decode-ab/run.sh; }

phase_decode_profile() { bench_phase decode-profile "$1" suites/decode-profile/run.sh; }

phase_tp_gpu_tests() {
  FASTKERNELS_GPU=1 run_timed tp-gpu-tests "$1" "$bundle/run-gpu-tests" nccl tensor-parallel serve-tp
  finish tp-gpu-tests
}

phase_allreduce() { bench_phase allreduce "$1" suites/allreduce/run.sh; }

phase_tp_llama() { bench_phase tp-llama "$1" suites/tp/run.sh; }

phase_tp_selftest() { bench_phase tp-selftest "$1" suites/verify-tp/run.sh; }

# The small Llama both e2e phases use (4 layers, hidden 1024, GQA 16/4, vocab 32000); random bf16 weights are
# drawn on the device by `e2e`.
write_small_llama() { fk_llama_config "$1/config.json" 1024 2816 4 16 4 64 32000 2048 10000.0 1 2; }

phase_e2e_drops() {
  local model="$OUT/e2e-drops-model"
  write_small_llama "$model"
  rm -f "$OUT/e2e-drops.json" "$OUT/e2e-drops-details.json"
  run_timed e2e-drops "$1" "$bundle/run" e2e --model "$model" --backend cuda --candidates "$bundle/examples/e2e-drops" \
    --requests synthetic:32:32-256:16-64:0 --latency-batch-sizes 1,8 --latency-prompt 64 --latency-output 32 --warmups 1 --repeats 2 \
    --max-num-seqs 32 --max-model-len 512 --num-kv-blocks 2048 --timeout 120 \
    --out "$OUT/e2e-drops.json" --details "$OUT/e2e-drops-details.json"
  finish e2e-drops
}

# capture's eager engine run on the device, then the captured cases (their shapes and recorded token ids, positions,
# block tables ...) benched baseline against baseline on the device beside the tasks' small CI cases (--shapes ci: the
# production cases are the selftest phase's): the path from a production run to bench cases. Run 21: capture 13 s, the
# bench of L1-L3 170 s (cut there by a 200 s phase limit) and L4 alone 46 s, hence 300 s.
phase_capture() {
  local model="$OUT/e2e-drops-model" caps="$OUT/capture-caps" s
  write_small_llama "$model"
  rm -rf "$caps" "$OUT/capture-bench.json" "$OUT/capture-index.json"
  run_timed capture "$(( $1 / 3 ))" "$bundle/run" capture --model "$model" --backend cuda --workload synthetic:16:32-256:8-32:0 \
    --max-model-len 512 --num-kv-blocks 2048 --out "$caps"
  s=$SECS
  if [ "$RC" = 0 ]; then
    cp "$caps/index.json" "$OUT/capture-index.json"
    run_timed capture "$(( $1 - s ))" "$bundle/run" bench --self-test --backend cuda --captures "$caps" --max-shapes 2 --shapes ci \
      --iters 10 --warmup-ms 20 --json "$OUT/capture-bench.json"
    SECS=$((SECS + s))
  fi
  finish capture
}

# In float32 (--dtype f32): a random-weight model's greedy tokens sit on near-ties, so in bf16 any other reduction
# order (Triton's tl.sum against our block reduction) flips a rounding and the request diverges (run 7: 18/32
# requests exact, C = 0.67). In float32 the two kernels differ by an fp32 ulp, far below the margins, so agreement
# tests the kernel rather than the ties.
phase_triton_e2e() {
  local model="$OUT/e2e-drops-model"
  write_small_llama "$model"
  rm -f "$OUT/triton-e2e.json" "$OUT/triton-e2e-details.json"
  run_timed triton-e2e "$1" "$bundle/run" e2e --model "$model" --dtype f32 --backend cuda --candidates "$bundle/examples/triton-rmsnorm" \
    --requests synthetic:32:32-256:16-64:0 --latency-batch-sizes 1,8 --latency-prompt 64 --latency-output 32 --warmups 1 --repeats 2 \
    --max-num-seqs 32 --max-model-len 512 --num-kv-blocks 2048 --timeout 120 \
    --out "$OUT/triton-e2e.json" --details "$OUT/triton-e2e-details.json"
  finish triton-e2e
}

# ------------------------------------------------------------------------- summaries (JSON -> figure, target)

read -r -d '' SUMMARY_JS <<'JS'
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
const { P: phase, O: out, RC: rc } = process.env;
const read = (f) => (existsSync(`${out}/${f}`) ? JSON.parse(readFileSync(`${out}/${f}`, 'utf8')) : null);
const text = (f) => (existsSync(`${out}/${f}`) ? readFileSync(`${out}/${f}`, 'utf8') : '');
const clip = (s, n) => (s.length > n ? `${s.slice(0, n - 3)}...` : s);
const emit = (ok, figure, target) => console.log([ok ? 'PASS' : 'MISS', clip(figure.replace(/\s+/g, ' '), 100), target].join('\t'));
const x = (v, d = 2) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(d) : '-');
try {
  if (phase === 'exploits') {
    const log = text('exploits.log');
    const tests = [...log.matchAll(/^(ok  |FAIL|skip) (.+?)(?: \((\d+) ms\))?$/gm)].map((m) => ({ status: m[1].trim(), name: m[2], ms: m[3] ? Number(m[3]) : null }));
    const m = [...log.matchAll(/^gpu-tests-file: .*: (\d+) passed, (\d+) failed, (\d+) skipped$/gm)].pop();
    const [passed, failed, skipped] = m ? m.slice(1).map(Number) : [0, tests.filter((t) => t.status === 'FAIL').length, 0];
    writeFileSync(`${out}/exploits.json`, JSON.stringify({ rc: Number(rc), passed, failed, skipped, tests }, null, 1) + '\n');
    const bad = tests.filter((t) => t.status === 'FAIL').map((t) => t.name.replace(/^.*> /, '').slice(0, 24));
    emit(passed === 4 && failed === 0, `${passed}/4 exploits caught${bad.length ? `; FAIL: ${bad.join('; ')}` : ''}${m ? '' : ' (no report line)'}`, '4/4 with the right status');
  } else if (phase === 'selftest') {
    const r = read('selftest.json');
    if (!r) emit(false, 'no selftest.json', 'all PASSED, CI∋1 11/11 tasks');
    else {
      const pass = r.results.filter((c) => c.status === 'PASSED').length;
      const tasks = r.summary.tasks;
      const ci = tasks.filter((t) => t.ciLow !== null && t.ciHigh !== null && t.ciLow <= 1 && t.ciHigh >= 1);
      const notPass = r.results.filter((c) => c.status !== 'PASSED').map((c) => `${c.task.slice(3)}/${c.case}:${c.status}`);
      const noCi = tasks.filter((t) => !ci.includes(t)).map((t) => `${t.task.slice(3)} [${x(t.ciLow, 3)},${x(t.ciHigh, 3)}]`);
      const ok = r.complete && pass === r.results.length && ci.length === tasks.length && tasks.length === 11;
      emit(ok, `${pass}/${r.results.length} cases PASSED, CI∋1 ${ci.length}/${tasks.length} tasks${r.complete ? '' : ', INCOMPLETE'}` +
        `${notPass.length ? `; not PASSED: ${notPass.slice(0, 3).join(' ')}` : ''}${noCi.length ? `; CI: ${noCi.slice(0, 2).join(' ')}` : ''}`, 'all PASSED, CI∋1 11/11 tasks');
    }
  } else if (phase === 'sweep') {
    const s = read('sweep.json');
    const rep = read(s?.source === 'sweep' ? 'sweep-report.json' : 'selftest.json');
    const n = rep?.results?.length ?? 0;
    const t = rep?.summary?.tasks?.length ?? 0;
    const ok = Boolean(s && rep?.complete && s.rc === 0 && s.seconds < 180);
    emit(ok, `${s ? s.seconds : '-'} s for ${t} tasks x ${n} cases (${s?.nvrtcCache ?? '?'} NVRTC cache${s?.source === 'selftest' ? ', the selftest run' : ''})${rep?.complete ? '' : ', INCOMPLETE'}`, '< 180 s');
  } else if (phase === 'triton-bench') {
    const r = read('triton-bench.json');
    if (!r) emit(false, 'no triton-bench.json', '3/3 PASSED');
    else {
      const ts = r.summary.tasks;
      const pass = ts.filter((t) => t.status === 'PASSED');
      emit(r.complete && pass.length === 3 && ts.length === 3,
        `${pass.length}/${ts.length} PASSED: ${ts.map((t) => `${t.task.slice(3)} ${t.status === 'PASSED' ? `${x(t.speedup)}x` : t.status}`).join(', ')}`, '3/3 PASSED (speedups informative)');
    }
  } else if (phase === 'parity-f32') {
    const r = read('parity-f32.json');
    if (!r) emit(false, 'no parity-f32.json', '64/64 greedy, each model');
    else {
      const n = r.max_tokens;
      const ms = Object.entries(r.models);
      const parts = ms.map(([k, v]) => (v.error ? `${k} ERROR` : `${k} ${v.summary.greedy_identical} (${v.verdict}, err ${x(v.summary.prompt_max_abs_err, 4)})`));
      const ok = ms.length === 3 && ms.every(([, v]) => !v.error && v.summary.greedy_identical === `${n}/${n}`);
      emit(ok, parts.join(', '), `${n}/${n} greedy, each of 3 models`);
    }
  } else if (phase === 'serve-full') {
    const r = read('serve-full.json');
    if (!r) emit(false, 'no serve.json', 'bs1>=240, host<5%, 256-req>=9000, 100%');
    else {
      const s = r.summary ?? {};
      // selfTestCiHoldsOne is absent from runs before the intervals existed (run 10 and earlier): not held against them
      const checks = [s.decodeBs1TokS >= 240, s.hostFractionBs64 < 0.05, s.throughputOutputTokS >= 9000, s.selfTestAgreement === 1 && s.selfTestCiHoldsOne !== false];
      const marks = checks.map((c) => (c ? '' : '!'));
      emit(checks.every(Boolean) && r.settings?.numRequests === 256 && !(r.errors ?? []).length,
        `bs1 ${x(s.decodeBs1TokS, 1)}${marks[0]}, host ${x(100 * s.hostFractionBs64, 2)}%${marks[1]}, ${r.settings?.numRequests}-req ${x(s.throughputOutputTokS, 0)}${marks[2]} tok/s, self-test ${x(100 * s.selfTestAgreement, 1)}%${s.selfTestCiHoldsOne === undefined ? '' : `, CIs∋1 ${s.selfTestCiHoldsOne}`}${marks[3]}${(r.errors ?? []).length ? `, ${r.errors.length} errors` : ''}`,
        'bs1>=240, host<5%, 256-req>=9000, 100% + CIs∋1');
    }
  } else if (phase === 'e2e-drops') {
    const r = read('e2e-drops.json');
    const m = r?.models?.[0];
    if (!m) emit(false, `no e2e-drops.json${rc !== '0' ? ` (exit ${rc})` : ''}`, 'rms_norm:compile, silu_and_mul:incorrect');
    else {
      const got = Object.fromEntries(m.drops.map((d) => [d.task, d.category]));
      const ok = m.drops.length === 2 && got['L1/rms_norm'] === 'compile' && got['L1/silu_and_mul'] === 'incorrect' && m.outcome === 'ok';
      emit(ok, `drops ${m.drops.map((d) => `${d.task.slice(3)}:${d.category}`).join(', ') || 'none'}; outcome ${m.outcome}; as-is ${m.asIs?.outcome ?? '-'}`, 'rms_norm:compile, silu_and_mul:incorrect');
    }
  } else if (phase === 'capture') {
    const idx = read('capture-index.json');
    const r = read('capture-bench.json');
    if (!idx || !r) emit(false, `no ${idx ? 'capture-bench' : 'capture-index'}.json${rc !== '0' ? ` (exit ${rc})` : ''}`, 'every captured case PASSED, every task benched');
    else {
      const tasks = Object.keys(idx.tasks);
      const rows = r.results.filter((c) => c.case.startsWith('cap-'));
      const benched = new Set(rows.map((c) => c.task));
      const bad = rows.filter((c) => c.status !== 'PASSED');
      const missing = tasks.filter((t) => !benched.has(t));
      emit(bad.length === 0 && missing.length === 0 && rows.length > 0,
        `${rows.length - bad.length}/${rows.length} captured cases PASSED over ${benched.size}/${tasks.length} tasks${bad.length ? `; ${bad.slice(0, 2).map((c) => `${c.task.slice(3)} ${c.status}`).join(', ')}` : ''}${missing.length ? `; not benched: ${missing.join(', ')}` : ''}`,
        'every captured case PASSED, every task benched');
    }
  } else if (phase === 'triton-e2e') {
    const r = read('triton-e2e.json');
    const m = r?.models?.[0];
    if (!m) emit(false, `no triton-e2e.json${rc !== '0' ? ` (exit ${rc})` : ''}`, 'outcome ok, no drops, 100% agreement');
    else {
      const exact = (m.discrepancies ?? []).filter((d) => d === 0).length;
      const n = (m.discrepancies ?? []).length;
      const ok = m.outcome === 'ok' && m.drops.length === 0 && n > 0 && exact === n;
      emit(ok, `outcome ${m.outcome}; drops ${m.drops.map((d) => `${d.task.slice(3)}:${d.category}`).join(', ') || 'none'}; exact ${exact}/${n}; thr x${x(m.throughputSpeedup)}`, 'outcome ok, no drops, 100% agreement');
    }
  } else if (phase === 'spine-tuning' || phase === 'tp-gpu-tests') {
    const log = text(`${phase}.log`);
    const m = [...log.matchAll(/^gpu-tests: (\d+) passed, (\d+) failed/gm)].pop();
    const fails = [...log.matchAll(/^FAIL (.+?)(?: \(\d+ ms\))?$/gm)].map((f) => f[1].replace(/^.*> /, '').slice(0, 30));
    let best = '';
    if (phase === 'spine-tuning') {
      // kernel-speed: <op> <case...> [<setting>] <us> us = ...: the fastest setting per case
      const rows = [...log.matchAll(/^kernel-speed: (\S+) (.+?) \[(\S+)\] ([\d.]+) us/gm)].map((r) => ({ key: `${r[1]} ${r[2]}`, setting: r[3], us: Number(r[4]) }));
      const byCase = new Map();
      for (const r of rows) if (!byCase.has(r.key) || byCase.get(r.key).us > r.us) byCase.set(r.key, r);
      const wins = {};
      for (const r of byCase.values()) wins[r.setting] = (wins[r.setting] ?? 0) + 1;
      best = Object.keys(wins).length ? `; fastest: ${Object.entries(wins).map(([k, v]) => `${k} ${v}x`).join(', ')}` : '';
    }
    emit(Boolean(m) && m[2] === '0', m ? `${m[1]} passed, ${m[2]} failed${fails.length ? `; FAIL: ${fails.join('; ')}` : ''}${best}` : 'no gpu-tests line', phase === 'spine-tuning' ? 'all correct (speeds informative)' : 'all pass');
  } else if (phase === 'decode-ab') {
    const r = read('decode_ab.json');
    const tgt = 'informative: bs-1 step per setting (240 tok/s = 4.17 ms)';
    if (!r) emit(false, `no decode_ab.json${rc !== '0' ? ` (exit ${rc})` : ''}`, tgt);
    else {
      const rows = Object.entries(r.settings);
      const best = rows.filter(([, v]) => v.stepMs).sort((a, b) => a[1].stepMs - b[1].stepMs)[0];
      emit(rows.every(([, v]) => v.rc === 0 && v.stepMs), `${rows.map(([k, v]) => `${k} ${v.rc === null ? 'not run' : x(v.stepMs, 3)}`).join(', ')} ms${best ? `; best ${best[0]} ${x(1000 / best[1].stepMs, 1)} tok/s` : ''}`, tgt);
    }
  } else if (phase === 'decode-profile') {
    // informative: PASS when the breakdown exists (ncu ran and the decode steps were found in its launch list)
    const r = read('decode_profile.json');
    const tgt = "informative: where a bs-1 step's time goes";
    if (!r) emit(false, `no decode_profile.json${rc !== '0' ? ` (exit ${rc})` : ''}`, tgt);
    else if (r.error || !r.perKernel) emit(false, `step ${x(r.stepMs, 3)} ms; no kernel breakdown: ${r.error ?? 'no ncu data'}`, tgt);
    else {
      // the figure is clipped at 100 characters: names at 14, ms at 2 decimals
      const top = r.perKernel.slice(0, 3).map((k) => `${k.name.replace(/^fk_/, '').replace(/ \(cuBLASLt\)$/, '').slice(0, 14)} ${x(k.usPerStep / 1000, 2)}`).join(', ');
      emit(true, `step ${x(r.stepMs, 3)} = kernels ${x(r.kernelSumMs, 3)} + gap ${x(r.gapMs, 3)} ms; ${top}`, tgt);
    }
  } else if (phase === 'allreduce') {
    const r = read('allreduce.json');
    const s = r?.summary;
    emit(Boolean(s) && s.minRatio >= 0.95, s ? `busBw vs torch: min ${x(s.minRatio, 3)}x, geomean ${x(s.geomeanRatio, 3)}x` : 'no allreduce.json', '>= 0.95x torch at every size');
  } else if (phase === 'tp-llama' || phase === 'tp-selftest') {
    const r = read(phase === 'tp-llama' ? 'tp_llama.json' : 'tp_selftest.json');
    const checks = r?.checks ?? {};
    const entries = Object.entries(checks);
    // informative checks: a bf16 greedy divergence at an exact tie; whether decode graphs were captured with the
    // NCCL calls inside or fell back to eager (both are correct runs; run 9 reported CAPTURED as a MISS)
    const ok = entries.length > 0 && entries.every(([k, v]) => v === 'PASS' || (k === 'greedyBf16' && v === 'TIE') || (k === 'e2eTp2Graphs' && (v === 'CAPTURED' || v === 'EAGER')));
    emit(ok, entries.length ? entries.map(([k, v]) => `${k} ${v}`).join(', ') : `no ${phase === 'tp-llama' ? 'tp_llama' : 'tp_selftest'}.json`, phase === 'tp-llama' ? 'tokens equal (bf16 tie allowed), rank kill' : 'every check PASS');
  } else emit(false, `unknown phase ${phase}`, '-');
} catch (e) {
  emit(false, `summary error: ${String(e?.message ?? e).slice(0, 80)}`, '-');
}
JS

# -------------------------------------------------------------------------------------------------- main

if [ "$summarize_only" = 1 ]; then
  for p in "${phases[@]}"; do RC=0; SECS=0; printf '%-13s %s\n' "$p" "$(summarize "$p" | tail -1)"; done
  exit 0
fi
if have_gpu && [ ! -f "$OUT/doctor.txt" ]; then
  timeout 60 "$bundle/run" doctor > "$OUT/doctor.txt" 2>&1 || true
  grep -i -E "device|driver|nvrtc|cublas" "$OUT/doctor.txt" | head -6 | sed 's/^/verify: doctor: /'
fi
for p in "${phases[@]}"; do
  tvar="T_$(echo "$p" | tr 'a-z-' 'A-Z_')"
  t="${!tvar:-${DEFAULT_T[$p]}}"
  left=$((budget - (SECONDS - t_start) - 15))
  if [ "$left" -lt 30 ]; then
    record "$p" skipped MISS "not run: ${left} s of the ${budget} s budget left" "${TARGET[$p]}" 0
    continue
  fi
  [ "$t" -le "$left" ] || { say "$p: timeout ${t} s cut to the ${left} s left of the budget"; t=$left; }
  if ! have_gpu; then
    echo "verify: $p: $NO_GPU_MSG" | tee "$OUT/$p.log" >&2
    record "$p" no-gpu MISS "not run: no GPU" "${TARGET[$p]}" 0
    continue
  fi
  : > "$OUT/$p.log"
  RC=0; SECS=0
  "phase_${p//-/_}" "$t"
done

echo
say "results in $OUT (verify.jsonl, verify-table.txt, per-phase logs and JSON); total $((SECONDS - t_start)) s"
table
for r in "${ROWS[@]}"; do case "$r" in *$'\tPASS\t'*) ;; *) exit 1 ;; esac; done
exit 0
