import type { LLMEngine } from '@fastkernels/model-zoo';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Latency buckets (seconds) of vLLM's histograms. */
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

/**
 * The server's Prometheus metrics, under vLLM's names (dashboards built for vLLM read them as they are). A registry of
 * its own per server (never prom-client's global one), so servers in one process do not share counters. Queue and
 * cache gauges are read from the engine at scrape time, so they cannot drift from it.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly ttft: Histogram;
  readonly itl: Histogram;
  readonly tpot: Histogram;
  readonly e2e: Histogram;
  readonly promptTokens: Counter;
  readonly generationTokens: Counter;
  readonly success: Counter<'model_name' | 'finished_reason'>;
  readonly aborted: Counter;
  readonly rejected: Counter<'model_name' | 'reason'>;

  constructor(
    engine: LLMEngine,
    private readonly modelName: string,
  ) {
    const labelNames = ['model_name'] as const;
    const registers = [this.registry];
    const sched = engine.scheduler;
    const blocks = engine.blockManager;
    const model = modelName;
    new Gauge({ name: 'vllm:num_requests_running', help: 'Requests in the running batch', labelNames, registers, collect() { this.set({ model_name: model }, sched.running.length); } });
    new Gauge({ name: 'vllm:num_requests_waiting', help: 'Requests waiting to be scheduled', labelNames, registers, collect() { this.set({ model_name: model }, sched.waiting.length); } });
    new Gauge({ name: 'vllm:kv_cache_usage_perc', help: 'KV-cache usage (1 = every block in use)', labelNames, registers, collect() { this.set({ model_name: model }, blocks.numBlocks ? blocks.numUsedBlocks / blocks.numBlocks : 0); } });
    this.ttft = new Histogram({ name: 'vllm:time_to_first_token_seconds', help: 'Time to first token', labelNames, registers, buckets: TTFT_BUCKETS });
    this.itl = new Histogram({ name: 'vllm:inter_token_latency_seconds', help: 'Time between consecutive output tokens', labelNames, registers, buckets: ITL_BUCKETS });
    this.tpot = new Histogram({ name: 'vllm:request_time_per_output_token_seconds', help: 'Per request: (e2e - TTFT) / (output tokens - 1)', labelNames, registers, buckets: ITL_BUCKETS });
    this.e2e = new Histogram({ name: 'vllm:e2e_request_latency_seconds', help: 'End-to-end request latency', labelNames, registers, buckets: E2E_BUCKETS });
    this.promptTokens = new Counter({ name: 'vllm:prompt_tokens_total', help: 'Prefill tokens processed', labelNames, registers });
    this.generationTokens = new Counter({ name: 'vllm:generation_tokens_total', help: 'Generated tokens', labelNames, registers });
    this.success = new Counter({ name: 'vllm:request_success_total', help: 'Requests finished, by reason', labelNames: ['model_name', 'finished_reason'], registers });
    this.aborted = new Counter({ name: 'fastkernels:request_aborted_total', help: 'Requests cancelled by their client (disconnect)', labelNames, registers });
    this.rejected = new Counter({ name: 'fastkernels:request_rejected_total', help: 'Requests refused before reaching the engine (queue full, draining)', labelNames: ['model_name', 'reason'], registers });
  }

  get labels() {
    return { model_name: this.modelName };
  }

  /** A request's timings once it finished: arrival, first token and finish times (ms, performance.now()). */
  observeRequest(t: { arrival: number; first: number | null; end: number; promptTokens: number; outputTokens: number; reason: string }): void {
    const l = this.labels;
    if (t.first !== null) {
      this.ttft.observe(l, (t.first - t.arrival) / 1000);
      if (t.outputTokens > 1) this.tpot.observe(l, (t.end - t.first) / 1000 / (t.outputTokens - 1));
    }
    this.e2e.observe(l, (t.end - t.arrival) / 1000);
    this.promptTokens.inc(l, t.promptTokens);
    this.success.inc({ ...l, finished_reason: t.reason });
  }
}
