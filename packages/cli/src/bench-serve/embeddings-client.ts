import type { RequestResult, Target } from './client.js';
import type { BenchRequest } from './workload.js';

/** OpenAI's embedding encodings: float arrays, or base64 float32 bytes (the openai clients' default). */
export type EncodingFormat = 'float' | 'base64';

/**
 * One /v1/embeddings request: the workload's prompt (token ids or text) as a single input; the latency is the whole
 * request (no stream: TTFT and ITL do not apply). Input tokens from the response's usage (the server's count, so text
 * inputs count as tokenised), else the workload's length. An answer without exactly one embedding is a failure.
 */
export async function sendEmbeddingRequest(t: Target, r: BenchRequest, encodingFormat: EncodingFormat): Promise<RequestResult> {
  const start = performance.now();
  const failed = (error: string): RequestResult => ({ ok: false, error, promptLen: r.promptLen, outputTokens: 0, ttftMs: 0, itlMs: [], e2eMs: performance.now() - start, start });
  try {
    const res = await fetch(`${t.baseUrl}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(t.apiKey ? { authorization: `Bearer ${t.apiKey}` } : {}) },
      body: JSON.stringify({ model: t.model, input: r.prompt, encoding_format: encodingFormat }),
      signal: AbortSignal.timeout(t.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) return failed(`HTTP ${res.status}: ${text.slice(0, 300)}`);
    const j = JSON.parse(text) as { data?: { embedding?: unknown }[]; usage?: { prompt_tokens?: number } };
    if (j.data?.length !== 1 || j.data[0]!.embedding === undefined) return failed(`expected one embedding, got ${text.slice(0, 200)}`);
    const e2eMs = performance.now() - start;
    return { ok: true, promptLen: j.usage?.prompt_tokens ?? r.promptLen, outputTokens: 0, ttftMs: e2eMs, itlMs: [], e2eMs, start };
  } catch (e) {
    return failed((e as Error).message);
  }
}
