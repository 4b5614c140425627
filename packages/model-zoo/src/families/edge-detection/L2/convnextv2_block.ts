import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import type { Conv2d } from '../../../layers/conv.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { GRN } from '../../../tasks/L1/norm/grn.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { blockBytes, blockFlops, initConvNextParameters, itemsize, stageSides } from '../convnextv2/cases.js';
import { CONVNEXTV2_BASE_384, tinyConvNextV2Config, type ConvNextV2Config } from '../convnextv2/config.js';
import { refConvNextV2Layer } from '../convnextv2/reference.js';
import { FAMILY } from '../family.js';

/** The block's activation module for config.hidden_act (HF ACT2FN: gelu is exact, gelu_new / gelu_pytorch_tanh the tanh form). */
export function activationLayer(act: ConvNextV2Config['hiddenAct']): Module & { forward(x: Tensor): Tensor } {
  return act === 'relu' ? createLayer('ReLU') : createLayer('GELU', act === 'gelu' ? 'none' : 'tanh');
}

/**
 * HF ConvNextV2Layer(config, dim, drop_path=0): depthwise 7x7 conv, then channels-last LayerNorm (eps 1e-6),
 * pwconv1 (Linear dim -> 4 dim), the activation, GRN, pwconv2 (4 dim -> dim), back to channels-first and added to the
 * input. Drop path is the identity at inference. Checkpoint names are HF's (dwconv, layernorm, pwconv1, grn, pwconv2).
 */
export class ConvNeXtV2Layer extends Module {
  readonly dwconv: Conv2d;
  readonly layernorm: LayerNorm;
  readonly pwconv1: Linear;
  readonly act: Module & { forward(x: Tensor): Tensor };
  readonly grn: GRN;
  readonly pwconv2: Linear;
  constructor(
    readonly config: ConvNextV2Config,
    readonly dim: number,
    readonly dropPath = 0,
  ) {
    super();
    this.dwconv = this.registerModule('dwconv', createLayer('Conv2d', dim, dim, 7, 1, 3, 1, dim, true));
    this.layernorm = this.registerModule('layernorm', createLayer('LayerNorm', dim, 1e-6));
    this.pwconv1 = this.createModule('pwconv1', 'L1/linear', dim, 4 * dim, true);
    this.act = this.registerModule('act', activationLayer(config.hiddenAct));
    this.grn = this.createModule('grn', 'L1/grn', 4 * dim);
    this.pwconv2 = this.createModule('pwconv2', 'L1/linear', 4 * dim, dim, true);
  }

  forward(features: Tensor): Tensor {
    const held: Tensor[] = [];
    const hold = (t: Tensor) => (held.push(t), t);
    try {
      // [N, C, H, W] -> [N, H, W, C]: a view (contiguous when the conv's output is channels-last, as cuDNN gives it)
      const x = hold(hold(this.dwconv.forward(features)).permute([0, 2, 3, 1]));
      let h = hold(this.layernorm.forward(x));
      h = hold(this.pwconv1.forward(h));
      h = hold(this.act.forward(h));
      h = hold(this.grn.forward(h));
      h = hold(this.pwconv2.forward(h));
      return F.add(features, hold(h.permute([0, 3, 1, 2])));
    } finally {
      for (const t of held) t.dispose();
    }
  }
}

/** A block case: width C over [N, C, H, W]. */
const block = (name: string, dtype: 'f32' | 'bf16', config: ConvNextV2Config, N: number, C: number, H: number) => ({ name, dtype, dims: { N, C, H, W: H }, init: [config, C] });

const base = CONVNEXTV2_BASE_384;
const sides = stageSides(base, base.imageSize);

export const convnextv2BlockTask = defineTask(
  {
    id: 'L2/convnextv2_block',
    level: 2,
    className: 'ConvNeXtV2Layer',
    family: [FAMILY],
    architectures: ['convnextv2'],
    mirrors: 'transformers.models.convnextv2.modeling_convnextv2.ConvNextV2Layer',
    description: "ConvNeXt-V2 block: depthwise 7x7 conv, channels-last LayerNorm, Linear to 4x width, GELU, GRN, Linear back, plus the residual.",
    init: [
      { name: 'config', type: 'object', doc: 'ConvNextV2Config (hidden_act)' },
      { name: 'dim', type: 'int' },
      { name: 'dropPath', type: 'float', optional: true, default: 0, doc: 'stochastic depth rate: the identity at inference' },
    ],
    inputs: [{ name: 'features', dtype: 'act', shape: ['N', 'C', 'H', 'W'], optional: false }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'], optional: false }],
    imports: ['L1/conv2d', 'L1/layer_norm', 'L1/linear', 'L1/gelu', 'L1/grn'],
    tolerance: {},
    cases: {
      ci: [block('tiny-f32', 'f32', tinyConvNextV2Config(), 2, 8, 6), block('tiny-bf16', 'bf16', tinyConvNextV2Config(), 1, 16, 5), block('tanh-gelu-f32', 'f32', tinyConvNextV2Config({ hiddenAct: 'gelu_new' }), 1, 12, 4)],
      // ConvNeXt-V2-base at 384 x 384: one block of each stage, batch 32 and batch 1
      production: [
        ...base.hiddenSizes.map((C, i) => block(`convnextv2-base-s${i}-bs32`, 'bf16', base, 32, C, sides[i]!)),
        ...base.hiddenSizes.map((C, i) => block(`convnextv2-base-s${i}-bs1`, 'bf16', base, 1, C, sides[i]!)),
      ],
    },
  },
  {
    baseline: ConvNeXtV2Layer,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initConvNextParameters(m, rng),
    reference: ([x], P, c) => [refConvNextV2Layer(x!, P, '', c.dims.C!, (c.init[0] as ConvNextV2Config).hiddenAct)],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      return { bytes: blockBytes(N!, C!, H!, W!, itemsize(c.dtype)), flops: blockFlops(N!, C!, H!, W!) };
    },
  },
);
