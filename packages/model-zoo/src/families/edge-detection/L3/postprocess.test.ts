import { Tensor, hostArray, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { refPostprocess } from '../reference.js';
import { v10Postprocess } from './postprocess.js';

// 2 classes, 3 anchors: rows x1 y1 x2 y2 s0 s1, anchors as columns.
const preds = [
  [0, 10, 20], [1, 11, 21], [2, 12, 22], [3, 13, 23],
  [0.9, 0.1, 0.3],
  [0.2, 0.8, 0.7],
].flat();

describe('v10postprocess (NMS-free top-k)', () => {
  it('keeps the best anchors by their best class, then the best (anchor, class) pairs among them', () => {
    // max_det 2: anchors 0 (0.9) and 1 (0.8); pairs among them: 0.9 (a0, c0), 0.8 (a1, c1), 0.2, 0.1
    const want = { boxes: [0, 1, 2, 3, 10, 11, 12, 13], scores: [0.9, 0.8], classes: [0, 1] };
    const ref = refPostprocess(hostArray([1, 6, 3], Float64Array.from(preds)), 2, 2);
    expect([...ref.boxes]).toEqual(want.boxes);
    expect([...ref.scores]).toEqual(want.scores);
    expect([...ref.classes]).toEqual(want.classes);
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f64' as const, registry: baselineRegistry() };
    withContext(ctx, () => {
      const t = Tensor.fromArray(ctx.backend, preds, [1, 6, 3], 'f64');
      const d = v10Postprocess(t, 2, 2);
      expect([...d.boxes.toFloat64Array()]).toEqual(want.boxes);
      expect([...d.scores.toFloat64Array()]).toEqual(want.scores);
      expect([...d.classes.toFloat64Array()]).toEqual(want.classes);
      // max_det beyond the anchors keeps min(max_det, A) = 3: the third pair is (a2, c1) at 0.7
      const all = v10Postprocess(t, 2, 300);
      expect([...all.scores.toFloat64Array()]).toEqual([0.9, 0.8, 0.7]);
      expect([...all.classes.toFloat64Array()]).toEqual([0, 1, 1]);
    });
  });
});
