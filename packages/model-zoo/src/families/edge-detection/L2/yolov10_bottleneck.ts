import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refBottleneck } from '../reference.js';
import type { YOLOConv } from './yolov10_conv.js';

/**
 * ultralytics.nn.modules.block.Bottleneck(c1, c2, shortcut=True, g=1, k=(3, 3), e=0.5): Conv k0 to c_ = c2 * e, Conv
 * k1 (groups g) to c2, plus the input when shortcut and c1 == c2.
 */
export class YOLOBottleneck extends Module {
  readonly cv1: YOLOConv;
  readonly cv2: YOLOConv;
  readonly add: boolean;
  constructor(
    readonly c1: number,
    readonly c2: number,
    shortcut = true,
    g = 1,
    k: readonly [number, number] = [3, 3],
    e = 0.5,
  ) {
    super();
    const c_ = Math.trunc(c2 * e);
    this.cv1 = this.createModule('cv1', 'L2/yolov10_conv', c1, c_, k[0], 1);
    this.cv2 = this.createModule('cv2', 'L2/yolov10_conv', c_, c2, k[1], 1, null, g);
    this.add = shortcut && c1 === c2;
  }

  forward(x: Tensor): Tensor {
    const h = this.cv1.forward(x);
    const y = this.cv2.forward(h);
    h.dispose();
    if (!this.add) return y;
    const r = F.add(x, y);
    y.dispose();
    return r;
  }
}

const bcase = (dtype: 'f32' | 'bf16' | 'f16', N: number, c: number, H: number, W: number, shortcut: boolean, e = 1) => ({ dtype, dims: { N, C: c, H, W }, init: [c, c, shortcut, 1, [3, 3], e] });

export const yolov10BottleneckTask = defineTask(
  {
    id: 'L2/yolov10_bottleneck',
    level: 2,
    className: 'YOLOBottleneck',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.Bottleneck',
    description: 'Two 3x3 Conv blocks with a residual add: the repeated unit inside C2f.',
    init: [
      { name: 'c1', type: 'int' },
      { name: 'c2', type: 'int' },
      { name: 'shortcut', type: 'bool', optional: true, default: true },
      { name: 'g', type: 'int', optional: true, default: 1 },
      { name: 'k', type: 'object', optional: true, default: [3, 3] },
      { name: 'e', type: 'float', optional: true, default: 0.5 },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    imports: ['L2/yolov10_conv'],
    cases: {
      ci: [{ name: 'shortcut-f32', ...bcase('f32', 2, 8, 6, 7, true) }, { name: 'plain-e0.5-f32', ...bcase('f32', 1, 8, 5, 5, false, 0.5) }, { name: 'shortcut-bf16', ...bcase('bf16', 1, 16, 6, 6, true) }],
      // C2f's bottlenecks: Bottleneck(c, c, shortcut, k=(3, 3), e=1.0) with c = c2 / 2 of its C2f.
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof bcase>> = {};
        for (const l of layers) if (l.spec.module === 'C2f') out[`L${l.spec.index}`] = bcase('f16', B, (l.spec.c2 / 2) | 0, l.h, l.w, Boolean(l.spec.args[3]));
        return out;
      }),
    },
  },
  {
    baseline: YOLOBottleneck,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => [refBottleneck(x!, P, '', c.init[1] as number, (c.init[2] as boolean | undefined) ?? true)],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      const c_ = Math.trunc(C! * ((c.init[5] as number | undefined) ?? 0.5));
      return { bytes: itemsizeOf(c.dtype) * (3 * N! * C! * H! * W! + 9 * C! * c_ * 2), flops: 2 * N! * H! * W! * 9 * 2 * C! * c_ };
    },
  },
);
