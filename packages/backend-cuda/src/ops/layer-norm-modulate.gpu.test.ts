/**
 * Generated layer_norm_modulate (adaLN) on CUDA vs the float64 CPU backend through the op registry: FLUX's shapes
 * (3072 wide, the scale / shift as chunk views of the [B, 6D] modulation vector, image and text token counts), a warp
 * a row, odd widths (scalar reads), a modulation row for every token, one for all, an f32 modulation on a 16-bit
 * input, strided rows of x, a broadcast the kernel cannot address in place (copied), rows beyond the registers.
 */
import { describe, it } from 'vitest';
import type { DType, Tensor } from '@fastkernels/core';
import { G } from '../../test/spine-helpers.js';
import { checkOp, rand } from '../../test/ops-helpers.js';

/** The gpu tag, and time for NVRTC: every dtype / class is a fresh kernel on a first run (no disk cache). */
const GT = { ...G, timeout: 300_000 };

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];
/** chunk i of a [B, 6D] modulation vector as [B, 1, D] (a strided view, as AdaLayerNormZero passes it) */
const chunkOf = (i: number, D: number) => (t: Tensor) => t.narrow(1, i * D, D).unsqueeze(1);

describe('layer_norm_modulate vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: FLUX chunk views, warp rows, odd widths, per-token / one-row modulation, strided x, long rows`, GT, () => {
      const m = (label: string, x: Tensor, sc: Tensor, sh: Tensor, views: ((t: Tensor) => Tensor)[] = [], attrs: Record<string, number> = {}) =>
        checkOp(label, { op: 'layer_norm_modulate', inputs: [x, sc, sh], attrs: { eps: 1e-6, ...attrs }, views: [views[0], views[1], views[2]] });
      const flux = (label: string, B: number, S: number, D: number, seed: number) =>
        m(label, rand([B, S, D], dtype, seed, { scale: 2 }), rand([B, 6 * D], dtype, seed + 1), rand([B, 6 * D], dtype, seed + 1), [(t) => t, chunkOf(1, D), chunkOf(0, D)]);
      flux('FLUX image tokens [1, 1024, 3072] (a block a row), chunk views', 1, 1024, 3072, 1);
      flux('FLUX text tokens [2, 512, 3072], batch 2', 2, 512, 3072, 4);
      flux('[2, 37, 1024] (a warp a row)', 2, 37, 1024, 7);
      flux('odd [2, 5, 333] (vec 1, scalar modulation reads)', 2, 5, 333, 10);
      m('per-token modulation [2, 6, 200], offset 0.5', rand([2, 6, 200], dtype, 13), rand([2, 6, 200], dtype, 14), rand([2, 6, 200], dtype, 15), [], { scale_offset: 0.5 });
      m('one row for all [3, 4, 256] x [256]', rand([3, 4, 256], dtype, 16), rand([256], dtype, 17), rand([256], dtype, 18));
      if (dtype !== 'f32') m(`${dtype} input, f32 scale and shift`, rand([2, 33, 1024], dtype, 19), rand([2, 1, 1024], 'f32', 20), rand([2, 1, 1024], 'f32', 21));
      m('strided rows of x', rand([2, 20, 1100], dtype, 22), rand([2, 1, 1024], dtype, 23), rand([2, 1, 1024], dtype, 24), [(t) => t.narrow(2, 8, 1024)]);
      m('an outer broadcast dim [1, 5, 64] against [3, 5, 64] (expanded copy)', rand([3, 5, 64], dtype, 25), rand([1, 5, 64], dtype, 26), rand([64], dtype, 27));
      m('long rows [2, 1, 40000] (beyond the registers: read again)', rand([2, 1, 40000], dtype, 28), rand([2, 1, 40000], dtype, 29), rand([40000], dtype, 30));
    });
  }
});
