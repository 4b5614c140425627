import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import type { MaxPool2d } from '../../../layers/pooling.js';
import { createLayer } from '../../../layers/registry.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refSPPF } from '../reference.js';
import type { YOLOConv } from './yolov10_conv.js';

/**
 * ultralytics.nn.modules.block.SPPF(c1, c2, k=5): spatial pyramid pooling, fast: cv1 to c1 / 2, three chained
 * MaxPool2d(k, stride 1, padding k / 2), the four maps concatenated, cv2 to c2.
 */
export class YOLOSPPF extends Module {
  readonly cv1: YOLOConv;
  readonly cv2: YOLOConv;
  readonly m: MaxPool2d;
  constructor(
    readonly c1: number,
    readonly c2: number,
    readonly k = 5,
  ) {
    super();
    const c_ = Math.floor(c1 / 2);
    this.cv1 = this.createModule('cv1', 'L2/yolov10_conv', c1, c_, 1, 1);
    this.cv2 = this.createModule('cv2', 'L2/yolov10_conv', c_ * 4, c2, 1, 1);
    this.m = this.registerModule('m', createLayer('MaxPool2d', k, 1, Math.floor(k / 2)));
  }

  forward(x: Tensor): Tensor {
    const ys = [this.cv1.forward(x)];
    for (let i = 0; i < 3; i++) ys.push(this.m.forward(ys[i]!) as Tensor);
    const cat = F.cat(ys, 1);
    for (const t of ys) t.dispose();
    const y = this.cv2.forward(cat);
    cat.dispose();
    return y;
  }
}

const pcase = (dtype: 'f32' | 'bf16' | 'f16', N: number, c1: number, c2: number, H: number, W: number, k = 5) => ({ dtype, dims: { N, C1: c1, C2: c2, H, W }, init: [c1, c2, k] });

export const yolov10SppfTask = defineTask(
  {
    id: 'L2/yolov10_sppf',
    level: 2,
    className: 'YOLOSPPF',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.SPPF',
    description: 'Spatial pyramid pooling (fast): a 1x1 Conv, three chained 5x5 stride-1 max pools, concat, 1x1 Conv.',
    init: [{ name: 'c1', type: 'int' }, { name: 'c2', type: 'int' }, { name: 'k', type: 'int', optional: true, default: 5 }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C1', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C2', 'H', 'W'] }],
    imports: ['L2/yolov10_conv', 'L1/max_pool2d'],
    cases: {
      ci: [{ name: 'small-f32', ...pcase('f32', 2, 16, 16, 6, 5) }, { name: 'small-bf16', ...pcase('bf16', 1, 16, 8, 4, 4) }],
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof pcase>> = {};
        for (const l of layers) if (l.spec.module === 'SPPF') out[`L${l.spec.index}`] = pcase('f16', B, l.c1, l.spec.c2, l.h, l.w, l.spec.args[2] as number);
        return out;
      }),
    },
  },
  {
    baseline: YOLOSPPF,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C1!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => [refSPPF(x!, P, '', (c.init[2] as number | undefined) ?? 5)],
    work: (c) => {
      const { N, C1, C2, H, W } = c.dims as Record<string, number>;
      const h = Math.floor(C1! / 2);
      return { bytes: itemsizeOf(c.dtype) * N! * H! * W! * (C1! + 8 * h + C2!), flops: 2 * N! * H! * W! * (C1! * h + 4 * h * C2!) + 75 * N! * h * H! * W! };
    },
  },
);
