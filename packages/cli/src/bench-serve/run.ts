import { sendRequest, type RequestResult, type Target } from './client.js';
import { summarize, type BenchSummary, type Slo } from './stats.js';
import { arrivals, seededRandom, type BenchRequest } from './workload.js';

export interface BenchRunOptions {
  readonly target: Target;
  readonly requests: readonly BenchRequest[];
  /** Requests sent (one at a time) before the measured run and left out of it. */
  readonly warmup: readonly BenchRequest[];
  /** Requests/s of the Poisson arrivals (Infinity: all at once). */
  readonly rate: number;
  /** At most this many requests in flight (Infinity: no limit). */
  readonly maxConcurrency: number;
  readonly seed: number;
  readonly slo: Slo;
  /** This fraction of the requests (seeded) disconnect after 1 to 5 streamed chunks. */
  readonly disconnectFraction?: number;
  /** How one request is sent (default: a streamed /v1/completions request). */
  readonly send?: (t: Target, r: BenchRequest, leaveAfter?: number) => Promise<RequestResult>;
  /** Called after each measured request completes (the progress line). */
  readonly onProgress?: (done: number, total: number, failed: number) => void;
}

export interface BenchRun {
  readonly summary: BenchSummary;
  readonly results: readonly RequestResult[];
  readonly firstError: string | null;
  /** From the first send to the last answer (ms). */
  readonly durationMs: number;
}

/**
 * Send the workload the way vLLM's benchmark_serving does: warm-up requests first (not measured), then every request
 * at its Poisson arrival time, capped at maxConcurrency in flight; the clock runs from the first send to the last answer.
 */
export async function runBench(o: BenchRunOptions): Promise<BenchRun> {
  const send = o.send ?? sendRequest;
  for (const w of o.warmup) {
    const r = await send(o.target, w);
    if (!r.ok) throw new Error(`the warm-up request failed: ${r.error}`);
  }
  const at = arrivals(o.requests.length, o.rate, o.seed);
  const rnd = seededRandom(o.seed ^ 0xd15c);
  const leaveAfter = o.requests.map(() => (rnd() < (o.disconnectFraction ?? 0) ? 1 + Math.floor(rnd() * 5) : undefined));
  const results: RequestResult[] = new Array(o.requests.length);
  let inFlight = 0;
  let done = 0;
  let failed = 0;
  const slots: (() => void)[] = [];
  const acquire = () => (inFlight < o.maxConcurrency ? (inFlight++, Promise.resolve()) : new Promise<void>((ok) => slots.push(() => (inFlight++, ok()))));
  const release = () => {
    inFlight--;
    slots.shift()?.();
  };
  const t0 = performance.now();
  await Promise.all(o.requests.map(async (req, i) => {
    const wait = t0 + at[i]! - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await acquire();
    try {
      results[i] = await send(o.target, req, leaveAfter[i]);
    } finally {
      release();
    }
    done++;
    if (!results[i]!.ok && !results[i]!.disconnected) failed++;
    o.onProgress?.(done, o.requests.length, failed);
  }));
  const elapsed = performance.now() - t0;
  return { summary: summarize(results, elapsed, o.slo), results, firstError: results.find((r) => !r.ok && !r.disconnected)?.error ?? null, durationMs: elapsed };
}
