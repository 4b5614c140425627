import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refPSA } from '../reference.js';
import type { YOLOAttention } from './yolov10_attention.js';
import type { YOLOConv } from './yolov10_conv.js';

/**
 * ultralytics.nn.modules.block.PSA(c1, c2, e=0.5), partial self-attention: cv1 (1x1 to 2c, c = c1 * e) split into
 * (a, b); b += Attention(c, num_heads=c // 64, attn_ratio=0.5)(b); b += ffn(b) with ffn = Conv 1x1 to 2c, Conv 1x1
 * back (no act); cv2 (1x1) of cat(a, b). c1 must equal c2.
 */
export class YOLOPSA extends Module {
  readonly c: number;
  readonly cv1: YOLOConv;
  readonly cv2: YOLOConv;
  readonly attn: YOLOAttention;
  readonly ffn: [YOLOConv, YOLOConv];
  constructor(
    readonly c1: number,
    readonly c2: number,
    e = 0.5,
  ) {
    super();
    if (c1 !== c2) throw new RangeError(`YOLOPSA: c1 (${c1}) must equal c2 (${c2})`);
    this.c = Math.trunc(c1 * e);
    this.cv1 = this.createModule('cv1', 'L2/yolov10_conv', c1, 2 * this.c, 1, 1);
    this.cv2 = this.createModule('cv2', 'L2/yolov10_conv', 2 * this.c, c1, 1);
    this.attn = this.createModule('attn', 'L2/yolov10_attention', this.c, Math.floor(this.c / 64), 0.5);
    this.ffn = [this.createModule('ffn.0', 'L2/yolov10_conv', this.c, this.c * 2, 1), this.createModule('ffn.1', 'L2/yolov10_conv', this.c * 2, this.c, 1, 1, null, 1, 1, false)];
  }

  forward(x: Tensor): Tensor {
    const y = this.cv1.forward(x);
    const [a, b0] = F.split(y, [this.c, this.c], 1) as [Tensor, Tensor];
    y.dispose();
    const att = this.attn.forward(b0);
    const b1 = F.add(b0, att);
    b0.dispose();
    att.dispose();
    const h = this.ffn[0].forward(b1);
    const f = this.ffn[1].forward(h);
    h.dispose();
    const b2 = F.add(b1, f);
    b1.dispose();
    f.dispose();
    const cat = F.cat([a, b2], 1);
    a.dispose();
    b2.dispose();
    const out = this.cv2.forward(cat);
    cat.dispose();
    return out;
  }
}

const pcase = (dtype: 'f32' | 'bf16' | 'f16', N: number, c: number, H: number, W: number) => ({ dtype, dims: { N, C: c, H, W }, init: [c, c] });

export const yolov10PsaTask = defineTask(
  {
    id: 'L2/yolov10_psa',
    level: 2,
    className: 'YOLOPSA',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.PSA',
    description: "Partial self-attention: half the channels go through Attention and a 1x1 FFN with residuals, the other half pass; 1x1 Conv fuses them (YOLOv10's last backbone layer).",
    init: [{ name: 'c1', type: 'int' }, { name: 'c2', type: 'int' }, { name: 'e', type: 'float', optional: true, default: 0.5 }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    imports: ['L2/yolov10_conv', 'L2/yolov10_attention'],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    cases: {
      // num_heads = (c1 / 2) // 64: 128 channels is the smallest PSA with a head.
      ci: [{ name: 'one-head-f32', ...pcase('f32', 2, 128, 3, 4) }, { name: 'two-heads-f32', ...pcase('f32', 1, 256, 2, 2) }, { name: 'one-head-bf16', ...pcase('bf16', 1, 128, 3, 3) }],
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof pcase>> = {};
        for (const l of layers) if (l.spec.module === 'PSA') out[`L${l.spec.index}`] = pcase('f16', B, l.c1, l.h, l.w);
        return out;
      }),
    },
  },
  {
    baseline: YOLOPSA,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P) => [refPSA(x!, P, '')],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      const S = H! * W!;
      const h = C! / 2;
      const heads = Math.max(1, Math.floor(h / 64));
      const convs = 2 * N! * S * (C! * C! + 2 * h * h + h * 2 * h * 2 + 9 * h + C! * C!);
      return { bytes: itemsizeOf(c.dtype) * N! * (6 * C! * S + heads * S * S), flops: convs + 2 * N! * heads * S * S * (h / heads) * 1.5 };
    },
  },
);
