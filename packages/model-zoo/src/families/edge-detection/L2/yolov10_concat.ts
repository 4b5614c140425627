import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { catChannels } from '../reference.js';

/**
 * ultralytics.nn.modules.conv.Concat(dimension=1): torch.cat of the layer's inputs. YOLOv10's neck concatenates two
 * maps each time (an upsampled or downsampled path and a saved one), so forward takes the pair.
 */
export class YOLOConcat extends Module {
  constructor(readonly d = 1) {
    super();
  }

  forward(x0: Tensor, x1: Tensor): Tensor {
    return F.cat([x0, x1], this.d);
  }
}

const ccase = (dtype: 'f32' | 'bf16' | 'f16', N: number, c0: number, c1: number, H: number, W: number) => ({ dtype, dims: { N, C0: c0, C1: c1, C: c0 + c1, H, W }, init: [1] });

export const yolov10ConcatTask = defineTask(
  {
    id: 'L2/yolov10_concat',
    level: 2,
    className: 'YOLOConcat',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.conv.Concat',
    description: "Channel concatenation of the neck's two paths (torch.cat along dim 1).",
    init: [{ name: 'd', type: 'int', optional: true, default: 1 }],
    inputs: [{ name: 'x0', dtype: 'act', shape: ['N', 'C0', 'H', 'W'] }, { name: 'x1', dtype: 'act', shape: ['N', 'C1', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    imports: [],
    cases: {
      ci: [{ name: 'small-f32', ...ccase('f32', 2, 5, 3, 4, 6) }, { name: 'small-bf16', ...ccase('bf16', 1, 8, 16, 3, 3) }],
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof ccase>> = {};
        for (const l of layers) if (l.spec.module === 'Concat') out[`L${l.spec.index}`] = ccase('f16', B, l.c1, l.spec.c2 - l.c1, l.h, l.w);
        return out;
      }),
    },
  },
  {
    baseline: YOLOConcat,
    initParameters: () => {}, // no parameters
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C0!, c.dims.H!, c.dims.W!], c.dtype), randn(ctx, rng, [c.dims.N!, c.dims.C1!, c.dims.H!, c.dims.W!], c.dtype)],
    reference: ([a, b]) => [catChannels([a!, b!])],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      return { bytes: 2 * itemsizeOf(c.dtype) * N! * C! * H! * W!, flops: N! * C! * H! * W! };
    },
  },
);
