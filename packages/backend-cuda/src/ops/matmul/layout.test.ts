/**
 * GEMM planning from layouts (no CUDA): which operands cuBLASLt reads in place (transposed by layout, broadcast batch
 * by stride 0), which need a copy first (and whether expanded to the batch), leading dims, batch strides, the fold of a
 * shared right operand into M, baddbmm's C read in place.
 */
import { contiguousStrides } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { EPILOGUE_GELU, fillLtParams, matrixLayout } from '../../blaslt.js';
import { flatBatchStride, isRowBias, matrixInto, newGemmPlan, newOperandPlan, planC, planGemm, planOutput } from './layout.js';

const cs = (s: number[]) => [...contiguousStrides(s)];
/** Plan a @ b into a fresh contiguous output. */
function plan(a: number[], aStrides: number[], b: number[], bStrides: number[], out: number[]) {
  const g = newGemmPlan();
  expect(planGemm(a, aStrides, b, bStrides, out, cs(out), g)).toBe(true);
  return g;
}

describe('matrixInto (blaslt.ts matrixLayout without an allocation)', () => {
  it('agrees with matrixLayout on row-major, transposed, padded, vector and unaddressable views', () => {
    const cases: [number, number, number, number][] = [[4, 8, 8, 1], [4, 8, 16, 1], [4, 8, 1, 4], [4, 8, 0, 1], [4, 8, 16, 2], [1, 8, 0, 1], [8, 1, 1, 0], [1, 1, 5, 7], [4, 8, 1, 2]];
    for (const [r, c, sr, sc] of cases) {
      const p = newOperandPlan();
      const ok = matrixInto(r, c, sr, sc, p);
      const l = matrixLayout(r, c, sr, sc);
      expect(ok, `${[r, c, sr, sc]}`).toBe(l !== undefined);
      if (l) expect({ trans: p.trans, ld: p.ld }).toEqual(l);
    }
  });
});

describe('flatBatchStride', () => {
  it('contiguous batches, broadcast batches (0), size-1 out dims skipped, dims that do not flatten (-1)', () => {
    expect(flatBatchStride([4, 8, 16], cs([4, 8, 16]), [4, 8, 32])).toBe(128);
    expect(flatBatchStride([2, 3, 8, 16], cs([2, 3, 8, 16]), [2, 3, 8, 32])).toBe(128);
    expect(flatBatchStride([16, 32], cs([16, 32]), [2, 3, 8, 32])).toBe(0);
    expect(flatBatchStride([1, 1, 16, 32], [0, 0, 32, 1], [2, 3, 8, 32])).toBe(0);
    expect(flatBatchStride([3, 16, 32], cs([3, 16, 32]), [2, 3, 8, 32])).toBe(-1); // [B, H] over a [H] operand
    expect(flatBatchStride([2, 1, 8, 16], cs([2, 1, 8, 16]), [2, 3, 8, 32])).toBe(-1);
    expect(flatBatchStride([1, 5, 8, 16], cs([1, 5, 8, 16]), [1, 5, 8, 32])).toBe(128);
    // [H, B] batch of a permuted [B, H, D] tensor: h stride D, b stride H*D -> walking b inside h does not flatten
    expect(flatBatchStride([6, 4, 1, 8], [8, 48, 0, 1], [6, 4, 1, 8])).toBe(-1);
  });
});

describe('planGemm', () => {
  it('bmm on contiguous operands: row-major, lda K, ldb N, batch strides M*K, K*N, M*N', () => {
    const g = plan([4, 8, 16], cs([4, 8, 16]), [4, 16, 32], cs([4, 16, 32]), [4, 8, 32]);
    expect(g).toMatchObject({ m: 8, n: 32, k: 16, batch: 4, ldc: 32, strideC: 256, folded: false });
    expect(g.a).toMatchObject({ trans: false, ld: 16, stride: 128, copy: false });
    expect(g.b).toMatchObject({ trans: false, ld: 32, stride: 512, copy: false });
  });

  it("a transposed view is a transposed operand (FLUX's q @ k^T: k [B, N, K] viewed [B, K, N] with strides [N*K, 1, K])", () => {
    const g = plan([24, 64, 128], cs([24, 64, 128]), [24, 128, 64], [64 * 128, 1, 128], [24, 64, 64]);
    expect(g.b).toMatchObject({ trans: true, ld: 128, stride: 8192, copy: false });
    const h = plan([4, 16, 8], [128, 1, 16], [4, 16, 32], cs([4, 16, 32]), [4, 8, 32]); // a^T view
    expect(h.a).toMatchObject({ trans: true, ld: 16, stride: 128, copy: false });
  });

  it('a shared right operand folds the batch into M; a strided-row a folds with its row pitch', () => {
    const g = plan([2, 3, 8, 16], cs([2, 3, 8, 16]), [16, 32], cs([16, 32]), [2, 3, 8, 32]);
    expect(g).toMatchObject({ m: 48, batch: 1, folded: true, ldc: 32, strideC: 0 });
    expect(g.a).toMatchObject({ ld: 16, stride: 0 });
    expect(g.b).toMatchObject({ stride: 0 });
    // rows 40 apart (a narrowed [.., 8, 40] -> K 16): still one run of rows
    const s = plan([3, 8, 16], [320, 40, 1], [16, 32], cs([16, 32]), [3, 8, 32]);
    expect(s).toMatchObject({ m: 24, batch: 1, folded: true });
    expect(s.a.ld).toBe(40);
    // M = 1 (decode-like rows): the batch stride is the row pitch
    const d = plan([5, 1, 16], cs([5, 1, 16]), [16, 32], cs([16, 32]), [5, 1, 32]);
    expect(d).toMatchObject({ m: 5, batch: 1, folded: true, ldc: 32 });
    expect(d.a.ld).toBe(16);
    // a linear weight read transposed ([N, K] as [K, N] with strides [1, K]) folds too
    const l = plan([4, 7, 16], cs([4, 7, 16]), [16, 32], [1, 16], [4, 7, 32]);
    expect(l).toMatchObject({ m: 28, batch: 1, folded: true });
    expect(l.b).toMatchObject({ trans: true, ld: 16, stride: 0 });
  });

  it('no fold when batches of a do not run on (a gap between batches) or b is batched', () => {
    const g = plan([3, 8, 16], [200, 16, 1], [16, 32], cs([16, 32]), [3, 8, 32]);
    expect(g).toMatchObject({ m: 8, batch: 3, folded: false });
    expect(g.a.stride).toBe(200);
    expect(g.b.stride).toBe(0);
    const a0 = plan([8, 16], cs([8, 16]), [4, 16, 32], cs([4, 16, 32]), [4, 8, 32]);
    expect(a0).toMatchObject({ batch: 4, folded: false });
    expect(a0.a.stride).toBe(0);
  });

  it('which operands need a copy first: unaddressable matrices (copy as is), unflattenable batches (copy expanded)', () => {
    const strided = plan([4, 8, 16], [512, 32, 2], [4, 16, 32], cs([4, 16, 32]), [4, 8, 32]); // every other column
    expect(strided.a).toMatchObject({ copy: true, expand: false });
    expect(strided.b.copy).toBe(false);
    const partial = plan([2, 3, 8, 16], cs([2, 3, 8, 16]), [3, 16, 32], cs([3, 16, 32]), [2, 3, 8, 32]);
    expect(partial.a.copy).toBe(false);
    expect(partial.b).toMatchObject({ copy: true, expand: true });
    // after the copy, expanded and contiguous, everything is addressable
    const after = plan([2, 3, 8, 16], cs([2, 3, 8, 16]), [2, 3, 16, 32], cs([2, 3, 16, 32]), [2, 3, 8, 32]);
    expect(after.b).toMatchObject({ copy: false, stride: 512 });
  });

  it('outputs: a strided view with unit columns and one batch stride is written in place; others are not', () => {
    const g = newGemmPlan();
    g.batch = 6;
    // einsum 'bhd,hdk->bhk' computed as [h, b, k] into a [b, h, k] output: ld H*K, batch stride K
    expect(planOutput([6, 4, 8], [8, 48, 1], g)).toBe(true);
    expect(g).toMatchObject({ ldc: 48, strideC: 8 });
    expect(planOutput([6, 4, 8], [32, 1, 4], g)).toBe(false); // columns not unit
    expect(planOutput([6, 4, 8], [0, 8, 1], g)).toBe(false); // every batch onto one matrix
  });
});

describe("baddbmm's input", () => {
  it('read in place as C when row-major with one batch stride; a broadcast row is not addressable (copy or bias)', () => {
    const c = { ld: 0, stride: 0 };
    expect(planC([4, 8, 32], cs([4, 8, 32]), c)).toBe(true);
    expect(c).toEqual({ ld: 32, stride: 256 });
    expect(planC([4, 8, 32], [0, 32, 1], c)).toBe(true); // [1, M, N] over the batch
    expect(c).toEqual({ ld: 32, stride: 0 });
    expect(planC([4, 8, 32], [0, 0, 1], c)).toBe(false); // [N] over the rows
    expect(planC([4, 8, 32], [256, 1, 8], c)).toBe(false); // transposed
    expect(isRowBias([32])).toBe(true);
    expect(isRowBias([1, 1, 32])).toBe(true);
    expect(isRowBias([4, 1, 32])).toBe(false);
  });
});

describe('the parameter block of an out-of-place GEMM with an activation epilogue (blaslt.ts fillLtParams)', () => {
  it("C's pointer, leading dim, batch stride and alignment apart from D's; the epilogue as given; defaults unchanged", () => {
    const base = {
      m: 8, n: 32, k: 16, batch: 4, transA: false, transB: false, dtypeA: 'bf16', dtypeB: 'bf16', dtypeOut: 'bf16',
      a: 0x1000, b: 0x2000, out: 0x3000, bias: 0, lda: 16, ldb: 32, ldc: 32, strideA: 128, strideB: 512, strideC: 256, alpha: 2, beta: 0.5,
    } as const;
    const p = fillLtParams(new Float64Array(34), { ...base, cPtr: 0x5010, cLd: 40, cStride: 0, epilogue: EPILOGUE_GELU }, 0x9000, 1 << 25, 7);
    expect([p[12], p[13], p[16], p[17]]).toEqual([40, 32, 0, 256]); // ldc, ldd, strideC, strideD
    expect([p[22], p[23]]).toEqual([16, 256]); // alignment of C, D
    expect([p[27], p[28]]).toEqual([0x5010, 0x3000]);
    expect(p[19]).toBe(EPILOGUE_GELU);
    const q = fillLtParams(new Float64Array(34), base, 0x9000, 1 << 25, 7);
    expect([q[12], q[13], q[16], q[17], q[19], q[22], q[23], q[27], q[28]]).toEqual([32, 32, 256, 256, 1, 256, 256, 0x3000, 0x3000]);
  });
});
