#!/usr/bin/env bash
# Issue 10, the commands with --tp on 2 GPUs (self-tests; bench/suites/tp/run.sh is the 8B generate comparison):
#  1. `e2e --tp 2 --self-test` on a small random Llama (bf16 checkpoint by init-weights, kept in $OUT/tp-selftest-model):
#     outcome ok, 100% exact agreement, the decode graphs captured with the NCCL calls inside (or the logged eager
#     fallback: reported, not a failure); the same self-test at --tp 1 beside it for the throughput;
#  2. `bench --tp 2 --self-test --task allreduce --shapes all`: L1/allreduce in the process group of the ranks' bench
#     workers, every case PASSED (speedups around 1), and a candidate that does not communicate (a copy), run through
#     `fastkernels launch --nproc 2 -- fastkernels bench`, INCORRECT_NUMERICAL on every case; then the four L2
#     parallel-linear tasks the same way (`--tp 2 --self-test --shapes all`: each rank its shard, every case PASSED);
#  3. `serve --tp 2` (float32): 4 concurrent completion requests, then the 4 prompts in one request after an idle second,
#     give generate --tp 1's greedy tokens; SIGINT stops every rank, exit 0.
# Writes $OUT/tp_selftest.json; the last lines are the checks.
#   dist/gpu-host/bench/run verify-tp
# Budget: a 1.3 GB checkpoint (~10 s), two e2e self-tests (~1-2 min each), two allreduce benches (~1 min), the parallel-linear bench (~1-2 min), the serve
# step (~1 min): ~6 min.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup tp-selftest
node_bin="$("$bundle/run" --print-node)" || { echo "tp-selftest: could not unpack the bundled node" >&2; exit 1; }
fk_nccl_env
work="$OUT/tp-selftest-work"
model="$OUT/tp-selftest-model"
mkdir -p "$work" "$model"
rm -f "$work"/*.json "$work"/*.log "$work"/*.rc
echo "tp-selftest: bundle $bundle (commit ${commit:-?}), out $OUT, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"

# ---- a small Llama (16 heads, 8 kv heads: TP 2 splits both), bf16 -----------------------------------------------------
cat > "$work/config.json" <<JSON
{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
  "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 32000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
  "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "initializer_range": 0.02,
  "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"
}
JSON
if [ -f "$model/model.safetensors" ] && cmp -s "$work/config.json" "$model/config.json"; then
  echo "tp-selftest: reusing the checkpoint in $model"
else
  "$bundle/run" init-weights --config "$work/config.json" --out "$model" --seed 1 --dtype bf16 --tiled
  cp "$work/config.json" "$model/config.json"
fi

# run NAME CMD...: stdout to NAME.out, stderr to NAME.log, exit code to NAME.rc; a failure is recorded, the rest go on
run() {
  local name="$1"; shift
  local t=$SECONDS rc=0
  timeout "${RUN_TIMEOUT:-900}" "$@" > "$work/$name.out" 2> "$work/$name.log" || rc=$?
  echo "tp-selftest: $name: exit $rc in $((SECONDS - t)) s"
  echo "$rc" > "$work/$name.rc"
  [ "$rc" -eq 0 ] || tail -5 "$work/$name.log" >&2
}

e2e_args=(e2e --model "$model" --self-test --backend cuda --requests synthetic:64:32-256:32-128:0 --latency-batch-sizes 1,16
  --latency-prompt 128 --latency-output 64 --warmups 1 --repeats 3 --max-model-len 1024)
run e2e_tp1 "$bundle/run" "${e2e_args[@]}" --out "$work/e2e_tp1.json" --details "$work/e2e_tp1_details.json"
run e2e_tp2 "$bundle/run" "${e2e_args[@]}" --tp 2 --out "$work/e2e_tp2.json" --details "$work/e2e_tp2_details.json"

run bench_tp2 "$bundle/run" bench --self-test --task allreduce --backend cuda --tp 2 --shapes all --iters 50 --json "$work/bench_tp2.json"
mkdir -p "$work/copy-allreduce/L1"
cat > "$work/copy-allreduce/L1/allreduce.ts" <<'TS'
import { Module, type Tensor } from '@fastkernels/core';
// no communication: right at world 1 only
export class AllReduce extends Module {
  forward(x: Tensor): Tensor { return x.clone(); }
}
TS
run bench_copy_launch "$bundle/run" launch --nproc 2 -- "$bundle/run" bench --candidates "$work/copy-allreduce" --backend cuda --shapes ci --iters 5 --json "$work/bench_copy.json"
run bench_linear_tp2 "$bundle/run" bench --self-test --task column_parallel_linear,row_parallel_linear,qkv_parallel_linear,merged_column_parallel_linear --backend cuda --tp 2 --shapes all --iters 20 --json "$work/bench_linear_tp2.json"

# ---- serve --tp 2: concurrent completions equal generate --tp 1's greedy tokens (float32); Ctrl-C stops it, exit 0 ------
printf '%s\n' '{"prompt_ids":[1,2,3,4,5]}' '{"prompt_ids":[9,8,7]}' '{"prompt_ids":[100,200,300,400]}' '{"prompt_ids":[42]}' > "$work/serve_prompts.jsonl"
run serve_gen_tp1 "$bundle/run" generate --model "$model" --prompt-file "$work/serve_prompts.jsonl" --max-tokens 32 --backend cuda --dtype f32 --json
t=$SECONDS
"$bundle/run" serve --model "$model" --tp 2 --port 0 --backend cuda --dtype f32 --max-model-len 1024 --max-num-seqs 16 > "$work/serve_tp2.out" 2> "$work/serve_tp2.log" &
serve_pid=$!
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's|.*serving .* on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$work/serve_tp2.log" | head -1)"
  [ -n "$port" ] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.5
done
echo "tp-selftest: serve --tp 2 listening on port ${port:-none} after $((SECONDS - t)) s"
if [ -n "$port" ]; then
  # 4 single-prompt requests at once (they batch), an idle second, then all 4 prompts in one request
  P="$port" A="$work/serve_answers.json" timeout 300 "$node_bin" -e '
const url = `http://127.0.0.1:${process.env.P}/v1/completions`;
const list = [[1, 2, 3, 4, 5], [9, 8, 7], [100, 200, 300, 400], [42]];
const post = async (body) => (await fetch(url, { method: "POST", body: JSON.stringify(body) })).json();
(async () => {
  const single = await Promise.all(list.map((p) => post({ prompt: p, max_tokens: 32, temperature: 0, ignore_eos: true })));
  await new Promise((r) => setTimeout(r, 1000));
  const batched = await post({ prompt: list, max_tokens: 32, temperature: 0, ignore_eos: true });
  require("fs").writeFileSync(process.env.A, JSON.stringify({ single: single.map((c) => c.choices?.[0]?.token_ids ?? c), batched: batched.choices?.map((c) => c.token_ids) ?? batched }));
})().catch((e) => { console.error(`serve client: ${e.message}`); process.exit(1); });
' > "$work/serve_client.out" 2> "$work/serve_client.log" || echo "tp-selftest: the serve client failed: $(tail -2 "$work/serve_client.log")" >&2
fi
kill -INT "$serve_pid" 2>/dev/null || true
rc=0; wait "$serve_pid" || rc=$?
echo "$rc" > "$work/serve_tp2.rc"
echo "tp-selftest: serve_tp2: exit $rc in $((SECONDS - t)) s (after SIGINT)"
[ "$rc" -eq 0 ] || tail -5 "$work/serve_tp2.log" >&2

# ---- merge and checks ---------------------------------------------------------------------------------------------
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
W="$work" O="$OUT" C="$commit" D="$driver" G="$gpu" "$node_bin" -e '
const fs = require("fs");
const e = process.env, W = e.W;
const read = (f) => { try { return JSON.parse(fs.readFileSync(`${W}/${f}`, "utf8")); } catch { return null; } };
const text = (f) => { try { return fs.readFileSync(`${W}/${f}`, "utf8"); } catch { return ""; } };
const rc = (n) => { const t = text(`${n}.rc`).trim(); return t === "" ? null : Number(t); };
function e2e(tp) {
  const r = read(`e2e_tp${tp}.json`), d = read(`e2e_tp${tp}_details.json`), log = text(`e2e_tp${tp}.log`);
  const m = r?.models?.[0];
  const graphs = log.split("\n").filter((l) => /^CUDA graphs:/.test(l)).slice(0, 1)[0] ?? null;
  return {
    exitCode: rc(`e2e_tp${tp}`), outcome: m?.outcome ?? null, gpuCount: r?.gpu_count ?? 1,
    agreement: m ? m.discrepancies.filter((x) => x === 0).length / m.discrepancies.length : null,
    noiseAgreement: m ? m.noiseDiscrepancies.filter((x) => x === 0).length / m.noiseDiscrepancies.length : null,
    throughputSpeedup: m?.throughputSpeedup ?? null, latencySpeedup: m?.latencySpeedup ?? null,
    baselineTokS: d ? Object.values(d)[0]?.baseline?.throughputTokS ?? null : null,
    latencyMs: d ? Object.values(d)[0]?.baseline?.latencyMs ?? null : null,
    graphs, stdout: text(`e2e_tp${tp}.out`).trim().split("\n"), tail: log.split("\n").filter(Boolean).slice(-4),
  };
}
function bench(file, name, level = 1) {
  const r = read(file);
  const rows = (r?.results ?? []).filter((x) => (level === 1 ? x.task === "L1/allreduce" : /^L2\/.*_parallel_linear$/.test(x.task)));
  return { exitCode: rc(name), processGroup: r?.options?.processGroup ?? null, cases: rows.map((x) => ({ task: x.task, case: x.case, status: x.status, speedup: x.speedup, baselineMs: x.baselineMs, detail: x.detail })), tail: text(`${name}.log`).split("\n").filter(Boolean).slice(-4) };
}
function serve() {
  let gen = null;
  try { gen = JSON.parse(text("serve_gen_tp1.out")).outputs.map((o) => o.token_ids); } catch {}
  const a = read("serve_answers.json");
  const same = (xs) => (gen && Array.isArray(xs) ? xs.filter((t, i) => JSON.stringify(t) === JSON.stringify(gen[i])).length : 0);
  return {
    generateTp1ExitCode: rc("serve_gen_tp1"), exitCode: rc("serve_tp2"), prompts: gen ? gen.length : null,
    singleMatch: a ? same(a.single) : null, batchedMatch: a ? same(a.batched) : null,
    listening: /serving \S+ on http/.test(text("serve_tp2.log")), tail: text("serve_tp2.log").split("\n").filter(Boolean).slice(-4),
  };
}
const report = { commit: e.C, gpu: e.G, driver: e.D, world: 2, e2e: { tp1: e2e(1), tp2: e2e(2) }, bench: { selfTest: bench("bench_tp2.json", "bench_tp2"), copyCandidate: bench("bench_copy.json", "bench_copy_launch"), linearSelfTest: bench("bench_linear_tp2.json", "bench_linear_tp2", 2) }, serve: serve() };
const t2 = report.e2e.tp2, b = report.bench;
report.checks = {
  e2eTp2SelfTest: t2.exitCode === 0 && t2.outcome === "ok" && t2.agreement === 1 && t2.gpuCount === 2 && t2.stdout.length === 1 ? "PASS" : "MISS",
  e2eTp2Graphs: t2.graphs && /captured/.test(t2.graphs) ? "CAPTURED" : t2.graphs ? "EAGER" : "-",
  benchAllreduceTp2: b.selfTest.exitCode === 0 && b.selfTest.processGroup === 2 && b.selfTest.cases.length > 0 && b.selfTest.cases.every((c) => c.status === "PASSED") ? "PASS" : "MISS",
  benchLinearTp2: b.linearSelfTest.exitCode === 0 && b.linearSelfTest.processGroup === 2 && new Set(b.linearSelfTest.cases.map((c) => c.task)).size === 4 && b.linearSelfTest.cases.every((c) => c.status === "PASSED") ? "PASS" : "MISS",
  benchCopyCandidate: b.copyCandidate.exitCode === 0 && b.copyCandidate.cases.length > 0 && b.copyCandidate.cases.every((c) => c.status === "INCORRECT_NUMERICAL") ? "PASS" : "MISS",
  serveTp2: report.serve.exitCode === 0 && report.serve.prompts > 0 && report.serve.singleMatch === report.serve.prompts && report.serve.batchedMatch === report.serve.prompts ? "PASS" : "MISS",
};
fs.writeFileSync(`${e.O}/tp_selftest.json`, JSON.stringify(report, null, 2) + "\n");
const f = (x, p = 3) => (x === null || x === undefined ? "-" : Number(x).toFixed(p));
console.log(`\ntp_selftest.json: ${e.O}/tp_selftest.json (commit ${e.C || "?"}, ${e.G || "?"}, driver ${e.D || "?"})`);
for (const tp of [1, 2]) { const x = report.e2e[`tp${tp}`]; console.log(`e2e --tp ${tp}: exit ${x.exitCode ?? "-"}, ${x.outcome ?? "-"}, agreement ${f(x.agreement)}, noise ${f(x.noiseAgreement)}, baseline ${f(x.baselineTokS, 1)} tok/s, speedups ${f(x.throughputSpeedup)}/${f(x.latencySpeedup)}; ${x.graphs ?? "no graph line"}`); }
for (const c of b.selfTest.cases) console.log(`allreduce ${c.case.padEnd(22)} ${c.status.padEnd(20)} baseline ${f(c.baselineMs, 4)} ms  speedup ${f(c.speedup)}`);
for (const c of b.copyCandidate.cases) console.log(`copy candidate ${c.case.padEnd(17)} ${c.status}`);
for (const c of b.linearSelfTest.cases) console.log(`${c.task.padEnd(34)} ${c.case.padEnd(26)} ${c.status.padEnd(20)} baseline ${f(c.baselineMs, 4)} ms  speedup ${f(c.speedup)}`);
{ const s = report.serve; console.log(`serve --tp 2: exit ${s.exitCode ?? "-"} after SIGINT, greedy tokens = generate --tp 1 for ${s.singleMatch ?? "-"}/${s.prompts ?? "-"} concurrent requests, ${s.batchedMatch ?? "-"}/${s.prompts ?? "-"} in one batched request`); }
for (const [k, v] of Object.entries(report.checks)) console.log(`${k}: ${v}`);
'
