import type { RequestResult } from './client.js';

export interface Dist {
  readonly mean: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

/** Percentile by linear interpolation between order statistics (numpy's default, as vLLM's report uses). */
export function percentile(sorted: readonly number[], p: number): number {
  if (!sorted.length) return NaN;
  const x = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(x);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (x - lo);
}

export function dist(xs: readonly number[]): Dist {
  const s = [...xs].sort((a, b) => a - b);
  const mean = s.length ? s.reduce((a, b) => a + b, 0) / s.length : NaN;
  return { mean, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s.length ? s[s.length - 1]! : NaN };
}

/** Service-level objectives for goodput (ms); a request counts when it meets every one given. */
export interface Slo {
  readonly ttftMs?: number;
  readonly tpotMs?: number;
  readonly e2eMs?: number;
}

/** TPOT of one request: time after the first token per further token (vLLM's definition; undefined below 2 tokens). */
export const tpotOf = (r: RequestResult): number | undefined => (r.outputTokens > 1 ? (r.e2eMs - r.ttftMs) / (r.outputTokens - 1) : undefined);

export interface BenchSummary {
  readonly completed: number;
  readonly failed: number;
  /** Requests whose client left mid-stream on purpose (not in the latency or throughput figures). */
  readonly disconnected: number;
  readonly durationS: number;
  readonly totalInputTokens: number;
  readonly totalOutputTokens: number;
  readonly requestThroughput: number;
  readonly outputThroughput: number;
  readonly totalTokenThroughput: number;
  /** Requests/s meeting every SLO (null when no SLO was given). */
  readonly goodput: number | null;
  readonly ttftMs: Dist;
  readonly tpotMs: Dist;
  readonly itlMs: Dist;
  readonly e2eMs: Dist;
}

/** vLLM benchmark_serving's metrics over the measured (non-warm-up) requests. */
export function summarize(results: readonly RequestResult[], durationMs: number, slo: Slo): BenchSummary {
  const ok = results.filter((r) => r.ok);
  const disconnected = results.filter((r) => r.disconnected).length;
  const durationS = durationMs / 1000;
  const input = ok.reduce((a, r) => a + r.promptLen, 0);
  const output = ok.reduce((a, r) => a + r.outputTokens, 0);
  const tpots = ok.map(tpotOf).filter((x): x is number => x !== undefined);
  const hasSlo = slo.ttftMs !== undefined || slo.tpotMs !== undefined || slo.e2eMs !== undefined;
  const good = ok.filter((r) => (slo.ttftMs === undefined || r.ttftMs <= slo.ttftMs) && (slo.tpotMs === undefined || (tpotOf(r) ?? 0) <= slo.tpotMs) && (slo.e2eMs === undefined || r.e2eMs <= slo.e2eMs)).length;
  return {
    completed: ok.length, failed: results.length - ok.length - disconnected, disconnected, durationS,
    totalInputTokens: input, totalOutputTokens: output,
    requestThroughput: ok.length / durationS, outputThroughput: output / durationS, totalTokenThroughput: (input + output) / durationS,
    goodput: hasSlo ? good / durationS : null,
    ttftMs: dist(ok.map((r) => r.ttftMs)), tpotMs: dist(tpots), itlMs: dist(ok.flatMap((r) => r.itlMs)), e2eMs: dist(ok.map((r) => r.e2eMs)),
  };
}

/** /v1/embeddings' metrics: requests/s, input tokens/s, whole-request latency (no streaming, so no TTFT / TPOT / ITL). */
export interface EmbeddingsSummary {
  readonly completed: number;
  readonly failed: number;
  readonly durationS: number;
  readonly totalInputTokens: number;
  readonly requestThroughput: number;
  readonly inputThroughput: number;
  /** Requests/s within the e2el SLO (null when none was given). */
  readonly goodput: number | null;
  readonly e2eMs: Dist;
}

export function summarizeEmbeddings(results: readonly RequestResult[], durationMs: number, slo: Slo): EmbeddingsSummary {
  const ok = results.filter((r) => r.ok);
  const durationS = durationMs / 1000;
  const input = ok.reduce((a, r) => a + r.promptLen, 0);
  return {
    completed: ok.length, failed: results.length - ok.length, durationS, totalInputTokens: input,
    requestThroughput: ok.length / durationS, inputThroughput: input / durationS,
    goodput: slo.e2eMs === undefined ? null : ok.filter((r) => r.e2eMs <= slo.e2eMs!).length / durationS,
    e2eMs: dist(ok.map((r) => r.e2eMs)),
  };
}
