import { SiLU } from '../../../layers/activation.js';
import { sigmoid64 } from './sigmoid.js';
import { defineUnaryActivationTask, elementwiseReference } from './unary.js';

const silu64 = (v: number): number => v * sigmoid64(v);
/** Golden x * sigmoid(x), elementwise. */
export const siluReference = elementwiseReference(silu64);

/** torch.nn.SiLU: the layer (layers/activation.ts) is the baseline (ultralytics Conv's default activation). */
export const siluTask = defineUnaryActivationTask('silu', {
  id: 'L1/silu',
  className: 'SiLU',
  mirrors: 'torch.nn.SiLU',
  description: 'SiLU (swish) activation, elementwise x * sigmoid(x).',
  architectures: ['dinov3', 'efficientnetv2', 'flux', 'gla', 'hunyuan_video', 'oasis', 'openfold3', 'pi0', 'qwen3_vl', 'retnet', 'rtdetrv2', 'sdxl', 'ttt_e2e', 'yolov10'],
  baseline: SiLU,
  f: silu64,
  shape: ['N', 'C', 'H', 'W'],
  ci: [
    { name: 'small', dtype: 'f32', dims: { N: 2, C: 5, H: 7, W: 9 }, init: [] },
    { name: 'small-bf16', dtype: 'bf16', dims: { N: 1, C: 16, H: 6, W: 6 }, init: [] },
  ],
  production: [
    { name: 'yolov10n-stem-bs1', dtype: 'f16', dims: { N: 1, C: 16, H: 320, W: 320 }, init: [] },
    { name: 'yolov10n-stem-bs32', dtype: 'f16', dims: { N: 32, C: 16, H: 320, W: 320 }, init: [] },
    { name: 'yolov10n-p3-bs32', dtype: 'f16', dims: { N: 32, C: 64, H: 80, W: 80 }, init: [] },
  ],
  inputScale: 3,
  flopsPerElement: 5,
});
