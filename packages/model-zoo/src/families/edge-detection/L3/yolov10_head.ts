import { F, Module, Tensor, defineTask } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import type { Sigmoid } from '../../../layers/activation.js';
import type { Conv2d } from '../../../layers/conv.js';
import { createLayer } from '../../../layers/registry.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import type { YOLOv10Config } from '../config.js';
import { FAMILY } from '../family.js';
import { graphCases } from '../graph-cases.js';
import { DETECT_STRIDES, yolov10Layers } from '../graph.js';
import type { YOLOConv } from '../L2/yolov10_conv.js';
import type { YOLODFL } from '../L2/yolov10_dfl.js';
import { headMacs } from '../production.js';
import { refHead } from '../reference.js';
import { v10Postprocess, type Detections } from './postprocess.js';

type Step = Module & { forward(x: Tensor): Tensor };

/**
 * ultralytics.nn.modules.head.v10Detect(nc=80, ch=()) at inference, its one-to-one branch (what end-to-end
 * prediction runs; the one-to-many cv2 / cv3 only train, and ultralytics' fuse() drops them): per level i,
 * one2one_cv2[i] = Conv 3x3 (to c2 = max(16, ch[0] / 4, 64)), Conv 3x3, Conv2d 1x1 to 4 x reg_max box logits, and the
 * light one2one_cv3[i] = (Conv dw3x3, Conv 1x1 to c3 = max(ch[0], min(nc, 100))), (Conv dw3x3, Conv 1x1), Conv2d 1x1
 * to nc. forward(p3, p4, p5) -> [B, 4 + nc, A] as _inference gives: DFL distances around the anchor centres decoded
 * to x1y1x2y2 times the level's stride, and sigmoid class scores. postprocess() is the NMS-free top-k.
 */
export class YOLOv10DetectHead extends Module {
  readonly regMax = 16;
  readonly nl: number;
  readonly no: number;
  readonly boxBranches: Step[][];
  readonly clsBranches: Step[][];
  readonly dfl: YOLODFL;
  readonly sigmoid: Sigmoid;
  private readonly anchorCache = new Map<string, { anchors: Tensor; strides: Tensor }>();
  constructor(
    readonly nc: number,
    readonly ch: readonly number[],
    readonly stride: readonly number[] = DETECT_STRIDES,
  ) {
    super();
    this.nl = ch.length;
    this.no = nc + this.regMax * 4;
    if (stride.length !== this.nl) throw new RangeError(`YOLOv10DetectHead: ${this.nl} levels but ${stride.length} strides`);
    const c2 = Math.max(16, Math.floor(ch[0]! / 4), this.regMax * 4);
    const c3 = Math.max(ch[0]!, Math.min(nc, 100));
    const conv = (name: string, ...a: unknown[]) => this.createModule<YOLOConv>(name, 'L2/yolov10_conv', ...a);
    const plain = (name: string, cin: number, cout: number) => this.registerModule(name, createLayer('Conv2d', cin, cout, 1)) as Conv2d;
    this.boxBranches = ch.map((x, i) => [conv(`one2one_cv2.${i}.0`, x, c2, 3), conv(`one2one_cv2.${i}.1`, c2, c2, 3), plain(`one2one_cv2.${i}.2`, c2, 4 * this.regMax)]);
    this.clsBranches = ch.map((x, i) => [
      conv(`one2one_cv3.${i}.0.0`, x, x, 3, 1, null, x),
      conv(`one2one_cv3.${i}.0.1`, x, c3, 1),
      conv(`one2one_cv3.${i}.1.0`, c3, c3, 3, 1, null, c3),
      conv(`one2one_cv3.${i}.1.1`, c3, c3, 1),
      plain(`one2one_cv3.${i}.2`, c3, nc),
    ]);
    this.dfl = this.createModule('dfl', 'L2/yolov10_dfl', this.regMax);
    this.sigmoid = this.registerModule('sigmoid', createLayer('Sigmoid'));
  }

  forward(p3: Tensor, p4: Tensor, p5: Tensor): Tensor {
    const feats = [p3, p4, p5].slice(0, this.nl);
    const run = (steps: Step[], x: Tensor) => steps.reduce((h, m) => {
      const y = m.forward(h);
      if (h !== x) h.dispose();
      return y;
    }, x);
    const flat = (t: Tensor) => {
      const v = t.view(t.shape[0]!, t.shape[1]!, -1);
      t.dispose();
      return v;
    };
    const boxes = feats.map((x, i) => flat(run(this.boxBranches[i]!, x)));
    const logits = feats.map((x, i) => flat(run(this.clsBranches[i]!, x)));
    const boxCat = F.cat(boxes, 2); // [B, 4 * reg_max, A]
    const clsCat = F.cat(logits, 2); // [B, nc, A]
    for (const t of [...boxes, ...logits]) t.dispose();
    const dist = this.dfl.forward(boxCat); // [B, 4, A]
    boxCat.dispose();
    const { anchors, strides } = this.anchorsFor(feats);
    const [lt, rb] = F.split(dist, 2, 1) as [Tensor, Tensor];
    const x1y1 = F.sub(anchors, lt);
    const x2y2 = F.add(anchors, rb);
    for (const t of [dist, lt, rb]) t.dispose();
    const xyxy = F.cat([x1y1, x2y2], 1);
    x1y1.dispose();
    x2y2.dispose();
    const dbox = F.mul(xyxy, strides);
    xyxy.dispose();
    const scores = this.sigmoid.forward(clsCat);
    clsCat.dispose();
    const out = F.cat([dbox, scores], 1);
    dbox.dispose();
    scores.dispose();
    return out;
  }

  /** The NMS-free top-k of forward's output: max_det boxes, scores and class ids per image. */
  postprocess(preds: Tensor, maxDet = 300): Detections {
    return v10Postprocess(preds, this.nc, maxDet);
  }

  /** ultralytics make_anchors(feats, stride, 0.5): cell centres [2, A] and each anchor's stride [1, A], cached by map sizes. */
  private anchorsFor(feats: readonly Tensor[]): { anchors: Tensor; strides: Tensor } {
    const key = `${feats.map((f) => `${f.shape[2]}x${f.shape[3]}`).join(',')}:${feats[0]!.dtype}`;
    let hit = this.anchorCache.get(key);
    if (!hit) {
      const xs: number[] = [];
      const ys: number[] = [];
      const ss: number[] = [];
      feats.forEach((f, i) => {
        const [h, w] = [f.shape[2]!, f.shape[3]!];
        for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) xs.push(x + 0.5), ys.push(y + 0.5), ss.push(this.stride[i]!);
      });
      const opts = { device: this.ctx.device };
      hit = { anchors: Tensor.fromArray(this.ctx.backend, [...xs, ...ys], [2, xs.length], feats[0]!.dtype, opts), strides: Tensor.fromArray(this.ctx.backend, ss, [1, ss.length], feats[0]!.dtype, opts) };
      this.anchorCache.set(key, hit);
    }
    return hit;
  }

  override dispose(): void {
    for (const { anchors, strides } of this.anchorCache.values()) anchors.dispose(), strides.dispose();
    this.anchorCache.clear();
    super.dispose();
  }
}

/** The head's channels in a graph: the neck outputs 16, 19, 22. */
export const headChannels = (cfg: YOLOv10Config): number[] => {
  const l = yolov10Layers(cfg);
  return [16, 19, 22].map((i) => l[i]!.c2);
};

const headCase = (c: (typeof graphCases.ci)[number]) => ({ ...c, init: [(c.init[0] as YOLOv10Config).nc, headChannels(c.init[0] as YOLOv10Config)] });

export const yolov10HeadTask = defineTask(
  {
    id: 'L3/yolov10_head',
    level: 3,
    className: 'YOLOv10DetectHead',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.modules.head.v10Detect',
    description: "YOLOv10's one-to-one detection head: box (DFL) and light class branches per level, anchor decode to x1y1x2y2 pixels and sigmoid scores [B, 4 + nc, A]; postprocess() is the NMS-free top-k.",
    init: [
      { name: 'nc', type: 'int' },
      { name: 'ch', type: 'object', doc: 'input channels per level (P3, P4, P5)' },
      { name: 'stride', type: 'object', optional: true, default: [...DETECT_STRIDES] },
    ],
    inputs: [
      { name: 'p3', dtype: 'act', shape: ['B', 'D3', 'H3', 'W3'] },
      { name: 'p4', dtype: 'act', shape: ['B', 'D4', 'H4', 'W4'] },
      { name: 'p5', dtype: 'act', shape: ['B', 'D5', 'H5', 'W5'] },
    ],
    outputs: [{ name: 'preds', dtype: 'act', shape: ['B', 'NO', 'A'], doc: 'x1 y1 x2 y2 (pixels) then nc sigmoid scores per anchor' }],
    imports: ['L2/yolov10_conv', 'L2/yolov10_dfl', 'L1/conv2d', 'L1/sigmoid'],
    // Box corners are pixel coordinates (hundreds at 640): bf16's 8 bits leave about 1 px.
    tolerance: { bf16: { atol: 0.5, rtol: 0.02 } },
    cases: { ci: graphCases.ci.map(headCase), production: graphCases.production.map(headCase) },
  },
  {
    baseline: YOLOv10DetectHead,
    makeInputs: (c, ctx, rng) => (['3', '4', '5'] as const).map((k) => randn(ctx, rng, [c.dims.B!, c.dims[`D${k}`]!, c.dims[`H${k}`]!, c.dims[`W${k}`]!], c.dtype)),
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: (xs, P, c) => [refHead(xs.map((x) => x!), P, c.init[0] as number)],
    work: (c) => {
      const d = c.dims as Record<string, number>;
      const inputs = (['3', '4', '5'] as const).reduce((s, k) => s + d.B! * d[`D${k}`]! * d[`H${k}`]! * d[`W${k}`]!, 0);
      return { bytes: itemsizeOf(c.dtype) * (inputs + d.B! * d.NO! * d.A! * 3), flops: 2 * d.B! * headMacs([d.D3!, d.D4!, d.D5!], [d.H3! * d.W3!, d.H4! * d.W4!, d.H5! * d.W5!], d.NC!) };
    },
  },
);
