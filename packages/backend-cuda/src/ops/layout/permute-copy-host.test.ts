/**
 * kernels/permute_copy.cu on the host, without a GPU: planCopy plans each case, its geometry struct is encoded as the
 * launch passes it (encodeCopyGeometry's bytes, memcpy'd into the kernel's struct), and the kernel runs under g++
 * (test/host-cuda.ts: a CTA's threads as std::threads, __syncthreads a CTA barrier, __shared__ static) on 1-8-byte
 * elements; each destination element, and the padding around the view, is checked against a strided reference. The
 * fake device has 1 SM, so grids are small and the grid-stride loops run several tiles / vectors a thread. The real
 * memory system (16-byte transactions, bank conflicts, speed) is the GPU test's (permute-copy.gpu.test.ts).
 */
import { contiguousStrides } from '@fastkernels/core';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CTA_SHIM, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { encodeCopyGeometry, planCopy, ROWS_GEO_BYTES, TRANSPOSE_GEO_BYTES, type CopyPlan } from './copy-plan.js';

const SOURCE = readFileSync(join(__dirname, '../../../kernels/permute_copy.cu'), 'utf8');
const UTYPE: Readonly<Record<number, string>> = { 1: 'unsigned char', 2: 'unsigned short', 4: 'unsigned int', 8: 'unsigned long long' };
const SENTINEL = 251; // never a source value below (they are i * 3 + 1 mod 250)

interface View {
  readonly strides: readonly number[];
  readonly offset: number;
  /** Elements of the buffer the view lives in (padding included). */
  readonly span: number;
}

interface Case {
  readonly name: string;
  readonly shape: readonly number[];
  readonly itemsize: 1 | 2 | 4 | 8;
  readonly dst: View;
  readonly src: View;
  readonly kind: 'rows' | 'transpose';
  /** Extra expectations on the plan (vector flags, vec). */
  readonly plan?: Record<string, unknown>;
  /** Compile the rows kernel with 64-bit index math whatever the plan says. */
  readonly wideIndex?: boolean;
}

const spanOf = (shape: readonly number[], strides: readonly number[], offset: number) => offset + shape.reduce((a, n, d) => a + (n - 1) * strides[d]!, 0) + 1;
const dense = (shape: readonly number[], offset = 0, pad = 0): View => {
  const strides = contiguousStrides(shape);
  return { strides, offset, span: spanOf(shape, strides, offset) + pad };
};
/** The view of a contiguous base tensor permuted by perm: its shape and strides. */
function permutedView(base: readonly number[], perm: readonly number[], offset = 0, pad = 0): { shape: number[]; view: View } {
  const st = contiguousStrides(base);
  const shape = perm.map((p) => base[p]!);
  const strides = perm.map((p) => st[p]!);
  return { shape, view: { strides, offset, span: spanOf(shape, strides, offset) + pad } };
}
/** shape laid out in memory order `order` (outermost first). */
function ordered(shape: readonly number[], order: readonly number[], offset = 0): View {
  const strides = new Array<number>(shape.length);
  let acc = 1;
  for (let k = order.length - 1; k >= 0; k--) {
    strides[order[k]!] = acc;
    acc *= shape[order[k]!]!;
  }
  return { strides, offset, span: spanOf(shape, strides, offset) };
}

function permCase(name: string, base: number[], perm: number[], itemsize: Case['itemsize'], kind: Case['kind'], extra: Partial<Case> = {}, srcOffset = 0): Case {
  const { shape, view } = permutedView(base, perm, srcOffset, 3);
  return { name, shape, itemsize, dst: dense(shape, 0, 5), src: view, kind, ...extra };
}

const CASES: Case[] = [
  permCase('f16 [B, H, S, D] -> [B, S, H, D] (rows of D = 16, vectors)', [2, 3, 5, 16], [0, 2, 1, 3], 2, 'rows', { plan: { vec: 8 } }),
  permCase('f16 [B, S, H, D] -> [B, H, S, D], D = 7 (scalar rows)', [2, 5, 3, 7], [0, 2, 1, 3], 2, 'rows', { plan: { vec: 1 } }),
  permCase('f16 head permute, 64-bit index build', [2, 3, 5, 24], [0, 2, 1, 3], 2, 'rows', { wideIndex: true, plan: { vec: 8 } }),
  permCase('f16 rows from a source 1 element off (scalar)', [3, 4, 16], [1, 0, 2], 2, 'rows', { plan: { vec: 1 } }, 1),
  { name: 'f16 NCHW -> NHWC [2, 40, 5, 7] (HW 35: scalar loads, vector stores, partial tiles)', shape: [2, 40, 5, 7], itemsize: 2, dst: ordered([2, 40, 5, 7], [0, 2, 3, 1]), src: dense([2, 40, 5, 7], 0, 2), kind: 'transpose', plan: { vecSrc: false, vecDst: true } },
  { name: 'f16 NHWC -> NCHW [2, 72, 9, 16] (vectors both sides, a partial tile along C)', shape: [2, 72, 9, 16], itemsize: 2, dst: dense([2, 72, 9, 16], 0, 4), src: ordered([2, 72, 9, 16], [0, 2, 3, 1]), kind: 'transpose', plan: { vecSrc: true, vecDst: true } },
  { name: 'bf16-size NCHW -> NHWC [1, 128, 12, 12] from a view 8 elements in (aligned)', shape: [1, 128, 12, 12], itemsize: 2, dst: ordered([1, 128, 12, 12], [0, 2, 3, 1]), src: dense([1, 128, 12, 12], 8), kind: 'transpose', plan: { vecSrc: true, vecDst: true } },
  permCase('f32 [70, 130].t() (full and partial tiles)', [70, 130], [1, 0], 4, 'transpose', { plan: { vecSrc: false, vecDst: false } }),
  permCase('f32 [64, 128].t() (vectors both sides)', [64, 128], [1, 0], 4, 'transpose', { plan: { vecSrc: true, vecDst: true } }),
  permCase('u8 [33, 100].t()', [33, 100], [1, 0], 1, 'transpose'),
  permCase('u8 [64, 96].t() (16-element vectors)', [64, 96], [1, 0], 1, 'transpose', { plan: { vecSrc: true, vecDst: true } }),
  permCase('f64 [21, 70].t() (vector loads, scalar stores: rows of 21)', [21, 70], [1, 0], 8, 'transpose', { plan: { vecSrc: true, vecDst: false } }),
  permCase('f16 permute [3, 16, 10, 24] by (2, 0, 3, 1): two outer dims', [3, 16, 10, 24], [2, 0, 3, 1], 2, 'transpose'),
  permCase('f16 permute [2, 3, 16, 9, 8] by (4, 1, 0, 3, 2): three outer dims', [2, 3, 16, 9, 8], [4, 1, 0, 3, 2], 2, 'transpose'),
  permCase('f16 transpose from a misaligned view (1 element in)', [24, 40], [1, 0], 2, 'transpose', { plan: { vecSrc: false, vecDst: true } }, 1),
];

/** dst buffer after dst[view] = src[view]: the reference, SENTINEL where the copy must not write. */
function reference(c: Case, srcValues: (i: number) => number): number[] {
  const out = new Array<number>(c.dst.span).fill(SENTINEL);
  const n = c.shape.reduce((a, b) => a * b, 1);
  const idx = new Array<number>(c.shape.length).fill(0);
  for (let e = 0; e < n; e++) {
    let rem = e;
    for (let d = c.shape.length - 1; d >= 0; d--) {
      idx[d] = rem % c.shape[d]!;
      rem = Math.floor(rem / c.shape[d]!);
    }
    const od = c.dst.offset + idx.reduce((a, x, d) => a + x * c.dst.strides[d]!, 0);
    const os = c.src.offset + idx.reduce((a, x, d) => a + x * c.src.strides[d]!, 0);
    out[od] = srcValues(os);
  }
  return out;
}

function runCase(c: Case, p: Extract<CopyPlan, { kind: 'rows' | 'transpose' }>): number[] {
  const rows = p.kind === 'rows';
  const bytes = Array.from(encodeCopyGeometry(new Uint8Array(rows ? ROWS_GEO_BYTES : TRANSPOSE_GEO_BYTES), p));
  const struct = rows ? 'FkRowsGeo' : 'FkTransposeGeo';
  const entry = rows ? 'fk_copy_rows' : 'fk_copy_transpose';
  const T = UTYPE[c.itemsize]!;
  const defines = `#define FK_ELEM_BYTES ${c.itemsize}\n#define FK_INDEX ${rows && !c.wideIndex ? p.index : 'long long'}\n`;
  const main = `alignas(16) static ${T} srcb[${c.src.span}];
alignas(16) static ${T} dstb[${c.dst.span}];
static const unsigned char geo_bytes[] = {${bytes.join(', ')}};
static_assert(sizeof(${struct}) == ${bytes.length}, "the geometry struct's size");
int main() {
  for (long long i = 0; i < ${c.src.span}; i++) srcb[i] = (${T})((i * 3 + 1) % 250);
  for (long long i = 0; i < ${c.dst.span}; i++) dstb[i] = ${SENTINEL};
  ${struct} g;
  std::memcpy(&g, geo_bytes, sizeof g);
  fk_launch_ctas(${p.grid}, 1, 256, [&] { ${entry}(dstb + ${c.dst.offset}, srcb + ${c.src.offset}, g); });
  for (long long i = 0; i < ${c.dst.span}; i++) printf("%llu\\n", (unsigned long long)dstb[i]);
}`;
  return runOnHost(`${CTA_SHIM}\n${defines}${SOURCE}`, main);
}

describe.skipIf(!hasGxx)('kernels/permute_copy.cu replayed on the host', () => {
  for (const c of CASES) {
    it(c.name, { timeout: 60_000 }, () => {
      const itemBytes = c.itemsize;
      const p = planCopy(c.shape, itemBytes, { strides: c.dst.strides, ptr: c.dst.offset * itemBytes }, { strides: c.src.strides, ptr: c.src.offset * itemBytes }, 1);
      expect(p.kind).toBe(c.kind);
      if (p.kind !== 'rows' && p.kind !== 'transpose') throw new Error(p.kind);
      if (c.plan) expect(p).toMatchObject(c.plan);
      const got = runCase(c, p);
      expect(got).toEqual(reference(c, (i) => (i * 3 + 1) % 250));
    });
  }
});
