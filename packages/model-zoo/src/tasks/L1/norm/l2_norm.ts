import { F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';

/**
 * vLLM pooling's normalisation (F.normalize(x, p=2, dim=-1)): x / max(||x||_2, eps) over the last dim, eps = 1e-12.
 * BGE-M3's dense and ColBERT vectors and ColBERTv2's token vectors go through it.
 */
export class L2Norm extends Module {
  constructor(readonly eps = 1e-12) {
    super();
  }

  forward(x: Tensor): Tensor {
    return F.normalize(x, { p: 2, dim: -1, eps: this.eps });
  }
}

/** Golden float64 row-wise x / max(||x||, eps) over the last dim of width n. */
export function l2NormReference(x: HostArray, n: number, eps: number): HostArray {
  const out = hostArray(x.shape);
  for (let r = 0; r < (n ? x.data.length / n : 0); r++) {
    let ss = 0;
    for (let j = 0; j < n; j++) ss += x.data[r * n + j]! ** 2;
    const d = Math.max(Math.sqrt(ss), eps);
    for (let j = 0; j < n; j++) out.data[r * n + j] = x.data[r * n + j]! / d;
  }
  return out;
}

const eps = (c: { init: readonly unknown[] }) => (c.init[0] as number | undefined) ?? 1e-12;

export const l2NormTask = defineL1OpTask('normalize', {
  id: 'L1/l2_norm',
  className: 'L2Norm',
  mirrors: 'torch.nn.functional.normalize',
  description: 'L2 normalisation of each row over the last dim: x / max(||x||_2, eps) (vLLM pooling, BGE-M3 / ColBERT vectors).',
  architectures: ['bge_m3', 'colbertv2', 'rwkv7'],
  baseline: L2Norm,
  init: [{ name: 'eps', type: 'float', optional: true, default: 1e-12 }],
  forward: { input: { shape: ['T', 'D'] } },
  params: {},
  attrs: (c) => ({ p: 2, dim: -1, eps: eps(c) }),
  cases: {
    ci: [
      { name: 'small', dtype: 'f32', dims: { T: 7, D: 64 }, init: [] },
      { name: 'small-bf16', dtype: 'bf16', dims: { T: 5, D: 128 }, init: [1e-12] },
    ],
    production: [
      // BGE-M3 ColBERT vectors of a 64 x 512 batch; ColBERTv2's 128-dim token vectors of 32 x 180 tokens.
      { name: 'bge-m3-colbert-32k-tokens', dtype: 'bf16', dims: { T: 32768, D: 1024 }, init: [] },
      { name: 'colbertv2-docs', dtype: 'bf16', dims: { T: 5760, D: 128 }, init: [] },
    ],
  },
  reference: ([x], _p, c) => [l2NormReference(x!, x!.shape[x!.shape.length - 1]!, eps(c))],
  flopsPerElement: 3,
});
