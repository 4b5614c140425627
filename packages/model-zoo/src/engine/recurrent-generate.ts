/**
 * Generation for models whose per-sequence context is a recurrent state instead of a KV cache (GLA; the linear layers of
 * Qwen3-Next / Kimi-Linear next), in their state-in / state-out form (L4/gla): forward takes the state and returns the
 * new one, so a prefill, a chunk of one and a decode step are the same call. One sequence, greedy: the reference path the
 * engine's state pool is checked against (docs/recurrent-state.md), not the serving path.
 */
import { withContext, type ExecutionContext, type Module, type Tensor } from '@fastkernels/core';
import { fromInts } from '../common/inputs.js';

/** What a recurrent decoder offers: forward(inputIds [B, T], state | null) -> [logits [B, T, vocab], new state]. */
export interface RecurrentCausalLM extends Module {
  forward(inputIds: Tensor, state: Tensor | null): Tensor[];
}

export interface RecurrentGenerateOptions {
  /** Prefill in chunks of this many tokens, the state carried between them (default: the whole prompt at once). */
  readonly prefillChunk?: number;
  readonly eosTokenId?: number | readonly number[] | null;
}

/** Run one forward and keep the last position's logits (as float64) and the new state; the old state is released. */
function step(model: RecurrentCausalLM, ctx: ExecutionContext, ids: readonly number[], state: Tensor | null): { last: Float64Array; state: Tensor } {
  const t = fromInts(ctx, ids, [1, ids.length], 'i64');
  const [logits, next] = model.forward(t, state) as [Tensor, Tensor];
  t.dispose();
  state?.dispose();
  const V = logits.shape[2]!;
  const last = logits.toFloat64Array().slice((ids.length - 1) * V);
  logits.dispose();
  return { last, state: next };
}

const argmax = (x: Float64Array) => x.reduce((best, v, i) => (v > x[best]! ? i : best), 0);

/** Greedy tokens after `prompt`: prefill (chunked if asked), then one decode step per token. */
export function greedyGenerateRecurrent(model: RecurrentCausalLM, ctx: ExecutionContext, prompt: readonly number[], maxTokens: number, opts: RecurrentGenerateOptions = {}): number[] {
  if (prompt.length === 0) throw new RangeError('greedyGenerateRecurrent: empty prompt');
  const chunk = opts.prefillChunk ?? prompt.length;
  const eos = new Set([opts.eosTokenId ?? []].flat());
  return withContext(ctx, () => {
    let state: Tensor | null = null;
    let last: Float64Array = new Float64Array();
    try {
      for (let p = 0; p < prompt.length; p += chunk) ({ last, state } = step(model, ctx, prompt.slice(p, p + chunk), state));
      const out: number[] = [];
      while (out.length < maxTokens) {
        const tok = argmax(last);
        out.push(tok);
        if (eos.has(tok) || out.length === maxTokens) break;
        ({ last, state } = step(model, ctx, [tok], state));
      }
      return out;
    } finally {
      (state as Tensor | null)?.dispose();
    }
  });
}
