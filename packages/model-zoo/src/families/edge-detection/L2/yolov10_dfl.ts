import { F, Module, Tensor, defineTask } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import type { Conv2d } from '../../../layers/conv.js';
import { createLayer } from '../../../layers/registry.js';
import { itemsizeOf } from '../cases.js';
import { FAMILY } from '../family.js';
import { productionCases } from '../production.js';
import { refDFL } from '../reference.js';

/**
 * ultralytics.nn.modules.block.DFL(c1=16), distribution focal loss integral: each box side's c1 logits softmaxed and
 * projected on arange(c1) by a fixed bias-free 1x1 Conv2d(c1, 1). forward(x [B, 4 * c1, A]) -> [B, 4, A] distances in
 * stride units. The projection is set at construction (ultralytics never trains it; its checkpoints hold arange).
 */
export class YOLODFL extends Module {
  readonly conv: Conv2d;
  constructor(readonly c1 = 16) {
    super();
    this.conv = this.registerModule('conv', createLayer('Conv2d', c1, 1, 1, 1, 0, 1, 1, false));
    if (this.ctx.backend.name === 'meta') return; // a tree built to enumerate parameters holds no values
    const w = Tensor.fromArray(this.ctx.backend, Array.from({ length: c1 }, (_, i) => i), [1, c1, 1, 1], this.conv.weight.dtype, { device: this.ctx.device });
    this.conv.weight.copy_(w);
    w.dispose();
  }

  forward(x: Tensor): Tensor {
    const [b, , a] = x.shape as [number, number, number];
    const v = x.reshape(b, 4, this.c1, a);
    const t = v.transpose(2, 1); // [b, c1, 4, a]
    const p = F.softmax(t, { dim: 1 });
    v.dispose();
    t.dispose();
    const y = this.conv.forward(p); // [b, 1, 4, a]
    p.dispose();
    const out = y.view(b, 4, a);
    y.dispose();
    return out;
  }
}

const dcase = (dtype: 'f32' | 'bf16' | 'f16', B: number, A: number, c1 = 16) => ({ dtype, dims: { B, A, R: 4 * c1 }, init: [c1] });

export const yolov10DflTask = defineTask(
  {
    id: 'L2/yolov10_dfl',
    level: 2,
    className: 'YOLODFL',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.block.DFL',
    description: "Distribution focal loss integral: per box side, softmax over 16 bins then the expected bin (a fixed 1x1 conv on arange), the head's box decode.",
    init: [{ name: 'c1', type: 'int', optional: true, default: 16 }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['B', 'R', 'A'], doc: 'box logits, 4 sides x c1 bins per anchor' }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 4, 'A'] }],
    imports: ['L1/conv2d'],
    cases: {
      ci: [{ name: 'small-f32', ...dcase('f32', 2, 84) }, { name: 'small-bf16', ...dcase('bf16', 1, 84) }, { name: 'c1-8-f32', ...dcase('f32', 1, 21, 8) }],
      // 640 x 640: 80^2 + 40^2 + 20^2 = 8400 anchors.
      production: productionCases((layers, B) => {
        const A = layers.filter((l) => [16, 19, 22].includes(l.spec.index)).reduce((s, l) => s + l.ho * l.wo, 0);
        return { head: dcase('f16', B, A) };
      }),
    },
  },
  {
    baseline: YOLODFL,
    initParameters: () => {}, // the arange projection is part of the module
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.R!, c.dims.A!], c.dtype, 2)],
    reference: ([x], _P, c) => [refDFL(x!, (c.init[0] as number | undefined) ?? 16)],
    work: (c) => {
      const { B, A, R } = c.dims as Record<string, number>;
      return { bytes: itemsizeOf(c.dtype) * B! * A! * (R! + 4), flops: 5 * B! * A! * R! };
    },
  },
);
