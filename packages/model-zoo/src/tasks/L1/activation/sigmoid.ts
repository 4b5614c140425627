import { hostArray, type HostArray } from '@fastkernels/core';
import { Sigmoid } from '../../../layers/activation.js';
import { defineL1OpTask } from '../../define-op-task.js';

/** Golden 1 / (1 + exp(-x)), elementwise (the two-sided form, exact for large |x|). */
export const sigmoid64 = (v: number): number => (v >= 0 ? 1 / (1 + Math.exp(-v)) : Math.exp(v) / (1 + Math.exp(v)));

export function sigmoidReference(x: HostArray): HostArray {
  return hostArray(x.shape, x.data.map(sigmoid64));
}

/** torch.nn.Sigmoid: the layer (layers/activation.ts) is the baseline (YOLOv10's class scores, gates elsewhere). */
export const sigmoidTask = defineL1OpTask('sigmoid', {
  id: 'L1/sigmoid',
  className: 'Sigmoid',
  mirrors: 'torch.nn.Sigmoid',
  description: 'Sigmoid activation, elementwise 1 / (1 + exp(-x)).',
  architectures: ['efficientnetv2', 'openfold3', 'rtdetrv2', 'rwkv7', 'yolov10'],
  baseline: Sigmoid,
  init: [],
  forward: { input: { shape: ['T', 'D'] } },
  params: {},
  attrs: () => ({}),
  cases: {
    ci: [
      { name: 'small', dtype: 'f32', dims: { T: 7, D: 129 }, init: [] },
      { name: 'small-bf16', dtype: 'bf16', dims: { T: 5, D: 80 }, init: [] },
    ],
    production: [
      // YOLOv10n at 640 x 640: the class logits of 8400 anchors x 80 classes, batch 1 and 32.
      { name: 'yolov10n-cls-scores-bs1', dtype: 'f16', dims: { T: 80, D: 8400 }, init: [] },
      { name: 'yolov10n-cls-scores-bs32', dtype: 'f16', dims: { T: 32 * 80, D: 8400 }, init: [] },
    ],
  },
  inputScale: 4,
  reference: ([x]) => [sigmoidReference(x!)],
  flopsPerElement: 4,
});
