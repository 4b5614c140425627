// Folds the serving suite's pieces into $OUT/serving.json and prints the targets last.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2];
const read = (f) => (existsSync(join(out, f)) ? JSON.parse(readFileSync(join(out, f), 'utf8')) : null);
const throughput = read('serving-throughput.json');
const rate4 = read('serving-rate4.json');
const disconnect = read('serving-disconnect.json');
const hf = read('serving-hf.json');
const inproc = read('serving-inprocess.json');
const metricsText = existsSync(join(out, 'serving-metrics-after.txt')) ? readFileSync(join(out, 'serving-metrics-after.txt'), 'utf8') : '';
const metric = (name) => {
  const m = [...metricsText.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))];
  return m.length ? m.reduce((a, x) => a + Number(x[1]), 0) : null;
};
const health = existsSync(join(out, 'serving-health-after.json')) ? readFileSync(join(out, 'serving-health-after.json'), 'utf8') : '';
const inprocTokS = inproc?.summary?.throughputOutputTokS ?? inproc?.phases?.throughput?.outputTokS ?? null;
const after = {
  kvCacheUsage: metric('vllm:kv_cache_usage_perc'), running: metric('vllm:num_requests_running'), waiting: metric('vllm:num_requests_waiting'),
  aborted: metric('fastkernels:request_aborted_total'), success: metric('vllm:request_success_total'), healthy: /"ok"/.test(health),
};
const summary = {
  httpOutputTokS: throughput?.outputThroughput ?? null,
  inprocessOutputTokS: inprocTokS,
  httpOverInprocess: throughput && inprocTokS ? throughput.outputThroughput / inprocTokS : null,
  rate4TtftP50Ms: rate4?.ttftMs?.p50 ?? null, rate4TpotP50Ms: rate4?.tpotMs?.p50 ?? null,
  disconnectCompleted: disconnect?.completed ?? null, disconnectLeft: disconnect?.disconnected ?? null, disconnectFailed: disconnect?.failed ?? null,
  kvUsageAfter: after.kvCacheUsage,
  hfOutputTokS: hf?.outputThroughput ?? null,
};
writeFileSync(join(out, 'serving.json'), JSON.stringify({ summary, throughput, rate4, disconnect, metricsAfter: after, hf, inprocess: inproc?.summary ?? null }, null, 2) + '\n');
const f = (x, d = 1) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '?');
const ok = (c) => (c ? 'PASS' : 'MISS');
const d = (x) => (x ? `p50 ${f(x.p50)} / p90 ${f(x.p90)} / p99 ${f(x.p99)} ms` : '?');
console.log(`serving: HF transformers (one at a time, ${hf?.completed ?? '?'} requests): ${f(summary.hfOutputTokS)} output tok/s; TTFT ${d(hf?.ttftMs)}`);
console.log(`rate 4/s: TTFT ${d(rate4?.ttftMs)}; TPOT ${d(rate4?.tpotMs)}; goodput ${f(rate4?.goodput, 2)} req/s`);
console.log(`target 256-request HTTP output >= 9,000 tok/s:            ${f(summary.httpOutputTokS, 0)} tok/s  ${ok(summary.httpOutputTokS >= 9000)}`);
console.log(`target HTTP >= 95% of in-process (${f(inprocTokS, 0)} tok/s):        ${f((summary.httpOverInprocess ?? NaN) * 100)}%  ${ok(summary.httpOverInprocess >= 0.95)}`);
console.log(`target rate 4/s TTFT p50 < 40 ms, TPOT p50 < 8 ms:          ${f(summary.rate4TtftP50Ms)} ms, ${f(summary.rate4TpotP50Ms, 2)} ms  ${ok(summary.rate4TtftP50Ms < 40 && summary.rate4TpotP50Ms < 8)}`);
const N = disconnect?.num_prompts ?? 1000;
console.log(`target ${N} clients, 10% leaving: others complete, KV 0:  ${summary.disconnectCompleted}/${N - (summary.disconnectLeft ?? 0)} done, ${summary.disconnectFailed} failed, KV ${f(after.kvCacheUsage, 3)}, running ${after.running}, healthy ${after.healthy}  ${ok(summary.disconnectFailed === 0 && summary.disconnectCompleted + summary.disconnectLeft === N && after.kvCacheUsage === 0 && after.running === 0 && after.healthy)}`);
