import { hostArray, type HostArray } from '@fastkernels/core';
import { LayerNorm } from '../../../layers/norm.js';
import { defineL1OpTask } from '../../define-op-task.js';

/** Golden float64 LayerNorm over the last `size` elements of each row: (x - mean) / sqrt(var + eps) * w + b (biased var). */
export function layerNormReference(x: HostArray, size: number, weight: HostArray | null, bias: HostArray | null, eps: number): HostArray {
  const out = hostArray(x.shape);
  for (let r = 0; r < (size ? x.data.length / size : 0); r++) {
    let mean = 0;
    for (let j = 0; j < size; j++) mean += x.data[r * size + j]!;
    mean /= size;
    let v = 0;
    for (let j = 0; j < size; j++) v += (x.data[r * size + j]! - mean) ** 2;
    const inv = 1 / Math.sqrt(v / size + eps);
    for (let j = 0; j < size; j++) out.data[r * size + j] = (x.data[r * size + j]! - mean) * inv * (weight ? weight.data[j]! : 1) + (bias ? bias.data[j]! : 0);
  }
  return out;
}

const eps = (c: { init: readonly unknown[] }) => (c.init[1] as number | undefined) ?? 1e-5;

/** torch.nn.LayerNorm over the hidden dim: the layer (layers/norm.ts) is the baseline. */
export const layerNormTask = defineL1OpTask('layer_norm', {
  id: 'L1/layer_norm',
  className: 'LayerNorm',
  mirrors: 'torch.nn.LayerNorm',
  description: 'Layer normalisation over the hidden dim (mean and biased variance), optional elementwise affine weight and bias.',
  architectures: ['bge_m3', 'colbertv2', 'convnextv2', 'deepseek', 'dinov3', 'dp3', 'flux', 'glm', 'hunyuan_video', 'oasis', 'openfold3', 'pi0', 'qwen2_5_omni', 'qwen2_vl', 'qwen3_vl', 'rtdetrv2', 'rwkv7', 'sam3', 'sdxl', 'siglip2', 'swinv2', 'whisper'],
  baseline: LayerNorm,
  init: [
    { name: 'normalizedShape', type: 'int', doc: 'the hidden size H (PyTorch also takes a list of trailing dims)' },
    { name: 'eps', type: 'float', optional: true, default: 1e-5 },
    { name: 'elementwiseAffine', type: 'bool', optional: true, default: true },
    { name: 'bias', type: 'bool', optional: true, default: true },
  ],
  forward: { input: { shape: ['T', 'H'], doc: 'tokens (or any leading dims flattened) x hidden' } },
  params: { weight: { shape: ['H'] }, bias: { shape: ['H'] } },
  attrs: (c) => ({ normalized_shape: [c.dims.H!], eps: eps(c) }),
  cases: {
    ci: [
      { name: 'small', dtype: 'f32', dims: { T: 7, H: 64 }, init: [64] },
      { name: 'small-no-bias', dtype: 'f32', dims: { T: 3, H: 40 }, init: [40, 1e-6, true, false] },
      { name: 'small-bf16-no-affine', dtype: 'bf16', dims: { T: 5, H: 96 }, init: [96, 1e-6, false] },
      { name: 'small-bf16', dtype: 'bf16', dims: { T: 4, H: 128 }, init: [128, 1e-5] },
    ],
    production: [
      // FLUX.1-dev's transformer blocks: LayerNorm(3072, elementwise_affine=False, eps=1e-6) over 4096 image tokens (1024 px).
      { name: 'flux1-dev-norm1', dtype: 'bf16', dims: { T: 4096, H: 3072 }, init: [3072, 1e-6, false] },
      // BGE-M3 (XLM-R large): LayerNorm(1024, eps=1e-5) over a batch of 8192 tokens.
      { name: 'bge-m3-8k-tokens', dtype: 'bf16', dims: { T: 8192, H: 1024 }, init: [1024, 1e-5] },
      // Whisper large-v3 encoder: LayerNorm(1280) over 1500 audio frames.
      { name: 'whisper-large-v3-encoder', dtype: 'bf16', dims: { T: 1500, H: 1280 }, init: [1280, 1e-5] },
    ],
  },
  inputScale: 2,
  reference: ([x], params, c) => [layerNormReference(x!, c.dims.H!, params.get('weight') ?? null, params.get('bias') ?? null, eps(c))],
  // per element: sum, centre, square-sum, scale, affine (mul + add), ~7 flops
  flopsPerElement: 7,
});
