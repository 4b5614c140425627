/**
 * The tensor-core grouped GEMM's host-checkable parts, without a GPU:
 * - its routing kernel (kernels/grouped_gemm_route.cu, as embedded) run on the host (test/host-cuda.ts, g++; this file
 *   adds __syncthreads, shared-memory atomics and int shuffles to the harness): expert_ids with -1 / out-of-range ids
 *   and empty experts, offsets with rows before offsets[0], past offsets[E] and out-of-range / decreasing entries; the
 *   rows grouped by expert (a permutation, each group exactly its rows) and the slot table exactly as planned, within
 *   the ceil(T / BM) + E slots the host launches;
 * - the GEMM's CTA schedule transcribed (fk_grouped_gemm_tc: the grouped pid order, the slot's rows from perm, the
 *   zero rows of group E, the column tile's bounds) over that table: every output element written exactly once, with
 *   the row's expert (or zero) as the op defines it;
 * - the MXFP4 decode of the GEMM (fp4 bits placed as a float's, one exact multiply; the e8m0 scale from its bits) run
 *   on the host against the decode mxfp4_dequant's kernel uses, for every code and scale: the same floats, bit for bit;
 * - the B fragments of fk_mma_warp_tile.cuh's two loaders (ldmatrix from a [n][k] tile, ldmatrix.trans from a [k][n]
 *   tile), their lane addresses transcribed and ldmatrix's delivery as the PTX ISA defines it, against the m16n8k16 B
 *   fragment layout: the same values in every lane's registers.
 * The tensor-core arithmetic itself is GPU-tested (grouped-gemm-tc.gpu.test.ts). Skipped where g++ is absent.
 */
import { Rng } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { WARP_LANES_SHIM, cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { MXFP4_DEVICE_FUNCTIONS } from '../quant/mxfp4-source.js';
import { groupedTcRouteSource } from './grouped-gemm-tc.js';
import { GROUPED_TC_ROUTE_THREADS, GROUPED_TC_TILES, groupedTcRouteDefines, planGroupedTc } from './grouped-gemm-tc-plan.js';

/** The CUDA built-ins the routing kernel uses beyond host-cuda.ts's, for one CTA of 1024 threads. */
const ROUTE_SHIM = `#include <algorithm>
#include <atomic>
#define __shared__
using std::min;
using std::max;
struct int4 { int x, y, z, w; };
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
std::barrier<> fk_cta_barrier(${GROUPED_TC_ROUTE_THREADS});
inline void __syncthreads() { fk_cta_barrier.arrive_and_wait(); }
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
${WARP_LANES_SHIM}
static int fk_route_smem[1 << 14];
`;

interface RouteCase {
  readonly T: number;
  readonly E: number;
  readonly BM: number;
  readonly byIds: boolean;
  readonly route: number[];
}

/** perm and the slot table the routing kernel writes, run on the host. */
function runRoute(c: RouteCase, slots: number): { perm: number[]; tiles: number[][] } {
  const index = c.byIds ? 'i64' : 'i32';
  const src = groupedTcRouteSource(groupedTcRouteDefines(index, c.byIds)).source;
  const main = `${cArray(c.byIds ? 'long long' : 'int', 'route', c.route)}
static int perm[${Math.max(1, c.T)}];
static int4 tiles[${slots}];
int main() {
  fk_launch({1, 1, 1}, ${GROUPED_TC_ROUTE_THREADS}, [] { fk_grouped_gemm_route(route, perm, tiles, ${c.T}, ${c.E}, ${c.BM}, ${slots}); });
  for (int i = 0; i < ${c.T}; i++) printf("%d\\n", perm[i]);
  for (int i = 0; i < ${slots}; i++) printf("%d\\n%d\\n%d\\n%d\\n", tiles[i].x, tiles[i].y, tiles[i].z, tiles[i].w);
}`;
  const out = runOnHost(`${ROUTE_SHIM}\n${src}`, main);
  const perm = out.slice(0, c.T);
  const tiles = Array.from({ length: slots }, (_, i) => out.slice(c.T + 4 * i, c.T + 4 * i + 4));
  return { perm, tiles };
}

/** The op's expert of each row (grouped_gemm's contract; offsets clamped and made non-decreasing as the kernel does), or -1. */
function expertOfRows(c: RouteCase): number[] {
  if (c.byIds) return c.route.map((e) => (e >= 0 && e < c.E ? e : -1));
  const o: number[] = [];
  c.route.forEach((v, i) => o.push(Math.max(Math.min(Math.max(v, 0), c.T), i ? o[i - 1]! : 0)));
  return Array.from({ length: c.T }, (_, t) => {
    for (let e = 0; e < c.E; e++) if (o[e]! <= t && t < o[e + 1]!) return e;
    return -1;
  });
}

/** The groups (experts, then E: rows no expert takes) in position order and the slot table the kernel must write. */
function expectedLayout(c: RouteCase, slots: number): { groups: number[][]; tiles: number[][] } {
  const ex = expertOfRows(c);
  const groups = Array.from({ length: c.E + 1 }, (_, g) => ex.flatMap((e, t) => ((e < 0 ? c.E : e) === g ? [t] : [])));
  if (!c.byIds) {
    // offsets: covered rows in order, then the rows before offsets[0], then those past offsets[E]
    const o0 = groups.slice(0, c.E).flat()[0];
    const first = o0 === undefined ? c.T : Math.min(...groups.slice(0, c.E).flat());
    groups[c.E] = [...groups[c.E]!.filter((t) => t < first), ...groups[c.E]!.filter((t) => t >= first)];
  }
  const tiles: number[][] = [];
  let pos = 0;
  groups.forEach((rows, g) => {
    for (let p = 0; p < rows.length; p += c.BM) tiles.push([g, pos + p, pos + rows.length, 0]);
    pos += rows.length;
  });
  expect(tiles.length, 'tiles within the slots the host launches').toBeLessThanOrEqual(slots);
  while (tiles.length < slots) tiles.push([-1, 0, 0, 0]);
  return { groups, tiles };
}

/** fk_grouped_gemm_tc's CTA schedule over the table: which (row, column) each CTA writes, and with which expert. */
function emulateSchedule(c: RouteCase, perm: number[], tiles: number[][], N: number, BN: number, groupM: number): Int32Array {
  const writtenBy = new Int32Array(c.T * N).fill(-2); // expert written (-1 a zero row), -2 never
  const slots = tiles.length, nTiles = Math.ceil(N / BN);
  for (let pid = 0; pid < slots * nTiles; pid++) {
    const perGroup = groupM * nTiles;
    const first = Math.floor(pid / perGroup) * groupM;
    const size = Math.min(slots - first, groupM);
    const inGroup = pid % perGroup;
    const [pm, pn] = [first + (inGroup % size), Math.floor(inGroup / size)];
    const [g, p0, p1] = tiles[pm]!;
    if (g! < 0) continue;
    for (let r = 0; r < c.BM; r++) {
      if (p0! + r >= p1!) continue;
      const row = perm[p0! + r]!;
      for (let n = pn * BN; n < Math.min(N, pn * BN + BN); n++) {
        expect(writtenBy[row * N + n], `row ${row} column ${n} written twice`).toBe(-2);
        writtenBy[row * N + n] = g! >= c.E ? -1 : g!;
      }
    }
  }
  return writtenBy;
}

function randomCase(rng: Rng, T: number, E: number, BM: number, byIds: boolean): RouteCase {
  if (byIds) {
    // experts 0 and E - 1 never chosen; some -1 rows and one out-of-range id
    const route = Array.from({ length: T }, () => (rng.int(0, 10) === 0 ? -1 : 1 + rng.int(0, Math.max(1, E - 2))));
    if (T > 3) route[3] = E + 5;
    return { T, E, BM, byIds, route };
  }
  // offsets: rows before offsets[0] and past offsets[E], an empty expert, one entry past T and one decreasing
  const cuts = Array.from({ length: E + 1 }, () => rng.int(0, T + 1)).sort((a, b) => a - b);
  cuts[0] = Math.min(cuts[0]!, 2);
  if (E > 3) [cuts[2], cuts[3]] = [cuts[3]!, cuts[2]!];
  if (E > 5) cuts[E - 1] = T + 7;
  return { T, E, BM, byIds, route: cuts };
}

describe(`tensor-core grouped GEMM routing and schedule on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  const cases: [string, (rng: Rng) => RouteCase][] = [
    ['ids, 300 rows over 8 experts, BM 32', (r) => randomCase(r, 300, 8, 32, true)],
    ['ids, 1000 rows over 40 experts, BM 64 (experts past one warp)', (r) => randomCase(r, 1000, 40, 64, true)],
    ['ids, 70 rows over 3 experts, BM 128', (r) => randomCase(r, 70, 3, 128, true)],
    ['offsets, 257 rows over 8 experts, BM 32', (r) => randomCase(r, 257, 8, 32, false)],
    ['offsets, 900 rows over 33 experts, BM 64', (r) => randomCase(r, 900, 33, 64, false)],
  ];
  cases.forEach(([name, make], n) => {
    it.skipIf(!hasGxx)(name, () => {
      const c = make(new Rng(700 + n));
      const tile = GROUPED_TC_TILES.find((t) => t.BM === c.BM)!;
      const N = 300;
      const plan = planGroupedTc({ T: c.T, N, K: 64, E: c.E, format: 'k-contiguous' }, tile);
      const { perm, tiles } = runRoute(c, plan.slots);
      const want = expectedLayout(c, plan.slots);
      expect(tiles).toEqual(want.tiles);
      // each group's positions hold exactly its rows (in order for offsets; any order for ids: atomics)
      let pos = 0;
      for (const rows of want.groups) {
        const got = perm.slice(pos, pos + rows.length);
        expect(c.byIds ? [...got].sort((a, b) => a - b) : got).toEqual(rows);
        pos += rows.length;
      }
      const writtenBy = emulateSchedule(c, perm, tiles, N, tile.BN, tile.groupM);
      const ex = expertOfRows(c);
      for (let t = 0; t < c.T; t++) for (let col = 0; col < N; col++) expect(writtenBy[t * N + col], `row ${t} column ${col}`).toBe(ex[t]);
    }, 120_000);
  });
});

describe(`tensor-core grouped GEMM's MXFP4 decode on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  it.skipIf(!hasGxx)('= the fp4 e2m1 x e8m0 decode of mxfp4_dequant, every code and scale, bit for bit', () => {
    const file = KERNEL_SOURCES['grouped_gemm_tc.cu']!;
    // the kernel's two decode functions, cut from its source
    const decode = file.match(/__device__ __forceinline__ float e8m0\([\s\S]*?\n}\n[\s\S]*?__device__ __forceinline__ float fp4\([^\n]*\n/)?.[0];
    expect(decode, 'e8m0 and fp4 in grouped_gemm_tc.cu').toBeDefined();
    const src = `typedef unsigned int u32;\n${MXFP4_DEVICE_FUNCTIONS}\n${decode}`;
    const main = `int main() {
  for (unsigned s = 0; s < 256; s++)
    for (unsigned c = 0; c < 16; c++) {
      const float a = fp4(c) * e8m0(s), b = fk_fp4_e2m1(c) * fk_e8m0(s);
      unsigned ua, ub;
      std::memcpy(&ua, &a, 4);
      std::memcpy(&ub, &b, 4);
      printf("%d\\n", (ua == ub || (a != a && b != b)) ? 1 : 0);
    }
}`;
    const same = runOnHost(src, main);
    expect(same.length).toBe(256 * 16);
    expect(same.every((v) => v === 1), `mismatch at (scale, code) ${same.findIndex((v) => v !== 1)}`).toBe(true);
  }, 120_000);
});

/** ldmatrix .x4: lane l addresses row l % 8 of matrix l / 8 (8 elements from its address); lane t gets, of matrix m,
 * (row t / 4, columns 2 (t % 4) + h), or with .trans (row 2 (t % 4) + h, column t / 4), h = 0, 1. */
function ldmatrixX4(read: (addr: number) => number, addrOf: (lane: number) => number, trans: boolean): number[][][] {
  const rows = Array.from({ length: 32 }, (_, l) => Array.from({ length: 8 }, (_, c) => read(addrOf(l) + c)));
  return Array.from({ length: 32 }, (_, t) =>
    Array.from({ length: 4 }, (_, m) => [0, 1].map((h) => (trans ? rows[8 * m + 2 * (t % 4) + h]![Math.floor(t / 4)]! : rows[8 * m + Math.floor(t / 4)]![2 * (t % 4) + h]!))),
  );
}

describe('fk_mma_warp_tile.cuh: B fragments from a [n][k] tile and from a [k][n] tile (ldmatrix.trans)', () => {
  it('both give the m16n8k16 B layout: b0 = B[k 2 (t % 4) + h][n t / 4], b1 the same 8 k further, two n8 tiles a load', () => {
    const [P_NK, P_KN, b0, k0] = [72, 136, 32, 16]; // the kernel's pitches (BK 64, BN 128); a warp's column / k offsets
    const B = (k: number, n: number) => 1000 * k + n; // the operand's element (k, n), distinct values
    const nk = (addr: number) => B(addr % P_NK, Math.floor(addr / P_NK)); // tile [n][k]
    const kn = (addr: number) => B(Math.floor(addr / P_KN), addr % P_KN); // tile [k][n]
    for (const j of [0, 1]) {
      // warp_tile_k16's and warp_tile_k16_kn's lane addresses (element offsets into the tile)
      const fromNk = ldmatrixX4(nk, (l) => (b0 + j * 16 + (l >> 4) * 8 + (l & 7)) * P_NK + k0 + ((l >> 3) & 1) * 8, false);
      const fromKn = ldmatrixX4(kn, (l) => (k0 + (l & 7) + ((l >> 3) & 1) * 8) * P_KN + b0 + j * 16 + (l >> 4) * 8, true);
      for (let t = 0; t < 32; t++) {
        const [g, c] = [Math.floor(t / 4), 2 * (t % 4)];
        // registers bf[2j][0], bf[2j][1], bf[2j + 1][0], bf[2j + 1][1]: n8 tile 2j then 2j + 1, each b0 (k 0-7) and b1 (k 8-15)
        const want = [0, 1].flatMap((tile) => [0, 8].map((dk) => [0, 1].map((h) => B(k0 + dk + c + h, b0 + j * 16 + tile * 8 + g))));
        expect(fromNk[t], `lane ${t} [n][k]`).toEqual(want);
        expect(fromKn[t], `lane ${t} [k][n]`).toEqual(want);
      }
    }
  });
});
