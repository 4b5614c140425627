import { hostArray, type HostArray } from '@fastkernels/core';
import { ReLU } from '../../../layers/activation.js';
import { defineL1OpTask } from '../../define-op-task.js';

/** Golden max(x, 0), elementwise. */
export function reluReference(x: HostArray): HostArray {
  return hostArray(x.shape, x.data.map((v) => (v > 0 ? v : 0)));
}

/** torch.nn.ReLU: the layer (layers/activation.ts) is the baseline (BGE-M3's sparse head: relu(sparse_linear(h))). */
export const reluTask = defineL1OpTask('relu', {
  id: 'L1/relu',
  className: 'ReLU',
  mirrors: 'torch.nn.ReLU',
  description: 'ReLU activation, elementwise max(x, 0).',
  architectures: ['bge_m3', 'dlrmv2', 'dp3', 'mobilenetv4', 'openfold3', 'rtdetrv2'],
  baseline: ReLU,
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
      // BGE-M3 sparse head: relu over the token weights of a 64 x 512 batch (one weight per token).
      { name: 'bge-m3-sparse-32k-tokens', dtype: 'bf16', dims: { T: 32768, D: 1 }, init: [] },
      // DLRMv2 bottom MLP: 512 -> 256 activations on a batch of 65536.
      { name: 'dlrmv2-bottom-mlp', dtype: 'bf16', dims: { T: 65536, D: 256 }, init: [] },
    ],
  },
  reference: ([x]) => [reluReference(x!)],
  flopsPerElement: 1,
});
