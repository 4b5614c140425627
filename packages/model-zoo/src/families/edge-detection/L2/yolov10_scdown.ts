import { Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { convOut } from '../../../tasks/L1/conv/conv2d.js';
import { autopad, initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refSCDown } from '../reference.js';
import type { YOLOConv } from './yolov10_conv.js';

/**
 * ultralytics.nn.modules.block.SCDown(c1, c2, k, s): spatial-channel decoupled downsampling, a pointwise Conv to c2
 * then a depthwise k x k stride-s Conv without activation.
 */
export class YOLOSCDown extends Module {
  readonly cv1: YOLOConv;
  readonly cv2: YOLOConv;
  constructor(
    readonly c1: number,
    readonly c2: number,
    readonly k: number,
    readonly s: number,
  ) {
    super();
    this.cv1 = this.createModule('cv1', 'L2/yolov10_conv', c1, c2, 1, 1);
    this.cv2 = this.createModule('cv2', 'L2/yolov10_conv', c2, c2, k, s, null, c2, 1, false);
  }

  forward(x: Tensor): Tensor {
    const h = this.cv1.forward(x);
    const y = this.cv2.forward(h);
    h.dispose();
    return y;
  }
}

const scase = (dtype: 'f32' | 'bf16' | 'f16', N: number, c1: number, c2: number, H: number, W: number, k = 3, s = 2) => ({
  dtype, dims: { N, C1: c1, C2: c2, H, W, Ho: convOut(H, k, s, autopad(k)), Wo: convOut(W, k, s, autopad(k)) }, init: [c1, c2, k, s],
});

export const yolov10ScdownTask = defineTask(
  {
    id: 'L2/yolov10_scdown',
    level: 2,
    className: 'YOLOSCDown',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.SCDown',
    description: 'Downsampling by a pointwise Conv then a depthwise strided Conv (no activation).',
    init: [{ name: 'c1', type: 'int' }, { name: 'c2', type: 'int' }, { name: 'k', type: 'int' }, { name: 's', type: 'int' }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C1', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C2', 'Ho', 'Wo'] }],
    imports: ['L2/yolov10_conv'],
    cases: {
      ci: [{ name: 'small-f32', ...scase('f32', 2, 8, 16, 8, 9) }, { name: 'small-bf16', ...scase('bf16', 1, 16, 16, 6, 6) }],
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof scase>> = {};
        for (const l of layers) if (l.spec.module === 'SCDown') out[`L${l.spec.index}`] = scase('f16', B, l.c1, l.spec.c2, l.h, l.w, l.spec.args[2] as number, l.spec.args[3] as number);
        return out;
      }),
    },
  },
  {
    baseline: YOLOSCDown,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C1!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => [refSCDown(x!, P, '', c.init[1] as number, c.init[2] as number, c.init[3] as number)],
    work: (c) => {
      const { N, C1, C2, H, W, Ho, Wo } = c.dims as Record<string, number>;
      const k = c.init[2] as number;
      return { bytes: itemsizeOf(c.dtype) * (N! * C1! * H! * W! + 2 * N! * C2! * H! * W! + N! * C2! * Ho! * Wo!), flops: 2 * N! * H! * W! * C1! * C2! + 2 * N! * C2! * Ho! * Wo! * k * k };
    },
  },
);
