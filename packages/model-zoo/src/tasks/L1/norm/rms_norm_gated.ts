import { F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { initNormal } from '../../../common/inputs.js';
import { defineL1OpTask } from '../../define-op-task.js';

export type GateActivation = 'swish' | 'silu' | 'sigmoid';

/**
 * vLLM's RMSNormGated (FLA's FusedRMSNormGated is the norm_before_gate=True form): y = rms(x) * w * act(z) when
 * norm_before_gate, else rms(x * act(z)) * w; group_size normalises groups of the last dim separately; without z a
 * plain RMSNorm. forward(x, z?) -> y. GLA's g_norm_swish_gate (per head, swish, norm before gate) is one.
 */
export class RMSNormGated extends Module {
  readonly weight: Tensor;
  constructor(
    readonly hiddenSize: number,
    readonly eps = 1e-5,
    readonly groupSize: number | null = null,
    readonly normBeforeGate = false,
    readonly activation: GateActivation = 'swish',
  ) {
    super();
    if (!['swish', 'silu', 'sigmoid'].includes(activation)) throw new RangeError(`RMSNormGated: unsupported activation '${activation}' (swish, silu, sigmoid)`);
    this.weight = this.parameter('weight', [hiddenSize]).fill_(1);
  }

  forward(x: Tensor, z: Tensor | null = null): Tensor {
    return F.rmsNorm(x, null, this.weight, this.eps, {
      z,
      norm_before_gate: this.normBeforeGate,
      group_size: this.groupSize,
      activation: this.activation === 'sigmoid' ? 'sigmoid' : 'silu',
    });
  }
}

const act = (v: number, a: GateActivation) => (a === 'sigmoid' ? 1 / (1 + Math.exp(-v)) : v / (1 + Math.exp(-v)));

/** Golden gated RMSNorm over the last dim (width of weight), groups of `groupSize` (null: the whole dim). */
export function rmsNormGatedReference(x: HostArray, z: HostArray | null, weight: HostArray, eps: number, groupSize: number | null, normBeforeGate: boolean, activation: GateActivation): HostArray {
  const n = weight.data.length;
  const gs = groupSize ?? n;
  const out = hostArray(x.shape);
  const row = new Float64Array(n);
  for (let r = 0; r < x.data.length / n; r++) {
    for (let j = 0; j < n; j++) row[j] = x.data[r * n + j]! * (z && !normBeforeGate ? act(z.data[r * n + j]!, activation) : 1);
    for (let g0 = 0; g0 < n; g0 += gs) {
      let ss = 0;
      for (let j = g0; j < g0 + gs; j++) ss += row[j]! ** 2;
      const inv = 1 / Math.sqrt(ss / gs + eps);
      for (let j = g0; j < g0 + gs; j++) {
        const y = row[j]! * inv * weight.data[j]!;
        out.data[r * n + j] = z && normBeforeGate ? y * act(z.data[r * n + j]!, activation) : y;
      }
    }
  }
  return out;
}

type Init = [number, number?, (number | null)?, boolean?, GateActivation?];
const initOf = (c: { init: readonly unknown[] }) => {
  const [, eps = 1e-5, groupSize = null, normBeforeGate = false, activation = 'swish'] = c.init as Init;
  return { eps, groupSize, normBeforeGate, activation };
};

export const rmsNormGatedTask = defineL1OpTask('rms_norm', {
  id: 'L1/rms_norm_gated',
  className: 'RMSNormGated',
  mirrors: 'vllm.model_executor.layers.layernorm.RMSNormGated',
  description: 'Gated RMSNorm: rms(x) * w * act(z) (norm before gate, FLA FusedRMSNormGated) or rms(x * act(z)) * w, optionally per group of the last dim.',
  architectures: ['gla', 'kimi_linear', 'mamba2', 'qwen3_next'],
  baseline: RMSNormGated,
  init: [
    { name: 'hiddenSize', type: 'int' },
    { name: 'eps', type: 'float', optional: true, default: 1e-5 },
    { name: 'groupSize', type: 'int', optional: true, default: null, doc: 'null: one group (the whole dim)' },
    { name: 'normBeforeGate', type: 'bool', optional: true, default: false },
    { name: 'activation', type: 'enum', choices: ['swish', 'silu', 'sigmoid'], optional: true, default: 'swish' },
  ],
  forward: { input: { shape: ['T', 'D'] }, z: { shape: ['T', 'D'], doc: 'the gate; absent: a plain RMSNorm' } },
  params: { weight: { shape: ['D'] } },
  attrs: (c) => {
    const i = initOf(c);
    return { eps: i.eps, group_size: i.groupSize, norm_before_gate: i.normBeforeGate, activation: i.activation === 'sigmoid' ? 'sigmoid' : 'silu' };
  },
  cases: {
    ci: [
      { name: 'small-norm-before-gate', dtype: 'f32', dims: { T: 7, D: 64 }, init: [64, 1e-6, null, true], options: { z: true } },
      { name: 'small-grouped-bf16', dtype: 'bf16', dims: { T: 5, D: 96 }, init: [96, 1e-5, 32, false], options: { z: true } },
      { name: 'small-sigmoid-no-gate', dtype: 'f32', dims: { T: 3, D: 48 }, init: [48, 1e-5, null, true, 'sigmoid'] },
    ],
    production: [
      // fla-hub/gla-2.7B-100B's g_norm_swish_gate: per head (V 512), 5 heads a token; a 4096-token prefill, a 256-sequence decode
      { name: 'gla-2.7b-prefill-4096', dtype: 'bf16', dims: { T: 4096 * 5, D: 512 }, init: [512, 1e-6, null, true], options: { z: true } },
      { name: 'gla-2.7b-decode-b256', dtype: 'bf16', dims: { T: 256 * 5, D: 512 }, init: [512, 1e-6, null, true], options: { z: true } },
    ],
  },
  initParameters: (m, _c, rng) => initNormal(m, rng, 0.1, 1),
  reference: ([x, z], p, c) => {
    const i = initOf(c);
    return [rmsNormGatedReference(x!, z ?? null, p.get('weight')!, i.eps, i.groupSize, i.normBeforeGate, i.activation)];
  },
  flopsPerElement: 8,
});
