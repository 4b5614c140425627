import { ReLU } from '../../../layers/activation.js';
import { defineUnaryActivationTask, elementwiseReference } from './unary.js';

const relu64 = (v: number): number => (v > 0 ? v : 0);
/** Golden max(x, 0), elementwise. */
export const reluReference = elementwiseReference(relu64);

/** torch.nn.ReLU: the layer (layers/activation.ts) is the baseline (BGE-M3's sparse head: relu(sparse_linear(h))). */
export const reluTask = defineUnaryActivationTask('relu', {
  id: 'L1/relu',
  className: 'ReLU',
  mirrors: 'torch.nn.ReLU',
  description: 'ReLU activation, elementwise max(x, 0).',
  architectures: ['bge_m3', 'dlrmv2', 'dp3', 'mobilenetv4', 'openfold3', 'rtdetrv2'],
  baseline: ReLU,
  f: relu64,
  production: [
    // BGE-M3 sparse head: relu over the token weights of a 64 x 512 batch (one weight per token).
    { name: 'bge-m3-sparse-32k-tokens', dtype: 'bf16', dims: { T: 32768, D: 1 }, init: [] },
    // DLRMv2 bottom MLP: 512 -> 256 activations on a batch of 65536.
    { name: 'dlrmv2-bottom-mlp', dtype: 'bf16', dims: { T: 65536, D: 256 }, init: [] },
  ],
  flopsPerElement: 1,
});
