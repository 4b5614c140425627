/**
 * Production shapes of the family's tasks, read off the real graphs: YOLOv10n at 640 x 640 with batch 1 and 32, and
 * YOLOv10s / YOLOv10m at batch 32 as the wider cases. Each task picks the layers it mirrors and says how a layer
 * becomes its case.
 */
import type { TaskCaseInput } from '@fastkernels/core';
import { YOLOV10M, YOLOV10N, YOLOV10S, type YOLOv10Config } from './config.js';
import { yolov10Layers, type LayerSpec } from './graph.js';

export interface LayerShape {
  readonly spec: LayerSpec;
  /** Input channels (the first input's) and spatial size. */
  readonly c1: number;
  readonly h: number;
  readonly w: number;
  /** Output size. */
  readonly ho: number;
  readonly wo: number;
}

/** Every layer's input / output sizes for square `imgsz` images. */
export function layerShapes(cfg: YOLOv10Config, imgsz = cfg.imgsz): LayerShape[] {
  const specs = yolov10Layers(cfg);
  const out: LayerShape[] = [];
  for (const spec of specs) {
    const src = spec.from[0]!;
    const prev = out[src];
    const [c1, h, w] = prev ? [specs[src]!.c2, prev.ho, prev.wo] : [3, imgsz, imgsz];
    const a = spec.args as number[];
    const stride = spec.module === 'Conv' || spec.module === 'SCDown' ? (a[3] ?? 1) : 1;
    const [ho, wo] = spec.module === 'Upsample' ? [h * 2, w * 2] : [Math.ceil(h / stride), Math.ceil(w / stride)];
    out.push({ spec, c1, h, w, ho, wo });
  }
  return out;
}

/** The scales and batches production runs: n at 1 and 32, s and m at 32. */
export const PRODUCTION_RUNS: readonly { readonly label: string; readonly cfg: YOLOv10Config; readonly batch: number }[] = [
  { label: 'yolov10n', cfg: YOLOV10N, batch: 1 },
  { label: 'yolov10n', cfg: YOLOV10N, batch: 32 },
  { label: 'yolov10s', cfg: YOLOV10S, batch: 32 },
  { label: 'yolov10m', cfg: YOLOV10M, batch: 32 },
];

/**
 * The production cases of a task: for each run, `pick` turns the graph's layers into cases (name suffix -> case
 * without its name); cases with the same name keep the first.
 */
export function productionCases(pick: (layers: LayerShape[], batch: number, cfg: YOLOv10Config) => Record<string, Omit<TaskCaseInput, 'name'>>): TaskCaseInput[] {
  const seen = new Map<string, TaskCaseInput>();
  for (const run of PRODUCTION_RUNS) {
    for (const [suffix, c] of Object.entries(pick(layerShapes(run.cfg), run.batch, run.cfg))) {
      const name = `${run.label}-${suffix}-bs${run.batch}`;
      if (!seen.has(name)) seen.set(name, { name, ...c });
    }
  }
  return [...seen.values()];
}

/** Multiply-accumulates of one image through a backbone / neck layer (convolutions and PSA's attention products). */
export function layerMacs(l: LayerShape): number {
  const a = l.spec.args as number[];
  const { c1 } = l;
  const c2 = l.spec.c2;
  const pix = l.ho * l.wo;
  switch (l.spec.module) {
    case 'Conv':
      return c1 * c2 * a[2]! * a[2]! * pix;
    case 'C2f': {
      const c = c2 / 2;
      return (c1 * 2 * c + a[2]! * 18 * c * c + (2 + a[2]!) * c * c2) * pix;
    }
    case 'C2fCIB': {
      const c = c2 / 2;
      const cib = 9 * c + 2 * c * c + (l.spec.args[4] ? 58 : 9) * 2 * c + 2 * c * c + 9 * c;
      return (c1 * 2 * c + a[2]! * cib + (2 + a[2]!) * c * c2) * pix;
    }
    case 'SCDown':
      return c1 * c2 * l.h * l.w + a[2]! * a[2]! * c2 * pix;
    case 'SPPF':
      return (c1 * Math.floor(c1 / 2) + 2 * c1 * c2) * pix;
    case 'PSA': {
      const c = c1 / 2;
      const heads = Math.max(1, Math.floor(c / 64));
      const kd = c / heads / 2;
      return (2 * c1 * c1 + c * (c + 2 * kd * heads) + 9 * c + c * c + 4 * c * c) * pix + heads * pix * pix * (kd + c / heads);
    }
    default:
      return 0;
  }
}

/** Multiply-accumulates of one image through v10Detect's one-to-one branches, given each level's channels and pixels. */
export function headMacs(ch: readonly number[], pix: readonly number[], nc: number): number {
  const c2 = Math.max(16, Math.floor(ch[0]! / 4), 64);
  const c3 = Math.max(ch[0]!, Math.min(nc, 100));
  return ch.reduce((s, x, i) => s + pix[i]! * (9 * x * c2 + 9 * c2 * c2 + c2 * 64 + 9 * x + x * c3 + 9 * c3 + c3 * c3 + c3 * nc), 0);
}
