import { F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';

/** torch.nn.LogSigmoid: log(sigmoid(x)). GLA's forget gate is logsigmoid(gk_proj(x)) / gate_logit_normalizer. */
export class LogSigmoid extends Module {
  forward(x: Tensor): Tensor {
    return F.logSigmoid(x);
  }
}

/** Golden log(sigmoid(x)) = -softplus(-x), in the stable form min(x, 0) - log1p(exp(-|x|)). */
export function logSigmoidReference(x: HostArray): HostArray {
  return hostArray(x.shape, x.data.map((v) => Math.min(v, 0) - Math.log1p(Math.exp(-Math.abs(v)))));
}

export const logSigmoidTask = defineL1OpTask('log_sigmoid', {
  id: 'L1/log_sigmoid',
  className: 'LogSigmoid',
  mirrors: 'torch.nn.LogSigmoid',
  description: 'log(sigmoid(x)) elementwise, computed stably (GLA / RetNet gate logits).',
  architectures: ['gla', 'retnet'],
  baseline: LogSigmoid,
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
      // fla-hub/gla-2.7B-100B's gate, key_dim 1280 per token: a 4096-token prefill and a 256-sequence decode step
      { name: 'gla-2.7b-gate-prefill-4096', dtype: 'bf16', dims: { T: 4096, D: 1280 }, init: [] },
      { name: 'gla-2.7b-gate-decode-b256', dtype: 'bf16', dims: { T: 256, D: 1280 }, init: [] },
    ],
  },
  reference: ([x]) => [logSigmoidReference(x!)],
  inputScale: 4,
  flopsPerElement: 4,
});
