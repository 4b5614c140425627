import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refC2f } from '../reference.js';
import type { YOLOConv } from './yolov10_conv.js';

type Block = Module & { forward(x: Tensor): Tensor };

/**
 * C2f's dataflow, shared by C2f and C2fCIB: cv1 (1x1 to 2c), split in two chunks, each block applied to the last
 * chunk in turn, every chunk concatenated, cv2 (1x1 to c2).
 */
abstract class C2fBase extends Module {
  readonly c: number;
  readonly cv1: YOLOConv;
  readonly cv2: YOLOConv;
  readonly m: Block[] = [];
  constructor(c1: number, c2: number, n: number, e: number) {
    super();
    this.c = Math.trunc(c2 * e);
    this.cv1 = this.createModule('cv1', 'L2/yolov10_conv', c1, 2 * this.c, 1, 1);
    this.cv2 = this.createModule('cv2', 'L2/yolov10_conv', (2 + n) * this.c, c2, 1);
  }

  forward(x: Tensor): Tensor {
    const y0 = this.cv1.forward(x);
    const ys = F.chunk(y0, 2, 1);
    y0.dispose();
    for (const m of this.m) ys.push(m.forward(ys[ys.length - 1]!));
    const cat = F.cat(ys, 1);
    for (const t of ys) t.dispose();
    const out = this.cv2.forward(cat);
    cat.dispose();
    return out;
  }
}

/**
 * ultralytics.nn.modules.block.C2f(c1, c2, n=1, shortcut=False, g=1, e=0.5): the CSP block of two convolutions with
 * n Bottleneck(c, c, shortcut, g, k=(3, 3), e=1.0), c = c2 * e. The task's module.
 */
export class YOLOC2f extends C2fBase {
  constructor(c1: number, c2: number, n = 1, shortcut = false, g = 1, e = 0.5) {
    super(c1, c2, n, e);
    for (let i = 0; i < n; i++) this.m.push(this.createModule(`m.${i}`, 'L2/yolov10_bottleneck', this.c, this.c, shortcut, g, [3, 3], 1.0));
  }
}

/**
 * ultralytics.nn.modules.block.C2fCIB(c1, c2, n=1, shortcut=False, lk=False, g=1, e=0.5): C2f with its bottlenecks
 * replaced by CIB(c, c, shortcut, e=1.0, lk). The second class of the yolov10_c2f task (built with `new` by the
 * backbone and neck; its children resolve through the registry, so candidates apply inside it).
 */
export class YOLOC2fCIB extends C2fBase {
  constructor(c1: number, c2: number, n = 1, shortcut = false, lk = false, _g = 1, e = 0.5) {
    super(c1, c2, n, e);
    for (let i = 0; i < n; i++) this.m.push(this.createModule(`m.${i}`, 'L2/yolov10_cib', this.c, this.c, shortcut, 1.0, lk));
  }
}

const c2fCase = (dtype: 'f32' | 'bf16' | 'f16', N: number, c1: number, c2: number, H: number, W: number, n: number, shortcut: boolean) => ({ dtype, dims: { N, C1: c1, C2: c2, H, W }, init: [c1, c2, n, shortcut] });

export const yolov10C2fTask = defineTask(
  {
    id: 'L2/yolov10_c2f',
    level: 2,
    className: 'YOLOC2f',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.C2f',
    description: 'CSP bottleneck with two convolutions: 1x1 split into two halves, n bottlenecks chained on the second, all concatenated, 1x1 out (C2fCIB, the CIB variant, lives in the same file).',
    init: [
      { name: 'c1', type: 'int' },
      { name: 'c2', type: 'int' },
      { name: 'n', type: 'int', optional: true, default: 1 },
      { name: 'shortcut', type: 'bool', optional: true, default: false },
      { name: 'g', type: 'int', optional: true, default: 1 },
      { name: 'e', type: 'float', optional: true, default: 0.5 },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C1', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C2', 'H', 'W'] }],
    imports: ['L2/yolov10_conv', 'L2/yolov10_bottleneck', 'L2/yolov10_cib'],
    cases: {
      ci: [
        { name: 'n2-shortcut-f32', ...c2fCase('f32', 2, 8, 8, 6, 5, 2, true) },
        { name: 'n1-neck-f32', ...c2fCase('f32', 1, 24, 16, 4, 4, 1, false) },
        { name: 'n1-shortcut-bf16', ...c2fCase('bf16', 1, 16, 16, 4, 6, 1, true) },
      ],
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof c2fCase>> = {};
        for (const l of layers) if (l.spec.module === 'C2f') out[`L${l.spec.index}`] = c2fCase('f16', B, l.c1, l.spec.c2, l.h, l.w, l.spec.args[2] as number, Boolean(l.spec.args[3]));
        return out;
      }),
    },
  },
  {
    baseline: YOLOC2f,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C1!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => [refC2f(x!, P, '', c.init[1] as number, (c.init[2] as number | undefined) ?? 1, (c.init[3] as boolean | undefined) ?? false)],
    work: (c) => {
      const { N, C1, C2, H, W } = c.dims as Record<string, number>;
      const n = (c.init[2] as number | undefined) ?? 1;
      const h = C2! / 2;
      const perPixel = C1! * C2! + n * 2 * 9 * h * h + (2 + n) * h * C2!;
      return { bytes: itemsizeOf(c.dtype) * N! * H! * W! * (C1! + (4 + 2 * n) * h + C2!), flops: 2 * N! * H! * W! * perPixel };
    },
  },
);
