import { F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { initNormal } from '../../../common/inputs.js';
import { defineL1OpTask } from '../../define-op-task.js';

/**
 * HF's T5LayerNorm(hidden_size, eps=1e-6): a scale-only RMS norm (no mean subtraction, no bias), variance in float32,
 * used by every T5 / T5 v1.1 layer (FLUX's T5-XXL text encoder). One registry op: rms_norm over the last dim.
 */
export class T5LayerNorm extends Module {
  readonly weight: Tensor;
  constructor(
    readonly hiddenSize: number,
    readonly eps = 1e-6,
  ) {
    super();
    this.weight = this.parameter('weight', [hiddenSize]).fill_(1);
  }

  forward(hiddenStates: Tensor): Tensor {
    return F.rmsNorm(hiddenStates, [this.hiddenSize], this.weight, this.eps);
  }
}

/** Golden float64 T5LayerNorm: x / sqrt(mean(x^2) + eps) * weight over the last dim. */
export function t5LayerNormReference(x: HostArray, weight: HostArray, eps: number): HostArray {
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

const eps = (c: { init: readonly unknown[] }) => (c.init[1] as number | undefined) ?? 1e-6;

export const t5LayerNormTask = defineL1OpTask('rms_norm', {
  id: 'L1/t5_layer_norm',
  className: 'T5LayerNorm',
  mirrors: 'transformers.models.t5.modeling_t5.T5LayerNorm',
  description: "T5's layer norm: scale-only RMS normalisation over the hidden dim (no mean, no bias), variance in float32.",
  architectures: ['flux', 'hunyuan_video'],
  baseline: T5LayerNorm,
  init: [
    { name: 'hiddenSize', type: 'int' },
    { name: 'eps', type: 'float', optional: true, default: 1e-6 },
  ],
  forward: { input: { shape: ['T', 'H'] } },
  params: { weight: { shape: ['H'] } },
  attrs: (c) => ({ normalized_shape: [c.dims.H!], eps: eps(c) }),
  cases: {
    ci: [
      { name: 'small', dtype: 'f32', dims: { T: 7, H: 64 }, init: [64] },
      { name: 'small-bf16', dtype: 'bf16', dims: { T: 5, H: 96 }, init: [96, 1e-6] },
    ],
    production: [
      // FLUX.1-dev's T5-XXL (text_encoder_2): d_model 4096 over the 512 prompt tokens.
      { name: 't5-xxl-512', dtype: 'bf16', dims: { T: 512, H: 4096 }, init: [4096, 1e-6] },
      // A batch of 4 prompts.
      { name: 't5-xxl-b4-512', dtype: 'bf16', dims: { T: 2048, H: 4096 }, init: [4096, 1e-6] },
    ],
  },
  inputScale: 2,
  initParameters: (m, _c, rng) => initNormal(m, rng, 0.1, 1),
  reference: ([x], params, c) => [t5LayerNormReference(x!, params.get('weight')!, eps(c))],
  flopsPerElement: 4,
});
