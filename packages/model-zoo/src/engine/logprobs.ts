/** A sampled token's log-probability and the most likely alternatives at its position (OpenAI's logprobs). */
export interface TokenLogprob {
  readonly token: number;
  readonly logprob: number;
  /** The `k` most likely tokens, most likely first. */
  readonly top: readonly (readonly [token: number, logprob: number])[];
}

/**
 * Log-softmax of one row of logits (the model's distribution, before temperature / top-k / top-p, as vLLM's default
 * "raw" logprobs), in float64: the sampled token's value and the top k.
 */
export function tokenLogprob(logits: Float32Array, token: number, k: number): TokenLogprob {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
  const lse = max + Math.log(sum);
  const top: [number, number][] = [];
  if (k > 0) {
    // k is small (<= 20): keep a sorted list of the best k
    for (let i = 0; i < logits.length; i++) {
      const v = logits[i]!;
      if (top.length === k && v <= top[k - 1]![1]) continue;
      let j = Math.min(top.length, k - 1);
      if (top.length < k) top.push([i, v]);
      else top[k - 1] = [i, v];
      for (; j > 0 && top[j - 1]![1] < v; j--) [top[j], top[j - 1]] = [top[j - 1]!, top[j]!];
    }
  }
  return { token, logprob: logits[token]! - lse, top: top.map(([t, v]) => [t, v - lse] as const) };
}
