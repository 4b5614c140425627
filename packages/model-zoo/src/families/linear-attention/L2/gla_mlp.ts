import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { SiLU } from '../../../layers/activation.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initGlaParameters } from '../cases.js';
import { GLA_2_7B, tinyGlaConfig, type GlaConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refGlaMlp } from '../reference.js';

/**
 * FLA's GatedMLP, imported by the GLA model as GLAMLP: down_proj(swish(gate_proj(x)) * up_proj(x)), three bias-free
 * L1/linear projections (FLA's checkpoint keeps gate and up apart) and the SiLU layer (L1/silu where registered).
 * forward(x [N, D]) -> [N, D]. Constructor: (hiddenSize, hiddenRatio, intermediateSize, hiddenAct) as FLA's.
 */
export class GLAMLP extends Module {
  readonly intermediateSize: number;
  readonly gateProj: Linear;
  readonly upProj: Linear;
  readonly downProj: Linear;
  private readonly actFn: SiLU;
  constructor(
    readonly hiddenSize: number,
    readonly hiddenRatio: number | null = 4,
    intermediateSize: number | null = null,
    readonly hiddenAct = 'swish',
  ) {
    super();
    if (hiddenAct !== 'swish') throw new RangeError(`GLAMLP: unsupported hidden_act '${hiddenAct}' (swish)`);
    // FLA: 2/3 of hidden * hidden_ratio, rounded up to a multiple of 256
    this.intermediateSize = intermediateSize ?? 256 * Math.ceil(Math.trunc((hiddenSize * (hiddenRatio ?? 4) * 2) / 3) / 256);
    this.gateProj = this.createModule('gate_proj', 'L1/linear', hiddenSize, this.intermediateSize, false);
    this.upProj = this.createModule('up_proj', 'L1/linear', hiddenSize, this.intermediateSize, false);
    this.downProj = this.createModule('down_proj', 'L1/linear', this.intermediateSize, hiddenSize, false);
    this.actFn = this.registerModule('act_fn', createLayer('SiLU'));
  }

  forward(x: Tensor): Tensor {
    const gate = this.gateProj.forward(x);
    const up = this.upProj.forward(x);
    const a = this.actFn.forward(gate);
    const h = F.mul(a, up);
    for (const t of [gate, up, a]) t.dispose();
    const y = this.downProj.forward(h);
    h.dispose();
    return y;
  }
}

const mlpCase = (name: string, dtype: 'f32' | 'bf16', cfg: GlaConfig, N: number) => ({
  name, dtype, dims: { N, D: cfg.hiddenSize, I: cfg.intermediateSize }, init: [cfg.hiddenSize, cfg.hiddenRatio, cfg.intermediateSize, 'swish'],
});

export const glaMlpTask = defineTask(
  {
    id: 'L2/gla_mlp',
    level: 2,
    className: 'GLAMLP',
    family: [FAMILY],
    architectures: ['gla'],
    mirrors: 'fla.modules.mlp.GatedMLP',
    description: 'The GLA block MLP (SwiGLU): down_proj(silu(gate_proj(x)) * up_proj(x)).',
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'hiddenRatio', type: 'int', optional: true, default: 4 },
      { name: 'intermediateSize', type: 'int', optional: true, default: null, doc: 'null: 2/3 * hidden * ratio rounded up to 256' },
      { name: 'hiddenAct', type: 'enum', choices: ['swish'], optional: true, default: 'swish' },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'D'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'D'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/linear'],
    cases: {
      ci: [mlpCase('tiny-f32', 'f32', tinyGlaConfig(), 7), mlpCase('tiny-bf16', 'bf16', tinyGlaConfig(), 5)],
      production: [mlpCase('gla-2.7b-decode-b1', 'bf16', GLA_2_7B, 1), mlpCase('gla-2.7b-decode-b256', 'bf16', GLA_2_7B, 256), mlpCase('gla-2.7b-prefill-4096', 'bf16', GLA_2_7B, 4096)],
    },
  },
  {
    baseline: GLAMLP,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.D!], c.dtype)],
    initParameters: (m, _c, rng) => initGlaParameters(m, rng),
    reference: ([x], params, c) => [hostArray(x!.shape, refGlaMlp(x!.data, c.dims.N!, params, ''))],
    work: (c) => {
      const { N, D, I } = c.dims as { N: number; D: number; I: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: 3 * bytesOf([I, D], it) + 2 * bytesOf([N, D], it) + 3 * bytesOf([N, I], it), flops: 6 * N * D * I + 5 * N * I };
    },
  },
);

