/** The cases the graph-level tasks share (backbone, neck, head, model): dims read off the graph at an image size. */
import { YOLOV10M, YOLOV10N, YOLOV10S, tinyYOLOv10Config, type YOLOv10Config } from './config.js';
import { layerMacs, layerShapes } from './production.js';

/** A backbone / neck / model case: the config as init, image and feature dims from its graph at `S` x `S`. */
export function graphCase(name: string, dtype: 'f32' | 'bf16' | 'f16', cfg: YOLOv10Config, B: number, S: number) {
  const l = layerShapes(cfg, S);
  const dim = (i: number) => ({ c: l[i]!.spec.c2, h: l[i]!.ho, w: l[i]!.wo });
  const [p3, p4, p5, n3, n4, n5] = [4, 6, 10, 16, 19, 22].map(dim) as { c: number; h: number; w: number }[];
  const A = n3!.h * n3!.w + n4!.h * n4!.w + n5!.h * n5!.w;
  return {
    name,
    dtype,
    dims: { B, S, NC: cfg.nc, NO: 4 + cfg.nc, A, C3: p3!.c, H3: p3!.h, W3: p3!.w, C4: p4!.c, H4: p4!.h, W4: p4!.w, C5: p5!.c, H5: p5!.h, W5: p5!.w, D3: n3!.c, D4: n4!.c, D5: n5!.c },
    init: [cfg],
  };
}

/** The CI and production cases every graph-level task (backbone, neck, model) shares. */
export const graphCases = {
  ci: [graphCase('tiny-64px-f32', 'f32', tinyYOLOv10Config(), 2, 64), graphCase('tiny-32px-bf16', 'bf16', tinyYOLOv10Config(), 1, 32)],
  production: [
    graphCase('yolov10n-640-bs1', 'f16', YOLOV10N, 1, 640),
    graphCase('yolov10n-640-bs32', 'f16', YOLOV10N, 32, 640),
    graphCase('yolov10s-640-bs32', 'f16', YOLOV10S, 32, 640),
    graphCase('yolov10m-640-bs32', 'f16', YOLOV10M, 32, 640),
  ],
};

/** FLOPs (2 x MACs) of B images of S x S through graph layers [first, last]. */
export function graphFlops(cfg: YOLOv10Config, S: number, B: number, first: number, last: number): number {
  return 2 * B * layerShapes(cfg, S).slice(first, last + 1).reduce((s, l) => s + layerMacs(l), 0);
}

