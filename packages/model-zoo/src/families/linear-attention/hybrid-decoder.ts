/**
 * The forward the hybrid decoder layers share (Qwen3-Next, Kimi-Linear), in vLLM's residual form: input_layernorm
 * (fused with the residual add after the first layer), the layer's token mixer, post_attention_layernorm (fused add),
 * the feed-forward. The mixer is the layer type's: a recurrent one over the step's tokens as [1, T, D] with its states
 * in the engine's pool (its state outputs are pool views, released here), or attention over the paged KV cache.
 * Which modules a layer builds, and under which names, stays with its model.
 */
import type { Module, Tensor } from '@fastkernels/core';
import type { StackNorm } from '../dense-moe-llm/decoder-stack.js';

export interface FeedForward extends Module {
  forward(x: Tensor): Tensor;
}

/** A recurrent mixer on the engine: [1, T, D] -> [out [1, T, D], ...views of its state pools]. */
export interface RecurrentMixer {
  forward(hiddenStates: Tensor): Tensor[];
}

/** An attention mixer over the paged KV cache: (positions [T], x [T, D]) -> [T, D]. */
export interface AttentionMixer {
  forward(positions: Tensor, x: Tensor): Tensor;
}

/** A layer's modules; exactly one of `recurrent` and `attention` is set. */
export interface HybridLayerModules {
  readonly inputLayernorm: StackNorm;
  readonly recurrent: RecurrentMixer | null;
  readonly attention: AttentionMixer | null;
  readonly postAttentionLayernorm: StackNorm;
  readonly feedForward: FeedForward;
}

/** forward(positions [T], hiddenStates [T, D], residual | null) -> [hiddenStates, residual]. */
export function hybridDecoderForward(m: HybridLayerModules, positions: Tensor, hiddenStates: Tensor, residual: Tensor | null): [Tensor, Tensor] {
  const [T, D] = hiddenStates.shape as [number, number];
  const temps: Tensor[] = [];
  const t = (x: Tensor) => (temps.push(x), x);
  try {
    let x: Tensor;
    let r1: Tensor;
    if (residual) {
      [x, r1] = m.inputLayernorm.forward(hiddenStates, residual) as [Tensor, Tensor];
      t(x);
    } else {
      x = t(m.inputLayernorm.forward(hiddenStates) as Tensor);
      r1 = hiddenStates;
    }
    let mixed: Tensor;
    if (m.recurrent) {
      const [o, ...states] = m.recurrent.forward(t(x.view([1, T, D])));
      for (const s of states) t(s);
      mixed = t(t(o!).view([T, D]));
    } else mixed = t(m.attention!.forward(positions, x));
    const [y, r2] = m.postAttentionLayernorm.forward(mixed, r1) as [Tensor, Tensor];
    if (r1 !== hiddenStates) r1.dispose();
    t(y);
    return [m.feedForward.forward(y), r2];
  } finally {
    for (const x of temps) x.dispose();
  }
}
