import { F, Module, defineTask, withContext, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { SiLU } from '../../../layers/activation.js';
import { Conv2d } from '../../../layers/conv.js';
import { runsOwnForward } from '../../../common/fusion.js';
import { createLayer } from '../../../layers/registry.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refRepVGGDW } from '../reference.js';
import { YOLOConv } from './yolov10_conv.js';

/**
 * ultralytics.nn.modules.block.RepVGGDW(ed): SiLU(dw 7x7 Conv(x) + dw 3x3 Conv(x)), both without activation. fuse()
 * re-parameterises as ultralytics does: each branch's BatchNorm folded, the 3x3 kernel zero-padded to 7x7 and added
 * into the 7x7 one, so forward runs one depthwise conv (forward_fuse).
 */
export class YOLORepVGGDW extends Module {
  readonly conv: YOLOConv;
  conv1: YOLOConv | null;
  readonly act: SiLU;
  constructor(readonly ed: number) {
    super();
    this.conv = this.createModule('conv', 'L2/yolov10_conv', ed, ed, 7, 1, 3, ed, 1, false);
    this.conv1 = this.createModule<YOLOConv>('conv1', 'L2/yolov10_conv', ed, ed, 3, 1, 1, ed, 1, false);
    this.act = this.registerModule('act', createLayer('SiLU'));
  }

  forward(x: Tensor): Tensor {
    // fused: one depthwise conv with the SiLU in the same op (conv2d_act), while the conv block, its conv and the SiLU
    // are our own modules (a candidate or a capture's wrapped module runs as it is)
    if (!this.conv1) {
      if (runsOwnForward(this.conv, YOLOConv) && runsOwnForward(this.conv.conv, Conv2d) && runsOwnForward(this.act, SiLU)) return this.conv.convSilu(x);
      const y = this.conv.forward(x);
      const a = this.act.forward(y);
      y.dispose();
      return a;
    }
    const a = this.conv.forward(x);
    const b = this.conv1.forward(x);
    const s = F.add(a, b);
    a.dispose();
    b.dispose();
    const y = this.act.forward(s);
    s.dispose();
    return y;
  }

  /** Merge the 3x3 branch into the 7x7 one (idempotent). */
  fuse(): void {
    const conv1 = this.conv1;
    if (!conv1) return;
    this.conv.fuse();
    conv1.fuse();
    const w7 = this.conv.conv.weight;
    const w3 = F.pad(conv1.conv.weight, [2, 2, 2, 2]);
    const w = F.add(w7, w3);
    const b = F.add(this.conv.conv.bias!, conv1.conv.bias!);
    w7.copy_(w);
    this.conv.conv.bias!.copy_(b);
    for (const t of [w3, w, b]) t.dispose();
    conv1.dispose();
    this.registerModule('conv1', withContext(this.ctx, () => createLayer('Identity')));
    this.conv1 = null;
  }
}

const rcase = (dtype: 'f32' | 'bf16' | 'f16', N: number, ed: number, H: number, W: number) => ({ dtype, dims: { N, C: ed, H, W }, init: [ed] });

export const yolov10RepvggdwTask = defineTask(
  {
    id: 'L2/yolov10_repvggdw',
    level: 2,
    className: 'YOLORepVGGDW',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.RepVGGDW',
    description: 'Re-parameterisable large-kernel depthwise block: SiLU of a 7x7 and a 3x3 depthwise Conv+BN summed (one 7x7 conv after fuse()).',
    init: [{ name: 'ed', type: 'int' }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    imports: ['L2/yolov10_conv', 'L1/silu'],
    cases: {
      ci: [{ name: 'small-f32', ...rcase('f32', 2, 8, 9, 8) }, { name: 'small-bf16', ...rcase('bf16', 1, 16, 6, 6) }],
      // C2fCIB(lk=True) at P5: its CIB(c, c, e=1) with c = c2 / 2 holds RepVGGDW(2c) = RepVGGDW(c2) (20 x 20 at 640).
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof rcase>> = {};
        for (const l of layers) if (l.spec.module === 'C2fCIB' && l.spec.args[4]) out[`L${l.spec.index}`] = rcase('f16', B, l.spec.c2, l.h, l.w);
        return out;
      }),
    },
  },
  {
    baseline: YOLORepVGGDW,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P) => [refRepVGGDW(x!, P, '')],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      return { bytes: itemsizeOf(c.dtype) * (2 * N! * C! * H! * W! + 58 * C!), flops: 2 * N! * C! * H! * W! * 58 };
    },
  },
);
