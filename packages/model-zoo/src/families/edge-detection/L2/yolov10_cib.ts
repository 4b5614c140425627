import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refCIB } from '../reference.js';

/**
 * ultralytics.nn.modules.block.CIB(c1, c2, shortcut=True, e=0.5, lk=False), the compact inverted block: cv1 is a
 * Sequential of Conv dw3x3(c1), Conv 1x1 to 2c_, RepVGGDW(2c_) when lk else Conv dw3x3(2c_), Conv 1x1 to c2,
 * Conv dw3x3(c2); plus the input when shortcut and c1 == c2.
 */
export class YOLOCIB extends Module {
  readonly cv1: Module[];
  readonly add: boolean;
  constructor(
    readonly c1: number,
    readonly c2: number,
    shortcut = true,
    e = 0.5,
    lk = false,
  ) {
    super();
    const c_ = Math.trunc(c2 * e);
    this.cv1 = [
      this.createModule('cv1.0', 'L2/yolov10_conv', c1, c1, 3, 1, null, c1),
      this.createModule('cv1.1', 'L2/yolov10_conv', c1, 2 * c_, 1),
      lk ? this.createModule('cv1.2', 'L2/yolov10_repvggdw', 2 * c_) : this.createModule('cv1.2', 'L2/yolov10_conv', 2 * c_, 2 * c_, 3, 1, null, 2 * c_),
      this.createModule('cv1.3', 'L2/yolov10_conv', 2 * c_, c2, 1),
      this.createModule('cv1.4', 'L2/yolov10_conv', c2, c2, 3, 1, null, c2),
    ];
    this.add = shortcut && c1 === c2;
  }

  forward(x: Tensor): Tensor {
    let y = x;
    for (const m of this.cv1) {
      const next = (m as unknown as { forward(t: Tensor): Tensor }).forward(y);
      if (y !== x) y.dispose();
      y = next;
    }
    if (!this.add) return y;
    const r = F.add(x, y);
    y.dispose();
    return r;
  }
}

const ccase = (dtype: 'f32' | 'bf16' | 'f16', N: number, c: number, H: number, W: number, shortcut: boolean, e: number, lk: boolean) => ({ dtype, dims: { N, C: c, H, W }, init: [c, c, shortcut, e, lk] });

export const yolov10CibTask = defineTask(
  {
    id: 'L2/yolov10_cib',
    level: 2,
    className: 'YOLOCIB',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.CIB',
    description: 'Compact inverted block: depthwise 3x3, pointwise expand, depthwise 3x3 (or RepVGGDW 7x7 with lk), pointwise, depthwise 3x3, residual.',
    init: [
      { name: 'c1', type: 'int' },
      { name: 'c2', type: 'int' },
      { name: 'shortcut', type: 'bool', optional: true, default: true },
      { name: 'e', type: 'float', optional: true, default: 0.5 },
      { name: 'lk', type: 'bool', optional: true, default: false },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    imports: ['L2/yolov10_conv', 'L2/yolov10_repvggdw'],
    cases: {
      ci: [
        { name: 'lk-f32', ...ccase('f32', 2, 8, 6, 6, true, 1, true) },
        { name: 'dw3x3-e0.5-f32', ...ccase('f32', 1, 12, 5, 7, true, 0.5, false) },
        { name: 'lk-bf16', ...ccase('bf16', 1, 16, 4, 4, true, 1, true) },
      ],
      // C2fCIB's CIB(c, c, shortcut, e=1.0, lk) with c = c2 / 2.
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof ccase>> = {};
        for (const l of layers) if (l.spec.module === 'C2fCIB') out[`L${l.spec.index}`] = ccase('f16', B, l.spec.c2 / 2, l.h, l.w, Boolean(l.spec.args[3]), 1, Boolean(l.spec.args[4]));
        return out;
      }),
    },
  },
  {
    baseline: YOLOCIB,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => [refCIB(x!, P, '', c.init[1] as number, (c.init[2] as boolean | undefined) ?? true, (c.init[3] as number | undefined) ?? 0.5, (c.init[4] as boolean | undefined) ?? false)],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      const c_ = Math.trunc(C! * ((c.init[3] as number | undefined) ?? 0.5));
      const perPixel = 9 * C! + 2 * C! * 2 * c_ + (c.init[4] ? 58 : 9) * 2 * c_ + 9 * C!;
      return { bytes: itemsizeOf(c.dtype) * (6 * N! * C! * H! * W!), flops: 2 * N! * H! * W! * perPixel };
    },
  },
);
