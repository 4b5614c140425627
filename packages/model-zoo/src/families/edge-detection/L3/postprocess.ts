/**
 * ultralytics' NMS-free postprocess of YOLOv10 (v10Detect.postprocess / v10postprocess) on the registry ops: the top
 * K = min(max_det, A) anchors by their best class score, then the top K (anchor, class) pairs among those anchors'
 * scores, giving boxes (x1, y1, x2, y2 in input pixels), scores and class ids, best first.
 */
import { F, OpScope, type Tensor } from '@fastkernels/core';

export interface Detections {
  /** [B, K, 4] x1 y1 x2 y2. */
  readonly boxes: Tensor;
  /** [B, K] sigmoid class scores. */
  readonly scores: Tensor;
  /** [B, K] i64 class ids. */
  readonly classes: Tensor;
}

/** preds [B, 4 + nc, A] (the head's output) -> the K best detections per image. */
export function v10Postprocess(preds: Tensor, nc: number, maxDet: number): Detections {
  const [B, no, A] = preds.shape as [number, number, number];
  if (no !== 4 + nc) throw new RangeError(`v10Postprocess: preds ${JSON.stringify(preds.shape)} must have 4 + nc = ${4 + nc} rows`);
  const K = Math.min(maxDet, A);
  const s = new OpScope();
  const boxesAll = s.own(preds.narrow(1, 0, 4)); // [B, 4, A]
  const scoresAll = s.own(preds.narrow(1, 4, nc)); // [B, nc, A]
  const best = s.op('amax', [scoresAll], { dim: 1 }); // [B, A]
  const [, anchorIdx] = F.topk(best, K, { dim: -1 }).map((t) => s.own(t)) as [Tensor, Tensor];
  const pick = (src: Tensor, rows: number, idx: Tensor) => s.op('gather', [src, s.op('contiguous', [s.own(s.own(idx.unsqueeze(1)).expand(B, rows, K))])], { dim: 2 });
  const boxesK = pick(boxesAll, 4, anchorIdx); // [B, 4, K]
  const scoresK = s.op('contiguous', [s.own(pick(scoresAll, nc, anchorIdx).transpose(1, 2))]); // [B, K, nc]
  const [scores, flat] = F.topk(s.own(scoresK.view(B, K * nc)), K, { dim: -1 }).map((t) => s.own(t)) as [Tensor, Tensor];
  const slot = s.op('div', [flat, nc], { rounding_mode: 'floor' });
  const classes = s.op('remainder', [flat, nc]);
  const boxes = s.op('contiguous', [s.own(pick(boxesK, 4, slot).transpose(1, 2))]); // [B, K, 4]
  s.keep([boxes, scores, classes]);
  return { boxes, scores, classes };
}
