import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { geluErf, geluTanh, linear, param, relu } from '../host-math.js';
import { T5_XXL, tinyT5Config, type T5Config } from '../t5-config.js';

type Act = Module & { forward(x: Tensor): Tensor };

function activation(c: T5Config): Act {
  if (c.denseActFn === 'relu') return createLayer('ReLU');
  return createLayer('GELU', c.denseActFn === 'gelu_tanh' ? 'tanh' : 'none');
}

/**
 * HF's T5DenseGatedActDense (T5 v1.1, FLUX's T5-XXL): wo(act(wi_0(h)) * wi_1(h)), no biases, act gelu_new (tanh).
 * forward(hiddenStates [..., d_model]) -> [..., d_model].
 */
export class T5DenseGatedActDense extends Module {
  readonly wi0: Linear;
  readonly wi1: Linear;
  readonly wo: Linear;
  readonly act: Act;
  constructor(readonly config: T5Config) {
    super();
    this.wi0 = this.createModule('wi_0', 'L1/linear', config.dModel, config.dFf, false);
    this.wi1 = this.createModule('wi_1', 'L1/linear', config.dModel, config.dFf, false);
    this.wo = this.createModule('wo', 'L1/linear', config.dFf, config.dModel, false);
    this.act = this.registerModule('act', activation(config));
  }

  forward(hiddenStates: Tensor): Tensor {
    const g = this.wi0.forward(hiddenStates);
    const a = this.act.forward(g);
    g.dispose();
    const l = this.wi1.forward(hiddenStates);
    const h = F.mul(a, l);
    a.dispose();
    l.dispose();
    const y = this.wo.forward(h);
    h.dispose();
    return y;
  }
}

/** HF's T5DenseActDense (original T5): wo(act(wi(h))), act relu. The task's second class. */
export class T5DenseActDense extends Module {
  readonly wi: Linear;
  readonly wo: Linear;
  readonly act: Act;
  constructor(readonly config: T5Config) {
    super();
    this.wi = this.createModule('wi', 'L1/linear', config.dModel, config.dFf, false);
    this.wo = this.createModule('wo', 'L1/linear', config.dFf, config.dModel, false);
    this.act = this.registerModule('act', activation(config));
  }

  forward(hiddenStates: Tensor): Tensor {
    const h = this.wi.forward(hiddenStates);
    const a = this.act.forward(h);
    h.dispose();
    const y = this.wo.forward(a);
    a.dispose();
    return y;
  }
}

const ACT = { gelu_tanh: geluTanh, gelu: geluErf, relu };

/** Golden float64 T5 dense (gated or not, by the config) over rows of x [..., d_model]. */
export function t5DenseReference(x: HostArray, params: ReadonlyMap<string, HostArray>, c: T5Config): HostArray {
  const rows = x.data.length / c.dModel;
  const f = ACT[c.denseActFn];
  const h = c.isGatedAct
    ? (() => {
        const l = linear(x.data, rows, param(params, 'wi_1.weight'));
        return linear(x.data, rows, param(params, 'wi_0.weight')).map((v, i) => f(v) * l[i]!);
      })()
    : linear(x.data, rows, param(params, 'wi.weight')).map(f);
  return hostArray(x.shape, linear(h, rows, param(params, 'wo.weight')));
}

const denseCase = (name: string, dtype: 'f32' | 'bf16', cfg: T5Config, T: number) => ({ name, dtype, dims: { T, D: cfg.dModel, F: cfg.dFf }, init: [cfg] });

export const t5DenseTask = defineTask(
  {
    id: 'L2/t5_dense',
    level: 2,
    className: 'T5DenseGatedActDense',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video'],
    mirrors: 'transformers.models.t5.modeling_t5.T5DenseGatedActDense',
    description: 'T5 v1.1 gated feed-forward: wo(gelu_tanh(wi_0 h) * wi_1 h), no biases. T5DenseActDense (relu, ungated) lives in the same file.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed T5 config (T5Config)' }],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'D'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'D'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 2e-2 } },
    imports: ['L1/linear', 'L1/gelu'],
    cases: {
      ci: [denseCase('tiny-f32', 'f32', tinyT5Config(), 11), denseCase('tiny-bf16', 'bf16', tinyT5Config(), 6)],
      production: [denseCase('t5-xxl-512', 'bf16', T5_XXL, 512), denseCase('t5-xxl-b4-512', 'bf16', T5_XXL, 2048)],
    },
  },
  {
    baseline: T5DenseGatedActDense,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.D!], c.dtype)],
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x], params, c) => [t5DenseReference(x!, params, c.init[0] as T5Config)],
    work: (c) => {
      const { T, D, F: Ff } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([3 * Ff!, D!], it) + 2 * bytesOf([T!, D!], it) + 3 * bytesOf([T!, Ff!], it), flops: 6 * T! * D! * Ff! };
    },
  },
);
