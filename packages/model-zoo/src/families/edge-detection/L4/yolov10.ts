import { Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import type { ImagePreprocess, VisionModel } from '../../../engine/vision-model.js';
import { calibrateBatchNorm } from '../calibrate.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import type { YOLOv10Config } from '../config.js';
import { FAMILY } from '../family.js';
import { graphCases, graphFlops } from '../graph-cases.js';
import { DETECT_STRIDES, yolov10Layers } from '../graph.js';
import type { Detections } from '../L3/postprocess.js';
import type { YOLOv10Backbone } from '../L3/yolov10_backbone.js';
import type { YOLOv10DetectHead } from '../L3/yolov10_head.js';
import type { YOLOv10Neck } from '../L3/yolov10_neck.js';
import { headMacs } from '../production.js';
import { refYOLOv10 } from '../reference.js';

type Fusable = Module & { fuse(): void };
const fusable = (m: Module): m is Fusable => typeof (m as Partial<Fusable>).fuse === 'function';

/**
 * ultralytics' DetectionModel of yolov10{n,s,m}.yaml at inference (fused, end to end): backbone (layers 0-10), neck (11-22) and the
 * one-to-one v10Detect head (23). forward(images [B, 3, S, S]) -> [B, 4 + nc, A] (boxes in pixels, sigmoid scores);
 * detect() adds the NMS-free top-k; fuse() folds every Conv's BatchNorm and re-parameterises RepVGGDW, as
 * DetectionModel.fuse() does before prediction. Checkpoint names are ultralytics' model.<i>.* (weights.ts maps the
 * backbone / neck / head grouping onto them).
 */
export class YOLOv10ForObjectDetection extends Module implements VisionModel {
  readonly backbone: YOLOv10Backbone;
  readonly neck: YOLOv10Neck;
  readonly head: YOLOv10DetectHead;
  readonly imageSize: number;
  /** ultralytics' predictor: LetterBox(auto=False) with 114 gray borders, pixels / 255. */
  readonly preprocess: ImagePreprocess = { kind: 'letterbox', fill: 114 };
  /** Class names (config.json's names), null when it has none. */
  readonly labels: readonly string[] | null;
  constructor(readonly config: YOLOv10Config) {
    super();
    this.imageSize = config.imgsz;
    this.labels = config.names;
    const layers = yolov10Layers(config);
    this.backbone = this.createModule('backbone', 'L3/yolov10_backbone', config);
    this.neck = this.createModule('neck', 'L3/yolov10_neck', config);
    this.head = this.createModule('head', 'L3/yolov10_head', config.nc, layers[23]!.args[1], [...DETECT_STRIDES]);
  }

  forward(images: Tensor): Tensor {
    const [p3, p4, p5] = this.backbone.forward(images);
    const [n3, n4, n5] = this.neck.forward(p3, p4, p5);
    for (const t of [p3, p4, p5]) t.dispose();
    const preds = this.head.forward(n3, n4, n5);
    for (const t of [n3, n4, n5]) t.dispose();
    return preds;
  }

  /** forward, then the NMS-free top-k (config max_det). */
  detect(images: Tensor): Detections {
    const preds = this.forward(images);
    try {
      return this.head.postprocess(preds, this.config.maxDet);
    } finally {
      preds.dispose();
    }
  }

  /** Random weights: every BatchNorm's running statistics from a forward over seeded noise images (calibrate.ts). */
  calibrate(seed: number): number {
    return calibrateBatchNorm(this, this.ctx, seed);
  }

  /**
   * ultralytics DetectionModel.fuse(): every module with a fuse() (Conv: BN folded; RepVGGDW: branches merged), parents
   * first, over the tree as it was before fusing (fuse is idempotent, so a child a parent already fused is a no-op).
   */
  fuse(): void {
    for (const [, m] of this.namedModules()) if (m !== this && fusable(m)) m.fuse();
  }
}

export const yolov10Task = defineTask(
  {
    id: 'L4/yolov10',
    level: 4,
    className: 'YOLOv10ForObjectDetection',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.tasks.DetectionModel',
    description: 'YOLOv10 end to end (backbone, PAN neck, one-to-one v10Detect head): images to decoded boxes and class scores [B, 4 + nc, A]; detect() adds the NMS-free top-k.',
    init: [{ name: 'config', type: 'object', doc: 'YOLOv10Config (config.json: scale, nc, multiples, max_det, imgsz)' }],
    inputs: [{ name: 'images', dtype: 'act', shape: ['B', 3, 'S', 'S'] }],
    outputs: [{ name: 'preds', dtype: 'act', shape: ['B', 'NO', 'A'] }],
    imports: ['L3/yolov10_backbone', 'L3/yolov10_neck', 'L3/yolov10_head'],
    tolerance: { bf16: { atol: 1, rtol: 0.05 } },
    cases: graphCases,
  },
  {
    baseline: YOLOv10ForObjectDetection,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, 3, c.dims.S!, c.dims.S!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => {
      const cfg = c.init[0] as YOLOv10Config;
      // the tree's names (backbone.<i>, neck.<i>, head.*) as the checkpoint's (model.<i>, model.23.*)
      const byCheckpointName = new Map([...P].map(([k, v]) => [k.replace(/^(backbone|neck)\./, 'model.').replace(/^head\./, 'model.23.'), v] as const));
      return [refYOLOv10(yolov10Layers(cfg), x!, byCheckpointName, cfg.nc)];
    },
    work: (c) => {
      const d = c.dims as Record<string, number>;
      const cfg = c.init[0] as YOLOv10Config;
      const flops = graphFlops(cfg, d.S!, d.B!, 0, 22) + 2 * d.B! * headMacs([d.D3!, d.D4!, d.D5!], [d.H3! * d.W3!, d.H4! * d.W4!, d.H5! * d.W5!], d.NC!);
      return { bytes: itemsizeOf(c.dtype) * d.B! * (3 * d.S! * d.S! + d.NO! * d.A!) * 4, flops };
    },
  },
);
