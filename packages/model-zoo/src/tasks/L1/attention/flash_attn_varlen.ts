import { Module, F, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { fromInts, randn } from '../../../common/inputs.js';
import { defineL1OpTask } from '../../define-op-task.js';

/**
 * flash_attn_varlen_func as an encoder calls it: sequences packed without padding (q [T, Hq, D], k / v [T, Hkv, D],
 * cu_seqlens [B + 1] i32 offsets), non-causal by default (bidirectional encoders; causal is flash-attn's bottom-right),
 * softmax_scale default 1 / sqrt(D), GQA when Hq = g * Hkv. Runs the registry's varlen_prefill_attention op.
 */
export class FlashAttnVarlen extends Module {
  constructor(
    readonly softmaxScale: number | null = null,
    readonly causal = false,
  ) {
    super();
  }

  forward(q: Tensor, k: Tensor, v: Tensor, cuSeqlensQ: Tensor, cuSeqlensK: Tensor): Tensor {
    return F.varlenPrefillAttention(q, k, v, cuSeqlensQ, cuSeqlensK, { scale: this.softmaxScale ?? 1 / Math.sqrt(q.shape[2]!), causal: this.causal });
  }
}

/** Golden float64 varlen attention (q and k share the offsets' sequence boundaries; causal aligned bottom-right). */
export function flashAttnVarlenReference(q: HostArray, k: HostArray, v: HostArray, cuQ: ArrayLike<number>, cuK: ArrayLike<number>, scale: number | null, causal: boolean): HostArray {
  const [, Hq, D] = q.shape as [number, number, number];
  const Hkv = k.shape[1]!;
  const g = Hq / Hkv;
  const sc = scale ?? 1 / Math.sqrt(D);
  const out = hostArray(q.shape);
  for (let b = 0; b + 1 < cuQ.length; b++) {
    const [q0, q1, k0, k1] = [cuQ[b]!, cuQ[b + 1]!, cuK[b]!, cuK[b + 1]!];
    const shift = k1 - k0 - (q1 - q0); // bottom-right: query i sees keys <= i + shift
    for (let h = 0; h < Hq; h++) {
      const kh = Math.floor(h / g);
      for (let i = q0; i < q1; i++) {
        const w: number[] = [];
        let max = -Infinity;
        for (let j = k0; j < k1; j++) {
          if (causal && j - k0 > i - q0 + shift) {
            w.push(-Infinity);
            continue;
          }
          let dot = 0;
          for (let e = 0; e < D; e++) dot += q.data[(i * Hq + h) * D + e]! * k.data[(j * Hkv + kh) * D + e]!;
          w.push(dot * sc);
          max = Math.max(max, dot * sc);
        }
        const p = w.map((x) => (x === -Infinity ? 0 : Math.exp(x - max)));
        const sum = p.reduce((a, x) => a + x, 0);
        for (let e = 0; e < D; e++) {
          let acc = 0;
          for (let j = k0; j < k1; j++) acc += p[j - k0]! * v.data[(j * Hkv + kh) * D + e]!;
          out.data[(i * Hq + h) * D + e] = sum > 0 ? acc / sum : 0;
        }
      }
    }
  }
  return out;
}

const lensOf = (c: { options: unknown }) => (c.options as { lens: number[] }).lens;
const offsets = (lens: readonly number[]) => lens.reduce<number[]>((a, n) => [...a, a[a.length - 1]! + n], [0]);
const varlenCase = (name: string, dtype: 'f32' | 'bf16', lens: number[], Hq: number, Hkv: number, D: number, init: unknown[] = []) => ({
  name, dtype, dims: { T: lens.reduce((a, b) => a + b, 0), B1: lens.length + 1, HQ: Hq, HKV: Hkv, D }, init, options: { lens },
});
const spread = (B: number, lo: number, span: number) => Array.from({ length: B }, (_, i) => lo + ((i * 97) % span));

export const flashAttnVarlenTask = defineL1OpTask('varlen_prefill_attention', {
  id: 'L1/flash_attn_varlen',
  className: 'FlashAttnVarlen',
  mirrors: 'flash_attn.flash_attn_varlen_func',
  description: 'Attention over sequences packed without padding (cu_seqlens offsets): bidirectional for encoders, or causal (bottom-right); GQA.',
  architectures: ['bge_m3', 'colbertv2', 'deepseek', 'glm', 'kimi_linear'],
  baseline: FlashAttnVarlen,
  init: [
    { name: 'softmaxScale', type: 'float', optional: true, doc: 'default 1 / sqrt(D)' },
    { name: 'causal', type: 'bool', optional: true, default: false },
  ],
  forward: {
    q: { shape: ['T', 'HQ', 'D'] },
    k: { shape: ['T', 'HKV', 'D'] },
    v: { shape: ['T', 'HKV', 'D'] },
    cu_seqlens_q: { shape: ['B1'], dtype: 'i32', doc: 'offsets of the packed sequences [B + 1]' },
    cu_seqlens_k: { shape: ['B1'], dtype: 'i32' },
  },
  params: {},
  attrs: (c) => ({ scale: (c.init[0] as number | null | undefined) ?? 1 / Math.sqrt(c.dims.D!), causal: (c.init[1] as boolean | undefined) ?? false }),
  cases: {
    ci: [
      varlenCase('encoder-f32', 'f32', [7, 3, 5], 4, 4, 16),
      varlenCase('causal-gqa-f32', 'f32', [6, 2], 4, 2, 8, [null, true]),
      varlenCase('encoder-bf16', 'bf16', [9, 4], 2, 2, 32, [0.2]),
    ],
    production: [
      // BGE-M3: 64 documents of 32..512 tokens packed (no padding), 16 heads of 64.
      varlenCase('bge-m3-64-docs-packed', 'bf16', spread(64, 32, 481), 16, 16, 64),
      // BGE-M3's longest input: one 8192-token document.
      varlenCase('bge-m3-8192', 'bf16', [8192], 16, 16, 64),
      // ColBERTv2 documents: 32 passages of 60..180 tokens, 12 heads of 64.
      varlenCase('colbertv2-32-docs', 'bf16', spread(32, 60, 121), 12, 12, 64),
    ],
  },
  makeInputs: (c, ctx, rng) => {
    const { T, HQ, HKV, D } = c.dims as Record<string, number>;
    const cu = offsets(lensOf(c));
    return [randn(ctx, rng, [T!, HQ!, D!], c.dtype), randn(ctx, rng, [T!, HKV!, D!], c.dtype), randn(ctx, rng, [T!, HKV!, D!], c.dtype), fromInts(ctx, cu, [cu.length], 'i32'), fromInts(ctx, cu, [cu.length], 'i32')];
  },
  reference: ([q, k, v, cq, ck], _p, c) => [flashAttnVarlenReference(q!, k!, v!, cq!.data, ck!.data, (c.init[0] as number | null | undefined) ?? null, (c.init[1] as boolean | undefined) ?? false)],
  work: (c) => {
    const { T, HQ, HKV, D } = c.dims as Record<string, number>;
    const it = c.dtype === 'f32' ? 4 : 2;
    const pairs = lensOf(c).reduce((a, n) => a + n * n, 0);
    return { bytes: it * T! * (2 * HQ! + 2 * HKV!) * D!, flops: 4 * pairs * HQ! * D! };
  },
});
