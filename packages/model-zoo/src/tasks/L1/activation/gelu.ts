import { hostArray, type HostArray } from '@fastkernels/core';
import { GELU, type GeluApproximate } from '../../../layers/activation.js';
import { defineL1OpTask } from '../../define-op-task.js';
import { geluErf, geluTanh } from './gelu_and_mul.js';

/** Golden float64 GELU, elementwise: exact (erf) or the tanh approximation. */
export function geluReference(x: HostArray, approximate: GeluApproximate): HostArray {
  const f = approximate === 'tanh' ? geluTanh : geluErf;
  return hostArray(x.shape, x.data.map(f));
}

const approximate = (c: { init: readonly unknown[] }) => (c.init[0] as GeluApproximate | undefined) ?? 'none';

/** torch.nn.GELU: the layer (layers/activation.ts) is the baseline. */
export const geluTask = defineL1OpTask('gelu', {
  id: 'L1/gelu',
  className: 'GELU',
  mirrors: 'torch.nn.GELU',
  description: "GELU activation, elementwise: exact x * Phi(x) (approximate='none') or the tanh approximation.",
  architectures: ['bge_m3', 'colbertv2', 'convnextv2', 'flux', 'hunyuan_video', 'oasis', 'pi0', 'qwen2_5_omni', 'qwen2_vl', 'qwen3_vl', 'rtdetrv2', 'sam3', 'sdxl', 'siglip2', 'swinv2', 'vjepa2', 'whisper'],
  baseline: GELU,
  init: [{ name: 'approximate', type: 'enum', choices: ['none', 'tanh'], optional: true, default: 'none' }],
  forward: { input: { shape: ['T', 'D'] } },
  params: {},
  attrs: (c) => ({ approximate: approximate(c) }),
  cases: {
    ci: [
      { name: 'small-erf', dtype: 'f32', dims: { T: 7, D: 129 }, init: ['none'] },
      { name: 'small-tanh', dtype: 'f32', dims: { T: 5, D: 64 }, init: ['tanh'] },
      { name: 'small-erf-bf16', dtype: 'bf16', dims: { T: 6, D: 96 }, init: [] },
      { name: 'small-tanh-bf16', dtype: 'bf16', dims: { T: 3, D: 256 }, init: ['tanh'] },
    ],
    production: [
      // FLUX.1-dev FeedForward: GELU(approximate='tanh') on 4096 image tokens x 4 * 3072.
      { name: 'flux1-dev-ff', dtype: 'bf16', dims: { T: 4096, D: 12288 }, init: ['tanh'] },
      // BGE-M3 (XLM-R large) intermediate: exact GELU on 8192 tokens x 4096.
      { name: 'bge-m3-8k-tokens', dtype: 'bf16', dims: { T: 8192, D: 4096 }, init: ['none'] },
      // SigLIP-2 so400m MLP: gelu_pytorch_tanh on 1024 patches x 4304.
      { name: 'siglip2-so400m-mlp', dtype: 'bf16', dims: { T: 1024, D: 4304 }, init: ['tanh'] },
    ],
  },
  inputScale: 3,
  reference: ([x], _params, c) => [geluReference(x!, approximate(c))],
  // erf form ~8 flops per element, the tanh form ~12 (see gelu_and_mul)
  flopsPerElement: 10,
});
