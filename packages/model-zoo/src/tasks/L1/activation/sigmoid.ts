import { Sigmoid } from '../../../layers/activation.js';
import { defineUnaryActivationTask, elementwiseReference } from './unary.js';

/** Golden 1 / (1 + exp(-x)), elementwise (the two-sided form, exact for large |x|). */
export const sigmoid64 = (v: number): number => (v >= 0 ? 1 / (1 + Math.exp(-v)) : Math.exp(v) / (1 + Math.exp(v)));
export const sigmoidReference = elementwiseReference(sigmoid64);

/** torch.nn.Sigmoid: the layer (layers/activation.ts) is the baseline (YOLOv10's class scores, gates elsewhere). */
export const sigmoidTask = defineUnaryActivationTask('sigmoid', {
  id: 'L1/sigmoid',
  className: 'Sigmoid',
  mirrors: 'torch.nn.Sigmoid',
  description: 'Sigmoid activation, elementwise 1 / (1 + exp(-x)).',
  architectures: ['efficientnetv2', 'openfold3', 'rtdetrv2', 'rwkv7', 'yolov10'],
  baseline: Sigmoid,
  f: sigmoid64,
  ci: [
    { name: 'small', dtype: 'f32', dims: { T: 7, D: 129 }, init: [] },
    { name: 'small-bf16', dtype: 'bf16', dims: { T: 5, D: 80 }, init: [] },
  ],
  production: [
    { name: 'yolov10n-cls-scores-bs1', dtype: 'f16', dims: { T: 80, D: 8400 }, init: [] },
    { name: 'yolov10n-cls-scores-bs32', dtype: 'f16', dims: { T: 32 * 80, D: 8400 }, init: [] },
  ],
  inputScale: 4,
  flopsPerElement: 4,
});
