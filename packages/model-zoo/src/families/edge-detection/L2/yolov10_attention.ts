import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refAttention } from '../reference.js';
import type { YOLOConv } from './yolov10_conv.js';

/**
 * ultralytics.nn.modules.block.Attention(dim, num_heads=8, attn_ratio=0.5): multi-head self-attention over the H * W
 * positions of a map. A 1x1 Conv (no act) gives per head [q (key_dim), k (key_dim), v (head_dim)] channels; softmax(q^T
 * k * key_dim^-0.5) over keys; out = v attn^T as [B, C, H, W] plus pe(v) (a depthwise 3x3 Conv); proj (1x1 Conv).
 */
export class YOLOAttention extends Module {
  readonly headDim: number;
  readonly keyDim: number;
  readonly scale: number;
  readonly qkv: YOLOConv;
  readonly proj: YOLOConv;
  readonly pe: YOLOConv;
  constructor(
    readonly dim: number,
    readonly numHeads = 8,
    attnRatio = 0.5,
  ) {
    super();
    if (!Number.isInteger(numHeads) || numHeads < 1) throw new RangeError(`YOLOAttention: num_heads must be >= 1, got ${numHeads} (PSA uses c // 64: give it at least 128 channels)`);
    this.headDim = Math.floor(dim / numHeads);
    this.keyDim = Math.trunc(this.headDim * attnRatio);
    this.scale = this.keyDim ** -0.5;
    const h = dim + this.keyDim * numHeads * 2;
    this.qkv = this.createModule('qkv', 'L2/yolov10_conv', dim, h, 1, 1, null, 1, 1, false);
    this.proj = this.createModule('proj', 'L2/yolov10_conv', dim, dim, 1, 1, null, 1, 1, false);
    this.pe = this.createModule('pe', 'L2/yolov10_conv', dim, dim, 3, 1, null, dim, 1, false);
  }

  forward(x: Tensor): Tensor {
    const [B, C, H, W] = x.shape as [number, number, number, number];
    const N = H * W;
    const qkv = this.qkv.forward(x);
    const heads = qkv.view(B, this.numHeads, this.keyDim * 2 + this.headDim, N);
    qkv.dispose();
    const [q, k, v] = F.split(heads, [this.keyDim, this.keyDim, this.headDim], 2) as [Tensor, Tensor, Tensor];
    heads.dispose();
    const qt = q.transpose(-2, -1);
    const logits = F.matmul(qt, k); // [B, heads, N, N]
    for (const t of [q, k, qt]) t.dispose();
    const scaled = F.mul(logits, this.scale);
    logits.dispose();
    const attn = F.softmax(scaled, { dim: -1 });
    scaled.dispose();
    const at = attn.transpose(-2, -1);
    const o = F.matmul(v, at); // [B, heads, head_dim, N]
    attn.dispose();
    at.dispose();
    const vMap = v.reshape(B, C, H, W);
    v.dispose();
    const pe = this.pe.forward(vMap);
    vMap.dispose();
    const oMap = o.view(B, C, H, W);
    o.dispose();
    const sum = F.add(oMap, pe);
    oMap.dispose();
    pe.dispose();
    const y = this.proj.forward(sum);
    sum.dispose();
    return y;
  }
}

const acase = (dtype: 'f32' | 'bf16' | 'f16', N: number, dim: number, H: number, W: number, heads: number) => ({ dtype, dims: { N, C: dim, H, W }, init: [dim, heads, 0.5] });

export const yolov10AttentionTask = defineTask(
  {
    id: 'L2/yolov10_attention',
    level: 2,
    className: 'YOLOAttention',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.Attention',
    description: 'Spatial multi-head self-attention with 1x1 Conv qkv / proj and a depthwise 3x3 positional conv on v (inside PSA).',
    init: [{ name: 'dim', type: 'int' }, { name: 'numHeads', type: 'int', optional: true, default: 8 }, { name: 'attnRatio', type: 'float', optional: true, default: 0.5 }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    imports: ['L2/yolov10_conv', 'L1/softmax'],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    cases: {
      ci: [{ name: 'two-heads-f32', ...acase('f32', 2, 32, 4, 5, 2) }, { name: 'one-head-f32', ...acase('f32', 1, 64, 3, 3, 1) }, { name: 'two-heads-bf16', ...acase('bf16', 1, 32, 4, 4, 2) }],
      // PSA's Attention(c, num_heads = c // 64) with c = c1 / 2 at P5 (20 x 20 at 640).
      production: productionCases((layers, B) => {
        const out: Record<string, ReturnType<typeof acase>> = {};
        for (const l of layers) if (l.spec.module === 'PSA') out[`L${l.spec.index}`] = acase('f16', B, l.c1 / 2, l.h, l.w, Math.floor(l.c1 / 2 / 64));
        return out;
      }),
    },
  },
  {
    baseline: YOLOAttention,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C!, c.dims.H!, c.dims.W!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => [refAttention(x!, P, '', (c.init[1] as number | undefined) ?? 8, (c.init[2] as number | undefined) ?? 0.5)],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      const S = H! * W!;
      const heads = (c.init[1] as number | undefined) ?? 8;
      const kd = Math.trunc((C! / heads) * 0.5);
      const convs = 2 * N! * S * (C! * (C! + 2 * kd * heads) + C! * C! + 9 * C!);
      return { bytes: itemsizeOf(c.dtype) * N! * (4 * C! * S + heads * S * S), flops: convs + 2 * N! * heads * S * S * (kd + C! / heads) };
    },
  },
);
