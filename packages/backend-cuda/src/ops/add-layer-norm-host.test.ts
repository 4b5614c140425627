/**
 * add_layer_norm's host side without a GPU (the fake device of host-path.test.ts): fk_add_layer_norm's arguments
 * (layer_norm's, then the residual and its row stride), a residual read in place at its own row stride, the vector
 * width limited by the residual's alignment, and addNormLaunch's caps for long rows. The numbers: add-layer-norm.gpu.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Tensor } from '@fastkernels/core';
import { fake } from '../../test/ops-fake.js';
import { GeneratedNorms, addNormLaunch, normLaunch } from './norm.js';

const ptrOf = (t: Tensor) => t.storage.devicePtr! + t.offset * t.itemsize;

describe('add_layer_norm launches', () => {
  it("BGE-M3's rows: fk_add_layer_norm (y, x, w, b, rows, L, stride, eps, G, cpg, hw, r, r's stride), a warp a row", () => {
    const f = fake();
    const norms = new GeneratedNorms(f.cache, f.runtime);
    const [x, r, w, b] = [f.t([300, 1024]), f.t([300, 1024]), f.t([1024]), f.t([1024])];
    const y = norms.layerNorm(x, 1, w, b, 1e-5, 'bf16', r);
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_add_layer_norm', args: [ptrOf(y), ptrOf(x), ptrOf(w), ptrOf(b), 300, 1024, 1024, 1e-5, 1, 1, 1, ptrOf(r), 1024], block: 256 });
    expect(f.cache.launches[0]!.source).toContain('fk_sum_vec(xr, rr, j)');
    expect(f.cache.launches[0]!.source).toContain('FkV<__nv_bfloat16, 8>');
    // the plain layer_norm of the same shape stays its own kernel, arguments unchanged
    const y2 = norms.layerNorm(x, 1, w, b, 1e-5);
    expect(f.cache.launches[1]).toMatchObject({ entry: 'fk_layer_norm', args: [ptrOf(y2), ptrOf(x), ptrOf(w), ptrOf(b), 300, 1024, 1024, 1e-5, 1, 1, 1] });
    expect(f.cache.generated.size).toBe(2);
  });

  it('a residual at its own row stride is read in place; an odd offset narrows the vectors', () => {
    const f = fake();
    const norms = new GeneratedNorms(f.cache, f.runtime);
    const x = f.t([64, 1024]);
    const wide = f.t([64, 3072]);
    const r = wide.narrow(1, 1024, 1024); // the middle third of each row: stride 3072, 16-byte aligned
    norms.layerNorm(x, 1, null, null, 1e-5, 'bf16', r);
    expect(f.cache.launches[0]!.args.slice(11)).toEqual([ptrOf(r), 3072]);
    expect(f.cache.launches[0]!.source).toContain('FkV<__nv_bfloat16, 8>');
    const odd = wide.narrow(1, 1, 1024); // 2 bytes past an aligned start: scalar vectors
    norms.layerNorm(x, 1, null, null, 1e-5, 'bf16', odd);
    expect(f.cache.launches[1]!.args.slice(11)).toEqual([ptrOf(odd), 3072]);
    expect(f.cache.launches[1]!.source).toContain('FkV<__nv_bfloat16, 1>');
  });

  it('long rows: at most 512 threads a row and 10 vectors a thread (the rest read again); short rows as layer_norm', () => {
    expect(addNormLaunch(8, 8192, 132)).toEqual({ tpr: 512, block: 512, npt: 10, grid: 8 });
    expect(normLaunch(8, 8192, 132)).toMatchObject({ tpr: 1024, npt: 6 });
    expect(addNormLaunch(8, 2048, 132)).toEqual({ tpr: 512, block: 512, npt: 4, grid: 8 });
    expect(addNormLaunch(16384, 128, 132)).toEqual(normLaunch(16384, 128, 132));
    expect(addNormLaunch(100, 1000, 132)).toEqual(normLaunch(100, 1000, 132));
    const f = fake();
    const norms = new GeneratedNorms(f.cache, f.runtime);
    const x = f.t([8, 65536]);
    norms.layerNorm(x, 1, null, null, 1e-5, 'bf16', f.t([8, 65536]));
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_add_layer_norm', block: 512 });
  });
});
