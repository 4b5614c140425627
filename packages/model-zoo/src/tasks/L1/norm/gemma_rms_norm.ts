import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, initNormal, randn } from '../../../common/inputs.js';
import { familiesOf } from '../../families.js';

/**
 * vLLM's GemmaRMSNorm (HF's zero-centred Qwen3NextRMSNorm / GemmaRMSNorm): y = x / rms(x) * (1 + weight), the weight
 * stored as w - 1 (initialised to zeros); forward(x) -> y, forward(x, residual) -> [y, x + residual] (the fused
 * residual add). Qwen3-Next's input / post-attention / final norms and its attention's per-head q_norm / k_norm.
 */
export class GemmaRMSNorm extends Module {
  readonly weight: Tensor;
  constructor(
    readonly hiddenSize: number,
    readonly eps = 1e-6,
  ) {
    super();
    this.weight = this.parameter('weight', [hiddenSize]).fill_(0);
  }

  forward(x: Tensor, residual?: Tensor | null): Tensor | [Tensor, Tensor] {
    if (residual) return F.fusedAddRmsNorm(x, residual, this.weight, this.eps, 1);
    return F.rmsNorm(x, null, this.weight, this.eps, { weight_offset: 1 });
  }
}

/** Golden float64 zero-centred RMSNorm over the last dim (the weight's width): x / sqrt(mean(x^2) + eps) * (1 + w). */
export function gemmaRmsNormReference(x: HostArray, weight: HostArray, eps: number): HostArray {
  const h = weight.data.length;
  const out = hostArray(x.shape);
  for (let r = 0; r < x.data.length / h; r++) {
    let ss = 0;
    for (let j = 0; j < h; j++) ss += x.data[r * h + j]! ** 2;
    const inv = 1 / Math.sqrt(ss / h + eps);
    for (let j = 0; j < h; j++) out.data[r * h + j] = x.data[r * h + j]! * inv * (1 + weight.data[j]!);
  }
  return out;
}

export const gemmaRmsNormTask = defineTask(
  {
    id: 'L1/gemma_rms_norm',
    level: 1,
    className: 'GemmaRMSNorm',
    family: familiesOf(['qwen3_next']),
    architectures: ['qwen3_next'],
    mirrors: 'vllm.model_executor.layers.layernorm.GemmaRMSNorm',
    description: 'Zero-centred RMSNorm, x / rms(x) * (1 + w), over the last dim; optional fused residual add.',
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
        { name: 'small-fused-bf16', dtype: 'bf16', dims: { T: 5, H: 128 }, init: [128, 1e-6], options: { residual: true } },
        { name: 'per-head-f32', dtype: 'f32', dims: { T: 24, H: 8 }, init: [8, 1e-6] },
      ],
      production: [
        // Qwen3-Next-80B-A3B: hidden 2048 (the layer norms, fused with the residual), head_dim 256 (q_norm over 16 heads)
        { name: 'qwen3-next-80b-decode-b64', dtype: 'bf16', dims: { T: 64, H: 2048 }, init: [2048, 1e-6], options: { residual: true } },
        { name: 'qwen3-next-80b-prefill-4096', dtype: 'bf16', dims: { T: 4096, H: 2048 }, init: [2048, 1e-6], options: { residual: true } },
        { name: 'qwen3-next-80b-q-norm-prefill-4096', dtype: 'bf16', dims: { T: 4096 * 16, H: 256 }, init: [256, 1e-6] },
      ],
    },
  },
  {
    baseline: GemmaRMSNorm,
    makeInputs: (c, ctx, rng) => {
      const shape = [c.dims.T!, c.dims.H!];
      return [randn(ctx, rng, shape, c.dtype), c.options.residual ? randn(ctx, rng, shape, c.dtype) : null];
    },
    initParameters: (m, _c, rng) => initNormal(m, rng, 0.1),
    reference: ([x, residual], params, c) => {
      const w = params.get('weight')!;
      const eps = (c.init[1] as number | undefined) ?? 1e-6;
      if (!residual) return [gemmaRmsNormReference(x!, w, eps)];
      const sum = hostArray(x!.shape, x!.data.map((v, i) => v + residual.data[i]!));
      return [gemmaRmsNormReference(sum, w, eps), sum];
    },
    work: (c) => {
      const { T, H } = c.dims as { T: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([T, H], it) * (c.options.residual ? 4 : 2) + bytesOf([H], it), flops: 5 * T * H };
    },
  },
);
