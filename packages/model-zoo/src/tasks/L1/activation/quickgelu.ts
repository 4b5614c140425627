import { hostArray, type HostArray } from '@fastkernels/core';
import { QuickGELU } from '../../../layers/activation.js';
import { defineL1OpTask } from '../../define-op-task.js';

/** Golden x * sigmoid(1.702 x), elementwise (CLIP's hidden_act quick_gelu). */
export function quickGeluReference(x: HostArray): HostArray {
  return hostArray(x.shape, x.data.map((v) => v / (1 + Math.exp(-1.702 * v))));
}

/** HF's QuickGELUActivation (CLIP): the layer (layers/activation.ts) is the baseline. */
export const quickgeluTask = defineL1OpTask('quick_gelu', {
  id: 'L1/quickgelu',
  className: 'QuickGELU',
  mirrors: 'transformers.activations.QuickGELUActivation',
  description: 'QuickGELU activation, elementwise x * sigmoid(1.702 x) (CLIP).',
  architectures: ['flux', 'qwen2_5_omni', 'qwen2_vl', 'qwen3_vl'],
  baseline: QuickGELU,
  init: [],
  forward: { input: { shape: ['T', 'D'] } },
  params: {},
  attrs: () => ({}),
  cases: {
    ci: [
      { name: 'small', dtype: 'f32', dims: { T: 7, D: 129 }, init: [] },
      { name: 'small-bf16', dtype: 'bf16', dims: { T: 5, D: 64 }, init: [] },
    ],
    production: [
      // CLIP-L text encoder MLP (FLUX.1-dev's text_encoder): 77 tokens x 3072.
      { name: 'clip-l-mlp-77', dtype: 'bf16', dims: { T: 77, D: 3072 }, init: [] },
      // The same at a batch of 8 prompts.
      { name: 'clip-l-mlp-b8', dtype: 'bf16', dims: { T: 616, D: 3072 }, init: [] },
    ],
  },
  inputScale: 3,
  reference: ([x]) => [quickGeluReference(x!)],
  flopsPerElement: 5,
});
