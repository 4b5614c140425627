import type { BenchRequest } from './workload.js';

/** What one request measured (times in ms, from performance.now()). */
export interface RequestResult {
  readonly ok: boolean;
  /** The client went away on purpose after some chunks (--disconnect-fraction): neither a success nor a failure. */
  readonly disconnected?: boolean;
  readonly error?: string;
  readonly promptLen: number;
  readonly outputTokens: number;
  readonly ttftMs: number;
  /** Gaps between consecutive streamed chunks after the first. */
  readonly itlMs: number[];
  readonly e2eMs: number;
  readonly start: number;
}

export interface Target {
  /** Base URL, e.g. http://127.0.0.1:8000 (the /v1 routes below it). */
  readonly baseUrl: string;
  readonly model: string;
  readonly apiKey?: string;
  readonly timeoutMs: number;
}

/**
 * One streamed /v1/completions request (vLLM's benchmark_serving does the same): ignore_eos so the output length is
 * the workload's; TTFT is the first chunk with text or token ids, ITL the gaps between later chunks; output tokens from
 * the usage of the last chunk (stream_options.include_usage), else the number of chunks.
 */
export async function sendRequest(t: Target, r: BenchRequest, leaveAfter?: number): Promise<RequestResult> {
  const start = performance.now();
  const base = { ok: false, promptLen: r.promptLen, outputTokens: 0, ttftMs: 0, itlMs: [] as number[], e2eMs: 0, start };
  const leave = new AbortController();
  let left: RequestResult | null = null;
  try {
    const res = await fetch(`${t.baseUrl}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(t.apiKey ? { authorization: `Bearer ${t.apiKey}` } : {}) },
      body: JSON.stringify({ model: t.model, prompt: r.prompt, max_tokens: r.outputLen, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
      signal: AbortSignal.any([leave.signal, AbortSignal.timeout(t.timeoutMs)]),
    });
    if (!res.ok || !res.body) return { ...base, error: `HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`, e2eMs: performance.now() - start };
    const decoder = new TextDecoder();
    let buf = '';
    let first = 0;
    let last = 0;
    let chunks = 0;
    let usage: number | null = null;
    const itl: number[] = [];
    for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(bytes, { stream: true });
      let k: number;
      while ((k = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, k).trim();
        buf = buf.slice(k + 2);
        if (!ev.startsWith('data:')) continue;
        const data = ev.slice(5).trim();
        if (data === '[DONE]') continue;
        const j = JSON.parse(data) as { choices?: { text?: string; token_ids?: number[] }[]; usage?: { completion_tokens?: number } | null; error?: { message?: string } };
        if (j.error) return { ...base, error: j.error.message ?? 'stream error', e2eMs: performance.now() - start };
        if (j.usage?.completion_tokens !== undefined) usage = j.usage.completion_tokens;
        const c = j.choices?.[0];
        if (!c || (!c.text && !c.token_ids?.length)) continue;
        const now = performance.now();
        if (!first) first = now;
        else itl.push(now - last);
        last = now;
        chunks++;
        if (leaveAfter !== undefined && chunks >= leaveAfter) {
          left = { ...base, disconnected: true, outputTokens: chunks, e2eMs: now - start };
          leave.abort(); // a client that goes away mid-stream: the server must cancel the request and free its blocks
          return left;
        }
      }
    }
    const end = performance.now();
    if (!first) return { ...base, error: 'no tokens streamed', e2eMs: end - start };
    return { ok: true, promptLen: r.promptLen, outputTokens: usage ?? chunks, ttftMs: first - start, itlMs: itl, e2eMs: end - start, start };
  } catch (e) {
    if (left) return left; // the abort of a planned disconnect surfaces as the stream's error
    return { ...base, error: (e as Error).message, e2eMs: performance.now() - start };
  }
}
