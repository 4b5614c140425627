import { F, Module, type Tensor } from '@fastkernels/core';
import { defineUnaryActivationTask, elementwiseReference } from './unary.js';

/** torch.nn.LogSigmoid: log(sigmoid(x)). GLA's forget gate is logsigmoid(gk_proj(x)) / gate_logit_normalizer. */
export class LogSigmoid extends Module {
  forward(x: Tensor): Tensor {
    return F.logSigmoid(x);
  }
}

const logSigmoid64 = (v: number): number => Math.min(v, 0) - Math.log1p(Math.exp(-Math.abs(v)));
/** Golden log(sigmoid(x)) = -softplus(-x), in the stable form min(x, 0) - log1p(exp(-|x|)). */
export const logSigmoidReference = elementwiseReference(logSigmoid64);

export const logSigmoidTask = defineUnaryActivationTask('log_sigmoid', {
  id: 'L1/log_sigmoid',
  className: 'LogSigmoid',
  mirrors: 'torch.nn.LogSigmoid',
  description: 'log(sigmoid(x)) elementwise, computed stably (GLA / RetNet gate logits).',
  architectures: ['gla', 'retnet'],
  baseline: LogSigmoid,
  f: logSigmoid64,
  production: [
    // fla-hub/gla-2.7B-100B's gate, key_dim 1280 per token: a 4096-token prefill and a 256-sequence decode step
    { name: 'gla-2.7b-gate-prefill-4096', dtype: 'bf16', dims: { T: 4096, D: 1280 }, init: [] },
    { name: 'gla-2.7b-gate-decode-b256', dtype: 'bf16', dims: { T: 256, D: 1280 }, init: [] },
  ],
  inputScale: 4,
  flopsPerElement: 4,
});
