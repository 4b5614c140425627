import { DTYPE_INFO, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, initNormal, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/**
 * vLLM's RMSNorm: forward(x) -> y, forward(x, residual) -> [y, x + residual]
 * (the fused residual-add path, _C.fused_add_rms_norm).
 */
export class RMSNorm extends Module {
  readonly weight: Tensor;
  constructor(
    readonly hiddenSize: number,
    readonly eps = 1e-6,
  ) {
    super();
    this.weight = this.parameter('weight', [hiddenSize]);
  }

  forward(x: Tensor, residual?: Tensor | null): Tensor | [Tensor, Tensor] {
    const ops = this.ctx.backend.ops;
    if (residual) return ops.fusedAddRmsNorm(x, residual, this.weight, this.eps);
    return ops.rmsNorm(x, this.weight, this.eps);
  }
}

/** Golden float64 RMSNorm over the last dim. */
export function rmsNormReference(x: HostArray, weight: HostArray, eps: number): HostArray {
  const h = weight.data.length;
  const out = hostArray(x.shape);
  for (let r = 0; r < x.data.length / h; r++) {
    let ss = 0;
    for (let j = 0; j < h; j++) ss += x.data[r * h + j]! ** 2;
    const inv = 1 / Math.sqrt(ss / h + eps);
    for (let j = 0; j < h; j++) out.data[r * h + j] = x.data[r * h + j]! * inv * weight.data[j]!;
  }
  return out;
}

export const rmsNormTask = defineTask(
  {
    id: 'L1/rms_norm',
    level: 1,
    className: 'RMSNorm',
    family: [DENSE_MOE_LLM],
    architectures: ['llama'],
    mirrors: 'vllm.model_executor.layers.layernorm.RMSNorm',
    description: 'Root-mean-square normalisation over the hidden dim with a learned scale; optional fused residual add.',
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'eps', type: 'float', optional: true, default: 1e-6 },
    ],
    inputs: [
      { name: 'x', dtype: 'act', shape: ['T', 'H'] },
      { name: 'residual', dtype: 'act', shape: ['T', 'H'], optional: true, doc: 'when given, returns [y, x + residual]' },
    ],
    outputs: [
      { name: 'y', dtype: 'act', shape: ['T', 'H'] },
      { name: 'residual', dtype: 'act', shape: ['T', 'H'], optional: true },
    ],
    cases: {
      ci: [
        { name: 'small', dtype: 'f32', dims: { T: 7, H: 64 }, init: [64, 1e-6] },
        { name: 'small-fused-bf16', dtype: 'bf16', dims: { T: 5, H: 128 }, init: [128, 1e-5], options: { residual: true } },
      ],
      production: [
        { name: 'llama3-8b-decode', dtype: 'bf16', dims: { T: 32, H: 4096 }, init: [4096, 1e-5], options: { residual: true } },
        { name: 'llama3-8b-prefill', dtype: 'bf16', dims: { T: 4096, H: 4096 }, init: [4096, 1e-5], options: { residual: true } },
        { name: 'llama3-8b-first-layer', dtype: 'bf16', dims: { T: 1024, H: 4096 }, init: [4096, 1e-5] },
      ],
    },
  },
  {
    baseline: RMSNorm,
    makeInputs: (c, ctx, rng) => {
      const shape = [c.dims.T!, c.dims.H!];
      return [randn(ctx, rng, shape, c.dtype), c.options.residual ? randn(ctx, rng, shape, c.dtype) : null];
    },
    initParameters: (m, _c, rng) => initNormal(m, rng, 0.1, 1),
    reference: ([x, residual], params, c) => {
      const w = params.get('weight')!;
      const eps = (c.init[1] as number | undefined) ?? 1e-6;
      if (!residual) return [rmsNormReference(x!, w, eps)];
      const sum = hostArray(x!.shape, x!.data.map((v, i) => v + residual.data[i]!));
      return [rmsNormReference(sum, w, eps), sum];
    },
    work: (c) => {
      const { T, H } = c.dims as { T: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      const tensors = c.options.residual ? 4 : 2; // read x (+ residual), write y (+ residual)
      return { bytes: bytesOf([T, H], it) * tensors + bytesOf([H], it), flops: 4 * T * H };
    },
  },
);
