/**
 * Generated add_layer_norm (fk_add_layer_norm, the post-LN residual) on CUDA vs the float64 CPU backend through the op
 * registry: BGE-M3's rows (1024 wide: a warp a row) with bf16 / f32 weights, two trailing dims, odd widths (scalar
 * vectors), no affine, a residual read in place at its own row stride (a column slice of a wider tensor), rows
 * beyond addNormLaunch's registers (read again), and f64 declined (the decomposition).
 */
import { describe, it } from 'vitest';
import type { DType } from '@fastkernels/core';
import { G } from '../../test/spine-helpers.js';
import { checkOp, rand } from '../../test/ops-helpers.js';

/** The gpu tag, and time for NVRTC: every dtype / class is a fresh kernel on a first run (no disk cache). */
const GT = { ...G, timeout: 300_000 };

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];

describe('add_layer_norm vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: BGE-M3 rows, weights in f32, two trailing dims, odd widths, strided residual, long rows`, GT, () => {
      const n = (label: string, shape: number[], ns: number[], seed: number, opts: { wDType?: DType | null; rView?: boolean } = {}) => {
        const wd = opts.wDType === undefined ? dtype : opts.wDType;
        const w = wd ? rand(ns, wd, seed + 2) : null;
        const b = wd ? rand(ns, wd, seed + 3) : null;
        // the residual as a column slice of a tensor twice as wide: its rows at their own stride
        const r = opts.rView ? rand([...shape.slice(0, -1), 2 * shape[shape.length - 1]!], dtype, seed + 1, { scale: 2 }) : rand(shape, dtype, seed + 1, { scale: 2 });
        const last = shape.length - 1;
        checkOp(label, { op: 'add_layer_norm', inputs: [rand(shape, dtype, seed, { scale: 2 }), r, w, b], attrs: { normalized_shape: ns, eps: 1e-5 }, views: [undefined, opts.rView ? (t) => t.narrow(last, shape[last]!, shape[last]!) : undefined] });
      };
      n('BGE-M3 rows [4096, 1024]', [4096, 1024], [1024], 1);
      n('BGE-M3 rows, f32 weights', [300, 1024], [1024], 5, { wDType: 'f32' });
      n('two trailing dims [6, 4, 96]', [6, 4, 96], [4, 96], 9);
      n('odd width [33, 333] (vec 1)', [33, 333], [333], 13);
      n('no affine [17, 768]', [17, 768], [768], 17, { wDType: null });
      n('strided residual [64, 1024]', [64, 1024], [1024], 21, { rView: true });
      n('long rows [3, 40000] (read again past the registers)', [3, 40000], [40000], 25);
    });
  }

  it('f64 takes the decomposition (add, then layer_norm)', GT, () => {
    checkOp('f64', { op: 'add_layer_norm', inputs: [rand([5, 64], 'f64', 1), rand([5, 64], 'f64', 2), rand([64], 'f64', 3), null], attrs: { normalized_shape: [64] }, via: 'decomposition' });
  });
});
