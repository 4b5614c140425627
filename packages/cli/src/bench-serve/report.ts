import type { BenchSummary, Dist, EmbeddingsSummary } from './stats.js';

const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

/** The summary as vLLM's benchmark_serving prints it: totals, throughput, then each latency's mean and percentiles. */
export function formatReport(s: BenchSummary): string {
  const rows: [string, string][] = [
    ['Successful requests', String(s.completed)],
    ['Failed requests', String(s.failed)],
    ...(s.disconnected ? [['Disconnected on purpose', String(s.disconnected)] as [string, string]] : []),
    ['Benchmark duration (s)', f(s.durationS)],
    ['Total input tokens', String(s.totalInputTokens)],
    ['Total generated tokens', String(s.totalOutputTokens)],
    ['Request throughput (req/s)', f(s.requestThroughput)],
    ['Output token throughput (tok/s)', f(s.outputThroughput)],
    ['Total token throughput (tok/s)', f(s.totalTokenThroughput)],
  ];
  if (s.goodput !== null) rows.push(['Request goodput (req/s)', f(s.goodput)]);
  const lat = (name: string, d: Dist) => rows.push([`${name} mean / p50 / p90 / p99 (ms)`, `${f(d.mean)} / ${f(d.p50)} / ${f(d.p90)} / ${f(d.p99)}`]);
  lat('TTFT', s.ttftMs);
  lat('TPOT', s.tpotMs);
  lat('ITL', s.itlMs);
  lat('E2E latency', s.e2eMs);
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n') + '\n';
}

/** The /v1/embeddings summary: totals, requests/s and input tokens/s, then the latency's mean and percentiles. */
export function formatEmbeddingsReport(s: EmbeddingsSummary): string {
  const rows: [string, string][] = [
    ['Successful requests', String(s.completed)],
    ['Failed requests', String(s.failed)],
    ['Benchmark duration (s)', f(s.durationS)],
    ['Total input tokens', String(s.totalInputTokens)],
    ['Request throughput (req/s)', f(s.requestThroughput)],
    ['Input token throughput (tok/s)', f(s.inputThroughput)],
  ];
  if (s.goodput !== null) rows.push(['Request goodput (req/s)', f(s.goodput)]);
  const d = s.e2eMs;
  rows.push(['Latency mean / p50 / p90 / p99 (ms)', `${f(d.mean)} / ${f(d.p50)} / ${f(d.p90)} / ${f(d.p99)}`]);
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n') + '\n';
}
