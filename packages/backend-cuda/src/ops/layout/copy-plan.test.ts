import { describe, expect, it } from 'vitest';
import { contiguousStrides } from '@fastkernels/core';
import { COPY_THREADS, encodeCopyGeometry, planCopy, ROWS_GEO_BYTES, TRANSPOSE_GEO_BYTES } from './copy-plan.js';

const H100_SMS = 132;
/** Strides of `shape` laid out in memory order `order` (outermost first). */
function stridesInOrder(shape: readonly number[], order: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let k = order.length - 1; k >= 0; k--) {
    s[order[k]!] = acc;
    acc *= shape[order[k]!]!;
  }
  return s;
}
const permuted = (shape: readonly number[], perm: readonly number[]) => ({ shape: perm.map((p) => shape[p]!), strides: perm.map((p) => contiguousStrides(shape)[p]!) });
const at = (strides: readonly number[], ptr = 0) => ({ strides, ptr });

describe('planCopy', () => {
  it('[B, H, S, D] -> [B, S, H, D] (and back): rows of D, 16-byte vectors, 32-bit index math', () => {
    const v = permuted([8, 32, 2048, 128], [0, 2, 1, 3]); // [B, S, H, D] view of a [B, H, S, D] tensor
    const p = planCopy(v.shape, 2, at(contiguousStrides(v.shape)), at(v.strides), H100_SMS);
    expect(p).toMatchObject({ kind: 'rows', vec: 8, runVecs: 16, index: 'int', outer: { sizes: [8, 2048, 32] } });
    if (p.kind !== 'rows') throw new Error('rows');
    expect(p.total).toBe((8 * 32 * 2048 * 128) / 8);
    expect(p.grid).toBe(H100_SMS * 32);
    const back = permuted([8, 2048, 32, 128], [0, 2, 1, 3]);
    expect(planCopy(back.shape, 2, at(contiguousStrides(back.shape)), at(back.strides), H100_SMS)).toMatchObject({ kind: 'rows', vec: 8 });
  });

  it('NCHW <-> NHWC: a tiled transpose of C x HW per image, vectorised on both sides', () => {
    const shape = [32, 256, 80, 80];
    const nhwc = stridesInOrder(shape, [0, 2, 3, 1]);
    const toCl = planCopy(shape, 2, at(nhwc), at(contiguousStrides(shape)), H100_SMS);
    expect(toCl).toMatchObject({ kind: 'transpose', ni: 256, nj: 6400, dstJ: 256, srcI: 6400, tilesI: 4, tilesJ: 100, vecSrc: true, vecDst: true, outer: { sizes: [32] } });
    if (toCl.kind === 'transpose') expect(toCl.tiles).toBe(32 * 4 * 100);
    const toNchw = planCopy(shape, 2, at(contiguousStrides(shape)), at(nhwc), H100_SMS);
    expect(toNchw).toMatchObject({ kind: 'transpose', ni: 6400, nj: 256, dstJ: 6400, srcI: 256, vecSrc: true, vecDst: true });
  });

  it('vectors only where the pointer and every other stride line up on them', () => {
    const shape = [2, 40, 5, 7]; // HW 35: the NCHW side's rows are not a multiple of 8 halves
    const p = planCopy(shape, 2, at(stridesInOrder(shape, [0, 2, 3, 1])), at(contiguousStrides(shape)), H100_SMS);
    expect(p).toMatchObject({ kind: 'transpose', vecSrc: false, vecDst: true });
    const off = planCopy([16, 64], 2, at([64, 1]), at([1, 16], 2), H100_SMS); // the source 2 bytes off
    expect(off).toMatchObject({ kind: 'transpose', vecSrc: false, vecDst: true });
    const rows = planCopy([4, 6, 24], 2, at([144, 24, 1]), at([24, 96, 1], 16), H100_SMS);
    expect(rows).toMatchObject({ kind: 'rows', vec: 8 });
    expect(planCopy([4, 6, 24], 2, at([144, 24, 1]), at([24, 96, 1], 2), H100_SMS)).toMatchObject({ kind: 'rows', vec: 1 });
    expect(planCopy([4, 6, 7], 4, at([42, 7, 1]), at([7, 28, 1]), H100_SMS)).toMatchObject({ kind: 'rows', vec: 1 });
  });

  it('equal dense layouts are one memcpy (channels-last to channels-last); thin, strided and too-deep copies are generic', () => {
    const shape = [2, 16, 4, 4];
    const cl = stridesInOrder(shape, [0, 2, 3, 1]);
    expect(planCopy(shape, 2, at(cl), at(cl), H100_SMS)).toEqual({ kind: 'memcpy' });
    expect(planCopy([1, 3, 640, 640], 2, at(stridesInOrder([1, 3, 640, 640], [0, 2, 3, 1])), at(contiguousStrides([1, 3, 640, 640])), H100_SMS)).toMatchObject({ kind: 'generic', why: /thin/ });
    expect(planCopy([64, 64], 4, at([64, 1]), at([128, 2]), H100_SMS)).toMatchObject({ kind: 'generic', why: /source/ });
    const deep = [2, 3, 2, 3, 2, 3, 2, 16];
    const perm = [1, 0, 3, 2, 5, 4, 6, 7];
    const v = permuted(deep, perm);
    expect(planCopy(v.shape, 2, at(contiguousStrides(v.shape)), at(v.strides), H100_SMS)).toMatchObject({ kind: 'generic', why: /rank/ });
  });

  it('64-bit index math past 2^31 elements; a broadcast source (stride 0) stays rows', () => {
    const big = permuted([2, 64, 131072, 128], [0, 2, 1, 3]);
    expect(planCopy(big.shape, 2, at(contiguousStrides(big.shape)), at(big.strides), H100_SMS)).toMatchObject({ kind: 'rows', index: 'long long' });
    expect(planCopy([4, 100, 64], 2, at([6400, 64, 1]), at([0, 64, 1]), H100_SMS)).toMatchObject({ kind: 'rows', vec: 8, runVecs: 800, outer: { sizes: [4], src: [0] } });
  });

  it('encodes the geometry structs at kernels/permute_copy.cu offsets', () => {
    const shape = [32, 256, 80, 80];
    const p = planCopy(shape, 2, at(stridesInOrder(shape, [0, 2, 3, 1])), at(contiguousStrides(shape)), H100_SMS);
    if (p.kind !== 'transpose') throw new Error('transpose');
    const b = encodeCopyGeometry(new Uint8Array(TRANSPOSE_GEO_BYTES), p);
    const v = new DataView(b.buffer);
    expect([v.getInt32(0, true), v.getInt32(40, true), v.getInt32(80, true), v.getInt32(120, true)]).toEqual([32, 256 * 6400, 256 * 6400, 1]);
    expect([128, 136, 144, 152, 160, 168, 176].map((o) => v.getInt32(o, true))).toEqual([256, 6400, 256, 6400, 4, 100, 12800]);
    expect([v.getInt32(184, true), v.getInt32(188, true)]).toEqual([1, 1]);
    const r = planCopy([3, 5, 16], 2, at([80, 16, 1]), at([16, 48, 1]), H100_SMS);
    if (r.kind !== 'rows') throw new Error('rows');
    const rb = new DataView(encodeCopyGeometry(new Uint8Array(ROWS_GEO_BYTES), r).buffer);
    expect([rb.getInt32(128, true), rb.getInt32(136, true), rb.getInt32(144, true)]).toEqual([2, 30, 8]);
    expect(r.grid).toBe(Math.ceil(30 / COPY_THREADS));
  });
});
