import { Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import type { Conv2d } from '../../../layers/conv.js';
import { createLayer } from '../../../layers/registry.js';
import type { LayerNorm2d } from '../../../tasks/L1/norm/layer_norm2d.js';
import { blockBytes, blockFlops, initConvNextParameters, itemsize, stageSides } from '../convnextv2/cases.js';
import { CONVNEXTV2_BASE_384, tinyConvNextV2Config, type ConvNextV2Config } from '../convnextv2/config.js';
import { refConvNextV2Stage } from '../convnextv2/reference.js';
import { FAMILY } from '../family.js';
import type { ConvNeXtV2Layer } from '../L2/convnextv2_block.js';

/**
 * HF ConvNextV2Stage(config, in_channels, out_channels, kernel_size=2, stride=2, depth=2, drop_path_rates=None): when
 * the width or the resolution changes, downsampling_layer = [LayerNorm2d(in, eps 1e-6), Conv2d(in, out, k, stride=s)]
 * (HF's ModuleList, so its checkpoint names are downsampling_layer.0 / .1), then `depth` ConvNeXtV2Layer blocks.
 */
export class ConvNeXtV2Stage extends Module {
  readonly downsampling: readonly [LayerNorm2d, Conv2d] | null;
  readonly layers: ConvNeXtV2Layer[] = [];
  constructor(
    readonly config: ConvNextV2Config,
    readonly inChannels: number,
    readonly outChannels: number,
    readonly kernelSize = 2,
    readonly stride = 2,
    readonly depth = 2,
    readonly dropPathRates: readonly number[] | null = null,
  ) {
    super();
    if (inChannels !== outChannels || stride > 1) {
      const norm = this.createModule<LayerNorm2d>('downsampling_layer.0', 'L1/layer_norm2d', inChannels, 1e-6);
      const conv = this.registerModule('downsampling_layer.1', createLayer('Conv2d', inChannels, outChannels, kernelSize, stride));
      this.downsampling = [norm, conv];
    } else this.downsampling = null;
    for (let j = 0; j < depth; j++) this.layers.push(this.createModule(`layers.${j}`, 'L2/convnextv2_block', config, outChannels, dropPathRates?.[j] ?? 0));
  }

  forward(features: Tensor): Tensor {
    let h = features;
    const step = (next: Tensor) => {
      if (h !== features) h.dispose();
      h = next;
    };
    if (this.downsampling) for (const m of this.downsampling) step(m.forward(h));
    for (const layer of this.layers) step(layer.forward(h));
    return h === features ? h.view([...h.shape]) : h;
  }
}

/** A stage case: [N, Cin, H, W] -> [N, Cout, H / s, W / s]; init (config, in, out, 2, s, depth). */
const stage = (name: string, dtype: 'f32' | 'bf16', config: ConvNextV2Config, N: number, Cin: number, Cout: number, H: number, s: number, depth: number) => ({
  name,
  dtype,
  dims: { N, Cin, Cout, H, W: H, Ho: H / s, Wo: H / s },
  init: [config, Cin, Cout, 2, s, depth],
});

const base = CONVNEXTV2_BASE_384;
const sides = stageSides(base, base.imageSize);
const baseStage = (i: number, N: number) => stage(`convnextv2-base-stage${i}-bs${N}`, 'bf16', base, N, base.hiddenSizes[Math.max(0, i - 1)]!, base.hiddenSizes[i]!, i ? sides[i - 1]! : sides[0]!, i ? 2 : 1, base.depths[i]!);

export const convnextv2StageTask = defineTask(
  {
    id: 'L3/convnextv2_stage',
    level: 3,
    className: 'ConvNeXtV2Stage',
    family: [FAMILY],
    architectures: ['convnextv2'],
    mirrors: 'transformers.models.convnextv2.modeling_convnextv2.ConvNextV2Stage',
    description: 'ConvNeXt-V2 stage: optional downsampling (LayerNorm2d + 2x2 stride-2 conv) and a stack of ConvNeXt-V2 blocks.',
    init: [
      { name: 'config', type: 'object', doc: 'ConvNextV2Config (hidden_act)' },
      { name: 'inChannels', type: 'int' },
      { name: 'outChannels', type: 'int' },
      { name: 'kernelSize', type: 'int', optional: true, default: 2 },
      { name: 'stride', type: 'int', optional: true, default: 2 },
      { name: 'depth', type: 'int', optional: true, default: 2 },
      { name: 'dropPathRates', type: 'object', optional: true, default: null, doc: 'per-block stochastic depth: the identity at inference' },
    ],
    inputs: [{ name: 'features', dtype: 'act', shape: ['N', 'Cin', 'H', 'W'], optional: false }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'Cout', 'Ho', 'Wo'], optional: false }],
    imports: ['L1/layer_norm2d', 'L1/conv2d', 'L2/convnextv2_block'],
    tolerance: {},
    cases: {
      ci: [
        stage('tiny-down-f32', 'f32', tinyConvNextV2Config(), 2, 8, 16, 8, 2, 2),
        stage('tiny-first-bf16', 'bf16', tinyConvNextV2Config(), 1, 8, 8, 6, 1, 1),
      ],
      // ConvNeXt-V2-base at 384 x 384: every stage (stage 2: 27 blocks), batch 32 and batch 1
      production: [0, 1, 2, 3].flatMap((i) => [baseStage(i, 32), baseStage(i, 1)]),
    },
  },
  {
    baseline: ConvNeXtV2Stage,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.Cin!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initConvNextParameters(m, rng),
    reference: ([x], P, c) => {
      const [config, inC, outC, , s, depth] = c.init as [ConvNextV2Config, number, number, number, number, number];
      return [refConvNextV2Stage(x!, P, '', config, inC, outC, s, depth)];
    },
    work: (c) => {
      const { N, Cin, Cout, H, W, Ho, Wo } = c.dims as Record<string, number>;
      const depth = c.init[5] as number;
      const it = itemsize(c.dtype);
      const down = Cin !== Cout || H !== Ho;
      const downFlops = down ? 7 * N! * Cin! * H! * W! + 2 * N! * Ho! * Wo! * Cout! * Cin! * 4 : 0;
      const downBytes = down ? it * (2 * N! * Cin! * H! * W! + N! * Cout! * Ho! * Wo! + 4 * Cin! * Cout!) : 0;
      return { bytes: downBytes + depth * blockBytes(N!, Cout!, Ho!, Wo!, it), flops: downFlops + depth * blockFlops(N!, Cout!, Ho!, Wo!) };
    },
  },
);
