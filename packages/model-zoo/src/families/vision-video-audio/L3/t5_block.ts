import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { T5LayerNorm } from '../../../tasks/L1/norm/t5_layer_norm.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { rmsNorm, param, sub } from '../host-math.js';
import { boolMask, caseLens, t5AttentionReference, type T5SelfAttention } from '../L2/t5_attention.js';
import { t5DenseReference, type T5DenseGatedActDense } from '../L2/t5_dense.js';
import { T5_XXL, tinyT5Config, type T5Config } from '../t5-config.js';

/** HF's T5LayerSelfAttention: x + SelfAttention(layer_norm(x)); returns [x', positionBias]. */
class T5LayerSelfAttention extends Module {
  readonly selfAttention: T5SelfAttention;
  readonly layerNorm: T5LayerNorm;
  constructor(config: T5Config, hasRelativeAttentionBias: boolean) {
    super();
    this.selfAttention = this.createModule('SelfAttention', 'L2/t5_attention', config, hasRelativeAttentionBias);
    this.layerNorm = this.createModule('layer_norm', 'L1/t5_layer_norm', config.dModel, config.layerNormEpsilon);
  }

  forward(x: Tensor, mask: Tensor | null, positionBias: Tensor | null): Tensor[] {
    const n = this.layerNorm.forward(x);
    const [a, bias] = this.selfAttention.forward(n, mask, positionBias) as [Tensor, Tensor];
    n.dispose();
    const y = F.add(x, a);
    a.dispose();
    return [y, bias];
  }
}

/** HF's T5LayerFF: x + DenseReluDense(layer_norm(x)) (gated for T5 v1.1). */
class T5LayerFF extends Module {
  readonly denseReluDense: T5DenseGatedActDense;
  readonly layerNorm: T5LayerNorm;
  constructor(config: T5Config) {
    super();
    if (!config.isGatedAct) throw new RangeError('T5LayerFF: only the gated feed-forward (T5 v1.1, feed_forward_proj gated-*) is built');
    this.denseReluDense = this.createModule('DenseReluDense', 'L2/t5_dense', config);
    this.layerNorm = this.createModule('layer_norm', 'L1/t5_layer_norm', config.dModel, config.layerNormEpsilon);
  }

  forward(x: Tensor): Tensor {
    const n = this.layerNorm.forward(x);
    const f = this.denseReluDense.forward(n);
    n.dispose();
    const y = F.add(x, f);
    f.dispose();
    return y;
  }
}

/**
 * HF's T5Block of the encoder: layer.0 = T5LayerSelfAttention, layer.1 = T5LayerFF (checkpoint paths
 * `layer.0.SelfAttention.q.weight`, `layer.1.DenseReluDense.wi_0.weight`, `layer.N.layer_norm.weight`).
 * forward(hiddenStates [B, S, D], mask [B, S] bool | null, positionBias | null) -> [hiddenStates, positionBias].
 */
export class T5Block extends Module {
  readonly attention: T5LayerSelfAttention;
  readonly ff: T5LayerFF;
  constructor(
    readonly config: T5Config,
    readonly hasRelativeAttentionBias = false,
  ) {
    super();
    this.attention = this.registerModule('layer.0', new T5LayerSelfAttention(config, hasRelativeAttentionBias));
    this.ff = this.registerModule('layer.1', new T5LayerFF(config));
  }

  forward(hiddenStates: Tensor, mask: Tensor | null = null, positionBias: Tensor | null = null): Tensor[] {
    const [h, bias] = this.attention.forward(hiddenStates, mask, positionBias) as [Tensor, Tensor];
    const y = this.ff.forward(h);
    h.dispose();
    return [y, bias];
  }
}

/** Golden float64 T5Block: returns [hidden, positionBias]. */
export function t5BlockReference(x: HostArray, mask: HostArray | null, params: ReadonlyMap<string, HostArray>, c: T5Config, hasBias: boolean): HostArray[] {
  const [B, S, D] = x.shape as [number, number, number];
  const n = rmsNorm(x.data, B * S, D, param(params, 'layer.0.layer_norm.weight'), c.layerNormEpsilon);
  const [a, bias] = t5AttentionReference(hostArray(x.shape, n), mask, sub(params, 'layer.0.SelfAttention'), c, hasBias) as [HostArray, HostArray];
  const h = x.data.map((v, i) => v + a.data[i]!);
  const n2 = rmsNorm(h, B * S, D, param(params, 'layer.1.layer_norm.weight'), c.layerNormEpsilon);
  const f = t5DenseReference(hostArray(x.shape, n2), sub(params, 'layer.1.DenseReluDense'), c);
  return [hostArray(x.shape, h.map((v, i) => v + f.data[i]!)), bias];
}

const blockCase = (name: string, dtype: 'f32' | 'bf16', cfg: T5Config, B: number, S: number, lens: number[] | null) => ({
  name, dtype, dims: { B, S, D: cfg.dModel, H: cfg.numHeads, Bb: lens ? B : 1 }, init: [cfg, true], options: lens ? { lens } : {},
});
const TINY = tinyT5Config();

export const t5BlockTask = defineTask(
  {
    id: 'L3/t5_block',
    level: 3,
    className: 'T5Block',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video'],
    mirrors: 'transformers.models.t5.modeling_t5.T5Block',
    description: 'T5 encoder block: pre-norm (T5LayerNorm) self-attention with the relative position bias, then pre-norm gated-GELU feed-forward, residuals.',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed T5 config (T5Config)' },
      { name: 'hasRelativeAttentionBias', type: 'bool', optional: true, default: false },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'mask', dtype: 'bool', shape: ['B', 'S'], optional: true },
      { name: 'positionBias', dtype: 'act', shape: ['Bb', 'H', 'S', 'S'], optional: true },
    ],
    outputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'positionBias', dtype: 'act', shape: ['Bb', 'H', 'S', 'S'] },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L2/t5_attention', 'L2/t5_dense', 'L1/t5_layer_norm'],
    cases: {
      ci: [blockCase('tiny-padded-f32', 'f32', TINY, 2, 18, [18, 6]), blockCase('tiny-bf16', 'bf16', TINY, 1, 10, null)],
      production: [blockCase('t5-xxl-512', 'bf16', T5_XXL, 1, 512, null), blockCase('t5-xxl-b4-512-padded', 'bf16', T5_XXL, 4, 512, [512, 77, 200, 31])],
    },
  },
  {
    baseline: T5Block,
    makeInputs: (c, ctx, rng) => {
      const { B, S, D } = c.dims as Record<string, number>;
      const lens = caseLens(c);
      return [randn(ctx, rng, [B!, S!, D!], c.dtype), lens ? boolMask(ctx, lens, S!) : null, null];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x, mask], params, c) => t5BlockReference(x!, mask ?? null, params, c.init[0] as T5Config, (c.init[1] as boolean | undefined) ?? false),
    work: (c) => {
      const { B, S, D, H } = c.dims as Record<string, number>;
      const cfg = c.init[0] as T5Config;
      const I = cfg.numHeads * cfg.dKv;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([4 * I + 3 * cfg.dFf, D!], it) + 12 * bytesOf([B!, S!, D!], it) + bytesOf([B!, H!, S!, S!], it), flops: 8 * B! * S! * D! * I + 4 * B! * S! * S! * I + 6 * B! * S! * D! * cfg.dFf };
    },
  },
);
