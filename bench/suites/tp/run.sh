#!/usr/bin/env bash
# Issue 10 part 3: tensor-parallel Llama on 2 GPUs, through `fastkernels generate --tp N` (one process per GPU under the
# launcher, each rank reading its slice of every weight). On a random-weight Llama-3-8B-shape checkpoint written by
# `init-weights --tiled` (bf16, tiled from seeded pools; kept in $OUT/tp-llama3-8b, reused by later runs):
#  1. greedy 64 steps at TP 1 and TP 2, one prompt: identical tokens (bf16, the checkpoint's dtype; where they
#     differ, the first divergent step and TP 1's top-2 logit margin there tell a bf16 near-tie from a bug), and the
#     same in float32 (no ties: must be identical);
#  2. decode tok/s at bs 1 (the greedy run) and bs 32 (32 prompts of 128 tokens, 64 new each), TP 1 and TP 2;
#  3. rank kill: a long TP 2 run, rank 1 SIGKILLed mid-run; rank 0 must stop with a clear error within the NCCL
#     timeout (FASTKERNELS_NCCL_TIMEOUT_MS=120000 here): the launcher reports the rank and stops the others.
# Writes $OUT/tp_llama.json; the last lines are the checks.
#   dist/gpu-host/bench/run tp [--quick]
# --quick: 8 layers instead of 32 (a 5.6 GB checkpoint, ~20 s to write), no float32 check.
# Budget: init-weights --tiled of the full 8B (16 GB) is bounded by the disk write, about a minute (drawing every
# value, without --tiled, took ~8 min); then each generate run loads the checkpoint (16 GB; TP 2: 8 GB per rank) in
# ~10-30 s: about 5 min for the 8 runs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup tp-llama
layers=32; f32=1
for x in "$@"; do
  case "$x" in
    --quick) layers=8; f32=0 ;;
    *) echo "tp-llama: unknown argument $x" >&2; exit 1 ;;
  esac
done
node_bin="$("$bundle/run" --print-node)" || { echo "tp-llama: could not unpack the bundled node" >&2; exit 1; }
fk_nccl_env
work="$OUT/tp-llama-work"
model="$OUT/tp-llama3-8b-l$layers"
mkdir -p "$work" "$model"
echo "tp-llama: bundle $bundle (commit ${commit:-?}), out $OUT, $layers layers, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE, FASTKERNELS_NCCL_LIB_DIRS=${FASTKERNELS_NCCL_LIB_DIRS:-<discovery>}"

# ---- the checkpoint (Llama-3-8B shape; init-weights on the host, once) ------------------------------------------
fk_llama3_8b_config "$work/config.json" "$layers"
init_s=0
if [ -f "$model/model.safetensors" ] && cmp -s "$work/config.json" "$model/config.json"; then
  echo "tp-llama: reusing the checkpoint in $model"
else
  echo "tp-llama: init-weights --tiled (seed 1, bf16) -> $model"
  t=$SECONDS
  "$bundle/run" init-weights --config "$work/config.json" --out "$model" --seed 1 --dtype bf16 --tiled
  cp "$work/config.json" "$model/config.json"
  init_s=$((SECONDS - t))
fi

# prompts: one for the greedy runs, 32 x 128 tokens for bs 32 (a seeded LCG, ids below the vocabulary)
"$node_bin" -e '
  const fs = require("fs");
  let s = 12345;
  const next = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) % 128000;
  fs.writeFileSync(process.argv[1], Array.from({ length: 32 }, () => JSON.stringify({ prompt_ids: Array.from({ length: 128 }, next) })).join("\n") + "\n");
' "$work/prompts32.jsonl"
greedy_ids="128000,791,1917,315,11376,374,264,3682,315"

# ---- runs ---------------------------------------------------------------------------------------------------------
# run NAME ARGS...: generate --json into $work/NAME.json (stderr in NAME.log); a failure is recorded, the rest go on
run() {
  local name="$1"; shift
  local t=$SECONDS rc=0
  timeout "${RUN_TIMEOUT:-900}" "$bundle/run" generate --model "$model" --backend cuda --json "$@" > "$work/$name.json" 2> "$work/$name.log" || rc=$?
  echo "tp-llama: $name: exit $rc in $((SECONDS - t)) s"
  echo "$rc" > "$work/$name.rc"
  [ "$rc" -eq 0 ] || tail -5 "$work/$name.log" >&2
}
rm -f "$work"/*.json "$work"/*.rc "$work"/*.safetensors
run warmup --prompt-ids 1,2,3 --max-tokens 2            # compiles the kernels into the disk cache
for tp in 1 2; do
  run "greedy_bf16_tp$tp" --tp $tp --prompt-ids "$greedy_ids" --max-tokens 64 --logits-out "$work/logits_bf16_tp$tp.safetensors"
  run "bs32_tp$tp" --tp $tp --prompt-file "$work/prompts32.jsonl" --max-tokens 64
  if [ $f32 -eq 1 ]; then run "greedy_f32_tp$tp" --tp $tp --dtype f32 --prompt-ids "$greedy_ids" --max-tokens 64; fi
done

# ---- rank kill ----------------------------------------------------------------------------------------------------
echo "tp-llama: rank kill: TP 2, 32 prompts x 4000 tokens; SIGKILL to rank 1 once rank 0 generates"
kill_timeout_ms=120000
FASTKERNELS_NCCL_TIMEOUT_MS=$kill_timeout_ms "$bundle/run" generate --model "$model" --backend cuda --tp 2 \
  --prompt-file "$work/prompts32.jsonl" --max-tokens 4000 > /dev/null 2> "$work/kill.log" &
cli_pid=$!
victim=""
for _ in $(seq 1 600); do   # up to 300 s for both ranks to load
  if grep -q '^model ' "$work/kill.log" 2>/dev/null; then
    sleep 3
    for p in /proc/[0-9]*; do
      [ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = "$cli_pid" ] || continue
      if tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx 'RANK=1'; then victim="${p#/proc/}"; fi
    done
    break
  fi
  kill -0 "$cli_pid" 2>/dev/null || break
  sleep 0.5
done
kill_rc=""; kill_ms=""
if [ -n "$victim" ]; then
  echo "tp-llama: killing rank 1 (pid $victim)"
  t0=$(date +%s%N)
  kill -9 "$victim"
  wait "$cli_pid" && kill_rc=0 || kill_rc=$?
  kill_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "tp-llama: the CLI exited with $kill_rc after $kill_ms ms"
else
  echo "tp-llama: rank 1 of CLI pid $cli_pid not found (or the run ended first); see $work/kill.log" >&2
  kill "$cli_pid" 2>/dev/null || true
  wait "$cli_pid" 2>/dev/null || true
fi

# ---- merge and checks ---------------------------------------------------------------------------------------------
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
W="$work" O="$OUT" C="$commit" D="$driver" G="$gpu" L="$layers" F32="$f32" I="$init_s" KRC="$kill_rc" KMS="$kill_ms" KT="$kill_timeout_ms" "$node_bin" -e '
const fs = require("fs");
const e = process.env, W = e.W;
const read = (n) => { try { return JSON.parse(fs.readFileSync(`${W}/${n}.json`, "utf8")); } catch { return null; } };
const log = (n) => { try { return fs.readFileSync(`${W}/${n}.log`, "utf8").split("\n").filter(Boolean).slice(-6); } catch { return []; } };
/** float32 rows of logits.0 [steps, V] from a --logits-out file */
function logits(file) {
  try {
    const b = fs.readFileSync(file);
    const n = Number(b.readBigUInt64LE(0));
    const h = JSON.parse(b.subarray(8, 8 + n).toString());
    const t = h["logits.0"];
    const [steps, V] = t.shape;
    const data = new Float32Array(b.buffer.slice(b.byteOffset + 8 + n + t.data_offsets[0], b.byteOffset + 8 + n + t.data_offsets[1]));
    return Array.from({ length: steps }, (_, s) => data.subarray(s * V, (s + 1) * V));
  } catch { return null; }
}
const top2 = (row) => { let a = -Infinity, b = -Infinity, ia = -1; for (let i = 0; i < row.length; i++) { const v = row[i]; if (v > a) { b = a; a = v; ia = i; } else if (v > b) b = v; } return { top: ia, margin: a - b, value: a }; };
function greedy(dtype) {
  const [a, b] = [read(`greedy_${dtype}_tp1`), read(`greedy_${dtype}_tp2`)];
  if (!a || !b) return { error: !a ? log(`greedy_${dtype}_tp1`) : log(`greedy_${dtype}_tp2`) };
  const ta = a.outputs[0].token_ids, tb = b.outputs[0].token_ids;
  let first = -1;
  for (let i = 0; i < Math.max(ta.length, tb.length); i++) if (ta[i] !== tb[i]) { first = i; break; }
  const out = { steps: ta.length, identical: first < 0, tp1: ta, tp2: tb };
  if (first >= 0) {
    out.firstDivergentStep = first;
    const la = logits(`${W}/logits_${dtype}_tp1.safetensors`), lb = logits(`${W}/logits_${dtype}_tp2.safetensors`);
    if (la && lb) {
      const x = top2(la[first]), y = top2(lb[first]);
      // a bf16 near-tie: the top-2 margin is below one bf16 step (2^-7 relative) of the top logit
      out.atDivergence = { tp1Top2Margin: x.margin, tp2Top2Margin: y.margin, topLogit: x.value, bf16Step: Math.abs(x.value) * 2 ** -7, nearTie: x.margin <= Math.abs(x.value) * 2 ** -7 };
    }
  }
  return out;
}
const decode = [];
for (const bs of [1, 32]) for (const tp of [1, 2]) {
  const r = read(bs === 1 ? `greedy_bf16_tp${tp}` : `bs32_tp${tp}`);
  decode.push({ tp, bs, decodeTokS: r?.timing?.decode_tokens_per_s ?? null, decodeMs: r?.timing?.decode_ms ?? null, prefillMs: r?.timing?.prefill_ms ?? null, weightsMs: r?.timing?.weights_ms ?? null, ...(r ? {} : { error: log(bs === 1 ? `greedy_bf16_tp${tp}` : `bs32_tp${tp}`) }) });
}
const tok = (tp, bs) => decode.find((d) => d.tp === tp && d.bs === bs)?.decodeTokS;
const speedup = Object.fromEntries([1, 32].map((bs) => [`bs${bs}`, tok(1, bs) && tok(2, bs) ? tok(2, bs) / tok(1, bs) : null]));
const klog = (() => { try { return fs.readFileSync(`${W}/kill.log`, "utf8"); } catch { return ""; } })();
const kmsg = klog.split("\n").filter((l) => /rank 1 .*killed|stopping the other|--tp 2:/.test(l));
const kill = { exitCode: e.KRC === "" ? null : Number(e.KRC), seconds: e.KMS === "" ? null : Number(e.KMS) / 1000, ncclTimeoutS: Number(e.KT) / 1000, messages: kmsg, tail: klog.split("\n").filter(Boolean).slice(-8) };
kill.ok = kill.exitCode !== null && kill.exitCode !== 0 && kill.seconds !== null && kill.seconds < kill.ncclTimeoutS && kmsg.some((l) => /rank 1 \(pid \d+\) was killed by SIGKILL/.test(l));
const g = { bf16: greedy("bf16"), ...(e.F32 === "1" ? { f32: greedy("f32") } : {}) };
const report = {
  commit: e.C, gpu: e.G, driver: e.D, world: 2,
  model: { shape: "Llama-3-8B", layers: Number(e.L), dtype: "bf16", weights: "init-weights --tiled seed 1", initSeconds: Number(e.I) || null },
  greedy: g, decode, speedupTp2OverTp1: speedup, rankKill: kill,
};
report.checks = {
  greedyBf16: g.bf16.identical === true ? "PASS" : g.bf16.atDivergence?.nearTie ? "TIE" : "MISS",
  ...(g.f32 ? { greedyF32: g.f32.identical === true ? "PASS" : "MISS" } : {}),
  rankKill: kill.ok ? "PASS" : "MISS",
};
fs.writeFileSync(`${e.O}/tp_llama.json`, JSON.stringify(report, null, 2) + "\n");
const f = (x, p = 1) => (x === null || x === undefined ? "-" : x.toFixed(p));
console.log(`\ntp_llama.json: ${e.O}/tp_llama.json (commit ${e.C || "?"}, ${e.G || "?"}, driver ${e.D || "?"}, ${e.L} layers)`);
console.log(`${"tp".padStart(3)} ${"bs".padStart(3)} ${"decode tok/s".padStart(13)} ${"weights ms".padStart(11)} ${"prefill ms".padStart(11)}`);
for (const d of decode) console.log(`${String(d.tp).padStart(3)} ${String(d.bs).padStart(3)} ${f(d.decodeTokS).padStart(13)} ${f(d.weightsMs, 0).padStart(11)} ${f(d.prefillMs, 1).padStart(11)}`);
console.log(`TP 2 / TP 1 decode: bs1 ${f(speedup.bs1, 2)}x, bs32 ${f(speedup.bs32, 2)}x`);
const gline = (d, x) => x.error ? `ERROR ${x.error.slice(-1)[0] ?? ""}` : x.identical ? `${x.steps}/${x.steps} identical` : `diverge at step ${x.firstDivergentStep}${x.atDivergence ? ` (TP 1 top-2 margin ${x.atDivergence.tp1Top2Margin.toFixed(4)}, bf16 step ${x.atDivergence.bf16Step.toFixed(4)})` : ""}`;
console.log(`greedy bf16 TP 2 vs TP 1: ${gline("bf16", g.bf16)}  ${report.checks.greedyBf16}`);
if (g.f32) console.log(`greedy f32  TP 2 vs TP 1: ${gline("f32", g.f32)}  ${report.checks.greedyF32}`);
console.log(`rank kill: exit ${kill.exitCode ?? "-"} after ${f(kill.seconds, 1)} s (NCCL timeout ${kill.ncclTimeoutS} s): ${kmsg[0] ?? "no launcher message"}  ${report.checks.rankKill}`);
'
