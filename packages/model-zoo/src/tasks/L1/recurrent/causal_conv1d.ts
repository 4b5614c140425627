import { DTYPE_INFO, F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';

/**
 * vLLM's causal_conv1d_fn (vllm/model_executor/layers/mamba/ops/causal_conv1d.py; Dao-AILab's causal_conv1d) as a module:
 * forward(x [B, dim, L], weight [dim, width], initial_states [B, dim, width - 1]?) -> [out [B, dim, L], final_states
 * [B, dim, width - 1]], the weight passed per call as production passes it (the layer owns it: HF's conv1d.weight
 * [dim, 1, width], viewed [dim, width]; no bias, as Qwen3-Next's). out = act(the causal depthwise convolution over
 * [initial_states or zeros, x]); final_states = the last width - 1 inputs: a decode step is the same call with L = 1 and
 * the conv state as initial_states (causal_conv1d_update's math). Qwen3-Next's gated DeltaNet (silu) and the Mamba
 * mixers use it.
 */
export class CausalConv1d extends Module {
  constructor(readonly activation: 'silu' | 'swish' | null = 'silu') {
    super();
  }

  /**
   * The engine's pooled form (vLLM's causal_conv1d_fn arguments): initialStates is the conv state pool [slots, dim,
   * width - 1], cacheIndices [N] picks each sequence's row, updated in place (-1: padding), queryStartLoc [N + 1] packs N
   * sequences along L of a [1, dim, total] x (absent: the B rows are the sequences, e.g. decode rows of L = 1),
   * hasInitialState [N] (bool) starts a sequence from zeros where false; then only out is returned.
   */
  forward(x: Tensor, weight: Tensor, initialStates: Tensor | null = null, queryStartLoc: Tensor | null = null, cacheIndices: Tensor | null = null, hasInitialState: Tensor | null = null): Tensor[] {
    return F.causalConv1d(x, weight, { initial_states: initialStates, return_final_states: !cacheIndices, activation: this.activation, query_start_loc: queryStartLoc, cache_indices: cacheIndices, has_initial_state: hasInitialState });
  }
}

/** Float64 causal depthwise conv (the definition): returns out [B, D, L] and the last W - 1 inputs [B, D, W - 1]. */
export function causalConv1dReference(x: HostArray, weight: HostArray, bias: HostArray | null, init: HostArray | null, activation: 'silu' | 'swish' | null): [HostArray, HostArray] {
  const [B, D, L] = x.shape as [number, number, number];
  const W = weight.shape[1]!;
  const out = hostArray([B, D, L]);
  const fin = hostArray([B, D, W - 1]);
  for (let b = 0; b < B; b++) {
    for (let d = 0; d < D; d++) {
      const bd = b * D + d;
      // the input at position p of x' = [init (W - 1), x (L)]
      const at = (p: number) => (p < W - 1 ? (init ? init.data[bd * (W - 1) + p]! : 0) : x.data[bd * L + p - (W - 1)]!);
      for (let t = 0; t < L; t++) {
        let s = bias ? bias.data[d]! : 0;
        for (let w = 0; w < W; w++) s += weight.data[d * W + w]! * at(t + w);
        out.data[bd * L + t] = activation ? s / (1 + Math.exp(-s)) : s;
      }
      for (let j = 0; j < W - 1; j++) fin.data[bd * (W - 1) + j] = at(L + j);
    }
  }
  return [out, fin];
}

const activationOf = (c: { init: readonly unknown[] }) => (c.init[0] as 'silu' | 'swish' | undefined) ?? 'silu';
const conv = (name: string, dtype: 'f32' | 'bf16', B: number, D: number, L: number, W: number, state: boolean, activation: 'silu' | 'swish' = 'silu') => ({
  name, dtype, dims: { B, D, L, W, W1: W - 1 }, init: [activation], options: state ? { initial_states: true } : {},
});
/** Qwen3-Next-80B-A3B's gated DeltaNet conv: q, k, v channels 2 * 16 * 128 + 32 * 128 = 8192, kernel 4. */
const QN = 8192;

export const causalConv1dTask = defineL1OpTask('causal_conv1d', {
  id: 'L1/causal_conv1d',
  className: 'CausalConv1d',
  mirrors: 'vllm.model_executor.layers.mamba.ops.causal_conv1d.causal_conv1d_fn',
  description: 'Causal depthwise conv1d over [B, dim, L] with a width-W kernel and silu, the previous W - 1 inputs in and out (prefill, or a decode step with L = 1).',
  architectures: ['qwen3_next'],
  baseline: CausalConv1d,
  init: [{ name: 'activation', type: 'enum', choices: ['silu', 'swish'], optional: true, default: 'silu' }],
  forward: {
    x: { shape: ['B', 'D', 'L'] },
    weight: { shape: ['D', 'W'], doc: 'the depthwise kernel (the layer\'s conv1d.weight viewed [dim, width])' },
    initial_states: { shape: ['B', 'D', 'W1'], doc: 'the last width - 1 inputs before x (the conv state); zeros when absent. With cache_indices: the conv state pool [slots, D, W1], updated in place' },
    query_start_loc: { shape: ['N1'], dtype: 'i32', doc: "vLLM varlen: offsets of the sequences packed along L (B = 1); absent in the benchmark cases" },
    cache_indices: { shape: ['N'], dtype: 'i32', doc: "vLLM: each sequence's conv state pool row (-1: padding); only out is returned. The engine's form; absent in the benchmark cases" },
    has_initial_state: { shape: ['N'], dtype: 'bool', doc: 'vLLM: false starts the sequence from zeros; absent: every live row is read' },
  },
  params: {},
  outputs: [{ shape: ['B', 'D', 'L'] }, { shape: ['B', 'D', 'W1'] }],
  attrs: (c) => ({ activation: activationOf(c), return_final_states: true }),
  cases: {
    ci: withSequenceDims([
      conv('small-prefill-f32', 'f32', 2, 24, 13, 4, false),
      conv('small-decode-state-f32', 'f32', 3, 16, 1, 4, true),
      conv('small-chunk-state-swish-bf16', 'bf16', 1, 32, 9, 3, true, 'swish'),
    ]),
    production: withSequenceDims([
      conv('qwen3-next-80b-prefill-4096', 'bf16', 1, QN, 4096, 4, false),
      conv('qwen3-next-80b-prefill-chunk-256-state', 'bf16', 1, QN, 256, 4, true),
      conv('qwen3-next-80b-decode-b64', 'bf16', 64, QN, 1, 4, true),
    ]),
  },
  makeInputs: (c, ctx, rng) => {
    // a captured fresh prefill has no initial_states to name W1: it is W - 1
    const { B, D, L, W } = c.dims as Record<'B' | 'D' | 'L' | 'W', number>;
    return [randn(ctx, rng, [B, D, L], c.dtype), randn(ctx, rng, [D, W], c.dtype, 0.5), c.options.initial_states ? randn(ctx, rng, [B, D, W - 1], c.dtype) : null];
  },
  reference: ([x, w, init], _p, c) => causalConv1dReference(x!, w!, null, init ?? null, activationOf(c)),
  work: (c) => {
    const { B, D, L, W } = c.dims as Record<'B' | 'D' | 'L' | 'W', number>;
    const it = DTYPE_INFO[c.dtype].itemsize;
    return { bytes: 2 * bytesOf([B, D, L], it) + bytesOf([D, W], it) + 2 * bytesOf([B, D, W - 1], it), flops: 2 * B * D * L * W };
  },
});
