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
