import { QuickGELU } from '../../../layers/activation.js';
import { defineUnaryActivationTask, elementwiseReference } from './unary.js';

const quickGelu64 = (v: number): number => v / (1 + Math.exp(-1.702 * v));
/** Golden x * sigmoid(1.702 x), elementwise (CLIP's hidden_act quick_gelu). */
export const quickGeluReference = elementwiseReference(quickGelu64);

/** HF's QuickGELUActivation (CLIP): the layer (layers/activation.ts) is the baseline. */
export const quickgeluTask = defineUnaryActivationTask('quick_gelu', {
  id: 'L1/quickgelu',
  className: 'QuickGELU',
  mirrors: 'transformers.activations.QuickGELUActivation',
  description: 'QuickGELU activation, elementwise x * sigmoid(1.702 x) (CLIP).',
  architectures: ['flux', 'qwen2_5_omni', 'qwen2_vl', 'qwen3_vl'],
  baseline: QuickGELU,
  f: quickGelu64,
  production: [
    { name: 'clip-l-mlp-77', dtype: 'bf16', dims: { T: 77, D: 3072 }, init: [] },
    { name: 'clip-l-mlp-b8', dtype: 'bf16', dims: { T: 616, D: 3072 }, init: [] },
  ],
  inputScale: 3,
  flopsPerElement: 5,
});
