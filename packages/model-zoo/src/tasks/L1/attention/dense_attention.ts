import { Module, F, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { fromInts, randn } from '../../../common/inputs.js';
import { defineL1OpTask } from '../../define-op-task.js';

/**
 * Dense (non-paged) attention as diffusers' processors and HF's sdpa path call it: F.scaled_dot_product_attention on
 * [B, H, L, E] / [B, H, S, E] with an optional bool mask broadcast to [B, H, L, S] (true = attend; BGE-M3 / ColBERT's
 * padding mask is [B, 1, 1, S]), is_causal and scale as torch's. forward(query, key, value, attnMask?) -> [B, H, L, E].
 */
export class DenseAttention extends Module {
  constructor(
    readonly isCausal = false,
    readonly scale: number | null = null,
  ) {
    super();
  }

  forward(query: Tensor, key: Tensor, value: Tensor, attnMask: Tensor | null = null): Tensor {
    return F.scaledDotProductAttention(query, key, value, { attn_mask: attnMask, is_causal: this.isCausal, scale: this.scale });
  }
}

/** Golden float64 SDPA: q [B, H, L, E], k / v [B, H, S, E], bool mask [B, 1, 1, S] or null; a row with no key gives 0. */
export function denseAttentionReference(q: HostArray, k: HostArray, v: HostArray, mask: HostArray | null, causal: boolean, scale: number | null): HostArray {
  const [B, H, L, E] = q.shape as [number, number, number, number];
  const S = k.shape[2]!;
  const sc = scale ?? 1 / Math.sqrt(E);
  const out = hostArray(q.shape);
  const w = new Float64Array(S);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < L; i++) {
        let max = -Infinity;
        for (let j = 0; j < S; j++) {
          const visible = (!mask || mask.data[b * S + j]) && (!causal || j <= i);
          if (!visible) {
            w[j] = -Infinity;
            continue;
          }
          let dot = 0;
          for (let e = 0; e < E; e++) dot += q.data[((b * H + h) * L + i) * E + e]! * k.data[((b * H + h) * S + j) * E + e]!;
          w[j] = dot * sc;
          max = Math.max(max, w[j]!);
        }
        let sum = 0;
        for (let j = 0; j < S; j++) sum += w[j] = w[j] === -Infinity ? 0 : Math.exp(w[j]! - max);
        for (let e = 0; e < E; e++) {
          let acc = 0;
          for (let j = 0; j < S; j++) acc += w[j]! * v.data[((b * H + h) * S + j) * E + e]!;
          out.data[((b * H + h) * L + i) * E + e] = sum > 0 ? acc / sum : 0;
        }
      }
    }
  }
  return out;
}

type Opts = { keyLens?: number[] };
const causal = (c: { init: readonly unknown[] }) => (c.init[0] as boolean | undefined) ?? false;
const scale = (c: { init: readonly unknown[] }) => (c.init[1] as number | null | undefined) ?? null;
const spread = (B: number, lo: number, span: number) => Array.from({ length: B }, (_, i) => lo + ((i * 97) % span));

export const denseAttentionTask = defineL1OpTask('scaled_dot_product_attention', {
  id: 'L1/dense_attention',
  className: 'DenseAttention',
  mirrors: 'torch.nn.functional.scaled_dot_product_attention',
  description: 'Dense attention softmax(q k^T * scale + mask) v over [B, H, S, E], optional causal mask or bool padding mask [B, 1, 1, S].',
  architectures: ['bge_m3', 'colbertv2', 'cosyvoice3', 'flux', 'hunyuan_video', 'oasis', 'pi0', 'sam3', 'sdxl', 'ttt_e2e'],
  baseline: DenseAttention,
  init: [
    { name: 'isCausal', type: 'bool', optional: true, default: false },
    { name: 'scale', type: 'float', optional: true, doc: 'default 1 / sqrt(E)' },
  ],
  forward: {
    query: { shape: ['B', 'H', 'L', 'E'] },
    key: { shape: ['B', 'H', 'S', 'E'] },
    value: { shape: ['B', 'H', 'S', 'E'] },
    attn_mask: { shape: ['B', 1, 1, 'S'], dtype: 'bool', doc: 'padding mask (options.keyLens): true = a key to attend' },
  },
  params: {},
  attrs: (c) => ({ is_causal: causal(c), scale: scale(c) }),
  cases: {
    ci: [
      { name: 'padded-f32', dtype: 'f32', dims: { B: 3, H: 2, L: 7, S: 7, E: 16 }, init: [], options: { keyLens: [7, 3, 5] } },
      // no mask (a case cannot be causal: the declared attn_mask is checked against every case, and torch refuses both)
      { name: 'nomask-f32', dtype: 'f32', dims: { B: 2, H: 3, L: 6, S: 10, E: 8 }, init: [] },
      { name: 'padded-bf16', dtype: 'bf16', dims: { B: 2, H: 4, L: 9, S: 9, E: 32 }, init: [false, 0.2], options: { keyLens: [9, 4] } },
    ],
    production: [
      // BGE-M3: 64 documents padded to 512 tokens, 16 heads of 64.
      { name: 'bge-m3-b64-512', dtype: 'bf16', dims: { B: 64, H: 16, L: 512, S: 512, E: 64 }, init: [], options: { keyLens: spread(64, 32, 481) } },
      // BGE-M3's longest document: one 8192-token sequence.
      { name: 'bge-m3-b1-8192', dtype: 'bf16', dims: { B: 1, H: 16, L: 8192, S: 8192, E: 64 }, init: [] },
      // FLUX.1-dev joint attention: 4096 image + 512 text tokens, 24 heads of 128.
      { name: 'flux1-dev-4608', dtype: 'bf16', dims: { B: 1, H: 24, L: 4608, S: 4608, E: 128 }, init: [] },
    ],
  },
  makeInputs: (c, ctx, rng) => {
    const { B, H, L, S, E } = c.dims as Record<string, number>;
    const lens = (c.options as Opts).keyLens;
    const mask = lens ? fromInts(ctx, lens.flatMap((n) => Array.from({ length: S! }, (_, j) => (j < n ? 1 : 0))), [B!, 1, 1, S!], 'bool') : null;
    return [randn(ctx, rng, [B!, H!, L!, E!], c.dtype), randn(ctx, rng, [B!, H!, S!, E!], c.dtype), randn(ctx, rng, [B!, H!, S!, E!], c.dtype), mask];
  },
  reference: ([q, k, v, m], _p, c) => [denseAttentionReference(q!, k!, v!, m ?? null, causal(c), scale(c))],
  work: (c) => {
    const { B, H, L, S, E } = c.dims as Record<string, number>;
    const it = c.dtype === 'f32' ? 4 : 2;
    return { bytes: it * B! * H! * (2 * L! + 2 * S!) * E!, flops: 4 * B! * H! * L! * S! * E! };
  },
});
