import { F, Module, defineTask, withContext, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { SiLU } from '../../../layers/activation.js';
import { Conv2d } from '../../../layers/conv.js';
import { runsOwnForward } from '../../../common/fusion.js';
import type { BatchNorm2d } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import { convOut } from '../../../tasks/L1/conv/conv2d.js';
import { autopad, initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { foldBatchNorm } from '../fuse.js';
import { productionCases } from '../production.js';
import { BN_EPS, refConv } from '../reference.js';

/**
 * ultralytics.nn.modules.conv.Conv(c1, c2, k=1, s=1, p=None, g=1, d=1, act=True): a bias-free Conv2d with autopad,
 * BatchNorm2d (eps 1e-3, as ultralytics' initialize_weights sets) and SiLU (act=false: none). fuse() folds the
 * BatchNorm into the conv as ultralytics' fuse() does (the conv gets a bias, bn is dropped); forward then runs
 * act(conv(x)), ultralytics' forward_fuse, as one conv2d_act when act is SiLU.
 */
export class YOLOConv extends Module {
  conv: Conv2d;
  bn: BatchNorm2d | null;
  readonly act: SiLU | null;
  readonly padding: number;
  constructor(
    readonly c1: number,
    readonly c2: number,
    readonly k = 1,
    readonly s = 1,
    p: number | null = null,
    readonly g = 1,
    readonly d = 1,
    act = true,
  ) {
    super();
    this.padding = autopad(k, p, d);
    this.conv = this.registerModule('conv', createLayer('Conv2d', c1, c2, k, s, this.padding, d, g, false));
    this.bn = this.registerModule('bn', createLayer('BatchNorm2d', c2, BN_EPS, 0.03));
    this.act = act ? this.registerModule('act', createLayer('SiLU')) : null;
  }

  get fused(): boolean {
    return this.bn === null;
  }

  forward(x: Tensor): Tensor {
    if (this.fusesConvSilu()) return this.convSilu(x);
    let y = this.conv.forward(x);
    if (this.bn) {
      const z = this.bn.forward(y);
      y.dispose();
      y = z;
    }
    if (!this.act) return y;
    const a = this.act.forward(y);
    y.dispose();
    return a;
  }

  /**
   * SiLU(conv(x)) as one conv2d_act (one cuDNN conv -> bias -> SiLU graph where the backend has it: no separate SiLU
   * pass over the activation), whatever `act` says: RepVGGDW runs its fused act-less conv through it too. After fuse()
   * only (the BatchNorm sits between the conv and the SiLU before).
   */
  /**
   * Whether forward runs conv + SiLU as one conv2d_act: after fuse(), with SiLU, and only while the conv and the SiLU
   * are our own layers (runsOwnForward) — a candidate for either, or a capture's wrapped module, runs as it is.
   */
  fusesConvSilu(): boolean {
    return !this.bn && this.act !== null && runsOwnForward(this.conv, Conv2d) && runsOwnForward(this.act, SiLU);
  }

  convSilu(x: Tensor): Tensor {
    if (this.bn) throw new Error('YOLOConv.convSilu: call fuse() first (the BatchNorm sits between the conv and the SiLU)');
    const c = this.conv;
    return F.conv2dAct(x, c.weight, c.bias, { stride: c.stride, padding: c.padding, dilation: c.dilation, groups: c.groups, activation: 'silu' });
  }

  /** Fold bn into conv (idempotent): a conv with bias replaces both, the BatchNorm's tensors are released. */
  fuse(): void {
    const bn = this.bn;
    if (!bn) return;
    const folded = foldBatchNorm(this.conv.weight, this.conv.bias, { runningMean: bn.runningMean, runningVar: bn.runningVar, weight: bn.weight, bias: bn.bias, eps: bn.eps });
    const conv = withContext(this.ctx, () => createLayer('Conv2d', this.c1, this.c2, this.k, this.s, this.padding, this.d, this.g, true));
    conv.weight.copy_(folded.weight);
    conv.bias!.copy_(folded.bias);
    folded.weight.dispose();
    folded.bias.dispose();
    this.conv.dispose();
    bn.dispose();
    this.conv = this.registerModule('conv', conv);
    this.registerModule('bn', withContext(this.ctx, () => createLayer('Identity')));
    this.bn = null;
  }
}

/** A Conv case on [N, C1, H, W]: init (c1, c2, k, s, p, g, d, act) and the output size. */
export function convBlockCase(dtype: 'f32' | 'bf16' | 'f16', N: number, c1: number, c2: number, H: number, W: number, k: number, s: number, g = 1, act = true) {
  const p = autopad(k);
  return { dtype, dims: { N, C1: c1, C2: c2, H, W, Ho: convOut(H, k, s, p), Wo: convOut(W, k, s, p) }, init: [c1, c2, k, s, null, g, 1, act] };
}

const named = (name: string, c: ReturnType<typeof convBlockCase>) => ({ name, ...c });

export const yolov10ConvTask = defineTask(
  {
    id: 'L2/yolov10_conv',
    level: 2,
    className: 'YOLOConv',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.conv.Conv',
    description: 'Conv2d (bias-free, autopad, groups) + BatchNorm2d + SiLU: the building block of every YOLOv10 layer; fuse() folds the BatchNorm in.',
    init: [
      { name: 'c1', type: 'int' },
      { name: 'c2', type: 'int' },
      { name: 'k', type: 'int', optional: true, default: 1 },
      { name: 's', type: 'int', optional: true, default: 1 },
      { name: 'p', type: 'int', optional: true, default: null },
      { name: 'g', type: 'int', optional: true, default: 1 },
      { name: 'd', type: 'int', optional: true, default: 1 },
      { name: 'act', type: 'bool', optional: true, default: true },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C1', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C2', 'Ho', 'Wo'] }],
    imports: ['L1/conv2d', 'L1/batch_norm2d', 'L1/silu'],
    cases: {
      ci: [
        named('3x3-s2-f32', convBlockCase('f32', 2, 6, 8, 9, 10, 3, 2)),
        named('dw3x3-noact-f32', convBlockCase('f32', 1, 8, 8, 7, 7, 3, 1, 8, false)),
        named('1x1-bf16', convBlockCase('bf16', 2, 16, 12, 5, 6, 1, 1)),
      ],
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof convBlockCase>> = {};
        for (const l of layers) if (l.spec.module === 'Conv') out[`L${l.spec.index}`] = convBlockCase('f16', B, l.c1, l.spec.c2, l.h, l.w, l.spec.args[2] as number, l.spec.args[3] as number);
        return out;
      }),
    },
  },
  {
    baseline: YOLOConv,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C1!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => [refConv(x!, P, '', c.init[2] as number, c.init[3] as number, (c.init[5] as number | undefined) ?? 1, (c.init[7] as boolean | undefined) ?? true)],
    work: (c) => {
      const { N, C1, C2, H, W, Ho, Wo } = c.dims as Record<string, number>;
      const [k, g] = [c.init[2] as number, (c.init[5] as number | undefined) ?? 1];
      const it = itemsizeOf(c.dtype);
      return { bytes: it * (N! * C1! * H! * W! + (C2! * C1! * k * k) / g + N! * C2! * Ho! * Wo!), flops: (2 * N! * C2! * Ho! * Wo! * C1! * k * k) / g + 8 * N! * C2! * Ho! * Wo! };
    },
  },
);
