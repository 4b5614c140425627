/**
 * The column reductions end to end on the host, without a GPU: GeneratedReductions plans and launches on a fake device
 * (test/ops-fake.ts records each launch's source, grid, block and arguments), and each launch is replayed with g++
 * (test/host-cuda.ts: a CTA's threads as std::threads; here __syncthreads as a CTA barrier, __shared__ as static, the
 * grid's y for R's slices) on real host arrays, a split's partials carried from stage 1 to stage 2. Checked against a
 * float64 reference: split and unsplit, uneven last slices, odd inner (scalar loads), a non-contiguous outer stride, a
 * misaligned view, NaN in amax, an i32 sum to i64, a prologue; narrow tiles over outer x inner in one pass (planColumns:
 * a few SMs make small tensors plan as the bench's mean over tokens and channels-last pool do on 132), and the pool at
 * its real shape on 132 SMs (its inputs made by a formula in C, not a literal). f32 / f64 / int variants only (no
 * cuda_bf16.h on the host); bf16 and the real memory system are GPU-tested (generated-reduce.gpu.test.ts). Skipped where
 * g++ is absent.
 */
import { Rng, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { CTA_SHIM, hasGxx, runOnHost } from '../../test/host-cuda.js';
import { fake } from '../../test/ops-fake.js';
import { singleOp, type Expr } from './expr.js';
import { GeneratedReductions } from './reduce.js';
import type { ReduceOp } from './reduce-source.js';

const CTYPE: Readonly<Record<string, string>> = { f32: 'float', f64: 'double', i32: 'int', i64: 'long long' };
const ITEMSIZE: Readonly<Record<string, number>> = { f32: 4, f64: 8, i32: 4, i64: 8 };

interface Buffer {
  readonly ptr: number;
  readonly dtype: string;
  values: number[];
  /** The values as a C expression of the index i (filled in main), for inputs too large for a literal. */
  readonly formula?: string;
}

/** Multiples of 1/256 in [-1000/256, 1000/256]: f32 sums of up to 2^11 of them are exact in any order. */
const FORMULA_C = '(float)(((i * 7919LL) % 2001) - 1000) / 256.0f';
const formulaValue = (i: number) => (((i * 7919) % 2001) - 1000) / 256;

function cValues(dtype: string, values: readonly number[]): string {
  const f = (v: number) => (Number.isNaN(v) ? 'NAN' : dtype === 'f32' ? `${Math.fround(v).toPrecision(9)}f` : dtype === 'f64' ? v.toPrecision(17) : `${v}`);
  return values.map(f).join(', ') || '0';
}

/** The column launches recorded on the fake device, run in order on the host, each output's values stored in `buffers`. */
function replay(launches: ReturnType<typeof fake>['cache']['launches'], buffers: Buffer[]): void {
  const find = (p: number) => buffers.find((b) => p >= b.ptr && p < b.ptr + Math.max(1, b.values.length) * ITEMSIZE[b.dtype]!);
  for (const l of launches) {
    expect(l.entry).toBe('fk_col_reduce');
    const [outPtr, xPtr, outer, , inner] = l.args as number[];
    const [gx, gy] = Array.isArray(l.grid) ? (l.grid as number[]) : [l.grid as number, 1];
    const outType = /^extern "C" __global__ void __launch_bounds__\(\d+\) fk_col_reduce\(([\w ]+)\* __restrict__ out, const ([\w ]+)\*/m.exec(l.source)!;
    const outD = Object.keys(CTYPE).find((d) => CTYPE[d] === outType[1])!;
    let out = find(outPtr!);
    if (!out) buffers.push((out = { ptr: outPtr!, dtype: outD, values: new Array(gy! * outer! * inner!).fill(0) })); // a split's partials
    const x = find(xPtr!)!;
    expect(CTYPE[x.dtype], 'the input dtype the kernel reads').toBe(outType[2]);
    const xOff = (xPtr! - x.ptr) / ITEMSIZE[x.dtype]!;
    const outOff = (outPtr! - out.ptr) / ITEMSIZE[out.dtype]!;
    const rest = (l.args as number[]).slice(2);
    const args = [...rest.slice(0, 6).map((v) => `${v}LL`), rest[6]!.toPrecision(17)].join(', ');
    const src = l.source.replace(/#include <cuda_(fp16|bf16)\.h>\n/g, '');
    const xDecl = x.formula ? `alignas(16) static ${CTYPE[x.dtype]} xin[${x.values.length}];` : `alignas(16) static ${CTYPE[x.dtype]} xin[] = {${cValues(x.dtype, x.values)}};`;
    const main = `${xDecl}
alignas(16) static ${CTYPE[out.dtype]} outb[${Math.max(1, out.values.length)}];
int main() {
  ${x.formula ? `for (long long i = 0; i < ${x.values.length}; i++) xin[i] = ${x.formula};` : ''}
  fk_launch_ctas(${gx}, ${gy}, ${l.block as number}, [] { fk_col_reduce(outb + ${outOff}, xin + ${xOff}, ${args}); });
  for (int i = 0; i < ${out.values.length}; i++) printf("%.17g\\n", (double)outb[i]);
}`;
    const got = runOnHost(`${CTA_SHIM}\n${src}`, main);
    expect(got.length).toBe(out.values.length);
    // every launch here writes its whole output buffer (the out tensor, or all S slices of the partials)
    out.values = got;
  }
}

interface Case {
  readonly name: string;
  readonly op: ReduceOp;
  readonly shape: number[];
  readonly dtype: 'f32' | 'f64' | 'i32';
  readonly outDType: 'f32' | 'f64' | 'i64';
  /** The reduced dims (one, or the spatial dims of a channels-last pool). */
  readonly dims: number[];
  /** The view reduced: of the base tensor (shape `shape`), e.g. a permute or a narrow. */
  readonly view?: (t: Tensor) => Tensor;
  readonly prologue?: Expr;
  /** Input indices (of the base tensor) set to NaN, each in a column of its own. */
  readonly nans?: readonly number[];
  /** Launches expected: 2 for a split. */
  readonly launches: number;
  /** SMs the fake device reports (132 unless given): a few make a small tensor plan as a large one does on an H100. */
  readonly sms?: number;
  /** The first launch's CTA (threads along inner x along R) and grid, where the case is about the plan. */
  readonly cta?: { readonly tx: number; readonly ty: number; readonly grid: number };
  /** Inputs by formulaValue (f32, no NaN) instead of random values written into the source. */
  readonly formula?: boolean;
}

const CASES: Case[] = [
  { name: 'f32 mean over dim 0 of [512, 64] (split in 8)', op: 'mean', shape: [512, 64], dtype: 'f32', outDType: 'f32', dims: [0], launches: 2 },
  { name: 'f32 sum of [1, 3001, 8] over dim 1 (split, 4-row batches, an uneven last slice)', op: 'sum', shape: [1, 3001, 8], dtype: 'f32', outDType: 'f32', dims: [1], launches: 2 },
  { name: 'f32 amax over dim 1 of [3, 300, 5] with NaNs (inner 5: scalar loads)', op: 'amax', shape: [3, 300, 5], dtype: 'f32', outDType: 'f32', dims: [1], nans: [7, 300 * 5 + 2, 2 * 1500 + 4 * 5 + 1], launches: 2 }, // columns 2 of o 0, 2 of o 1, 1 of o 2
  { name: 'f32 amin over dim 1 of [3, 600, 3]', op: 'amin', shape: [3, 600, 3], dtype: 'f32', outDType: 'f32', dims: [1], launches: 2 },
  { name: 'i32 sum over dim 1 of [2, 600, 12] -> i64 (f64 partials)', op: 'sum', shape: [2, 600, 12], dtype: 'i32', outDType: 'i64', dims: [1], launches: 2 },
  { name: 'f64 mean over dim 1 of [5, 7, 9] (one launch)', op: 'mean', shape: [5, 7, 9], dtype: 'f64', outDType: 'f64', dims: [1], launches: 1 },
  { name: 'a non-contiguous outer stride: [300, 4, 40] viewed [4, 300, :32] (sOuter 40 < sR 160), sum over dim 1', op: 'sum', shape: [300, 4, 40], dtype: 'f32', outDType: 'f32', dims: [1], view: (t) => t.permute([1, 0, 2]).narrow(2, 0, 32), launches: 2 },
  { name: 'a misaligned narrow [400, 34] -> [400, 32] at 1, mean over dim 0', op: 'mean', shape: [400, 34], dtype: 'f32', outDType: 'f32', dims: [0], view: (t) => t.narrow(1, 1, 32), launches: 2 },
  { name: 'sum of squares over dim 0 of [700, 16] (a prologue)', op: 'sum', shape: [700, 16], dtype: 'f32', outDType: 'f32', dims: [0], prologue: singleOp('square', 1), launches: 2 },
  // narrow tiles over outer x inner (planColumns), one pass: 4 SMs want 16 CTAs
  { name: 'tokens-like: f32 mean over dim 1 of [8, 40, 64] on 4 SMs (8 x 32 threads, 16 CTAs; R 40 over TY 32)', op: 'mean', shape: [8, 40, 64], dtype: 'f32', outDType: 'f32', dims: [1], sms: 4, cta: { tx: 8, ty: 32, grid: 16 }, launches: 1 },
  { name: 'pool-like: f32 mean over H, W of NHWC [4, 12, 12, 64] on 4 SMs (R 144 too short to cut: 8 CTAs, one pass)', op: 'mean', shape: [4, 12, 12, 64], dtype: 'f32', outDType: 'f32', dims: [1, 2], sms: 4, cta: { tx: 8, ty: 32, grid: 8 }, launches: 1 },
  { name: 'odd: f32 amax over dim 1 of [3, 50, 72] with NaNs on 2 SMs (3 narrow tiles a row of outer, the last 2 of 8 vectors)', op: 'amax', shape: [3, 50, 72], dtype: 'f32', outDType: 'f32', dims: [1], nans: [3 * 72 + 5, 3600 + 49 * 72 + 71, 7200 + 64], sms: 2, cta: { tx: 8, ty: 32, grid: 9 }, launches: 1 },
  { name: 'odd: f32 sum over dim 1 of [5, 37, 20] on 2 SMs (inner 20: 5 vectors in a tile of 8, TY 32 over R 37)', op: 'sum', shape: [5, 37, 20], dtype: 'f32', outDType: 'f32', dims: [1], sms: 2, launches: 1 },
  // the bench's channels-last pool at its real shape, in f32 (vec 4): 1024 CTAs of 8 x 32 on 132 SMs, one pass
  { name: 'ConvNeXt-V2 pool: f32 mean over H, W of [32, 12, 12, 1024] on 132 SMs (1024 CTAs of 8 x 32, one pass)', op: 'mean', shape: [32, 12, 12, 1024], dtype: 'f32', outDType: 'f32', dims: [1, 2], cta: { tx: 8, ty: 32, grid: 1024 }, formula: true, launches: 1 },
];

/** The float64 reference of op over `dims` of the strided view (shape, strides, offset) of base values, kept dims in order. */
function reference(c: Case, base: readonly number[], view: Tensor): number[] {
  const { shape, strides, offset } = view;
  const kept = shape.map((_, d) => d).filter((d) => !c.dims.includes(d));
  const n = kept.reduce((a, d) => a * shape[d]!, 1);
  const count = c.dims.reduce((a, d) => a * shape[d]!, 1);
  const acc = new Array<number>(n).fill(c.op === 'amax' ? -Infinity : c.op === 'amin' ? Infinity : 0);
  const idx = new Array<number>(shape.length).fill(0);
  const numel = shape.reduce((a, b) => a * b, 1);
  for (let e = 0; e < numel; e++) {
    let o = 0;
    for (const d of kept) o = o * shape[d]! + idx[d]!;
    let v = base[offset + idx.reduce((a, i, d) => a + i * strides[d]!, 0)]!;
    if (c.prologue) v = v * v;
    const a = acc[o]!;
    acc[o] = c.op === 'amax' ? (Number.isNaN(a) || a >= v ? a : v)
      : c.op === 'amin' ? (Number.isNaN(a) || a <= v ? a : v)
      : a + v;
    for (let d = shape.length - 1; d >= 0 && ++idx[d]! === shape[d]; d--) idx[d] = 0; // the next index, row-major
  }
  return c.op === 'mean' ? acc.map((a) => a / count) : acc;
}

describe(`column reductions replayed on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  CASES.forEach((c, k) => {
    it.skipIf(!hasGxx)(c.name, () => {
      const f = fake();
      const sms = c.sms ?? 132;
      const runtime = (() => ({ properties: () => ({ multiprocessors: sms }) })) as unknown as typeof f.runtime;
      const red = new GeneratedReductions(f.cache, runtime);
      const rng = new Rng(40 + k);
      const numel = c.shape.reduce((a, b) => a * b, 1);
      const values = c.formula ? Array.from({ length: numel }, (_, i) => formulaValue(i))
        : c.dtype === 'i32' ? Array.from({ length: numel }, () => rng.int(-512, 512))
        : Array.from(rng.fillNormal(numel, 1), (v) => (c.dtype === 'f32' ? Math.fround(v) : v));
      for (const i of c.nans ?? []) values[i] = NaN;
      const base = f.t(c.shape, c.dtype);
      const x = c.view ? c.view(base) : base;
      const out = f.t(x.shape.filter((_, d) => !c.dims.includes(d)), c.outDType);
      red.reduce(c.op, x, c.dims, out, c.prologue);
      expect(f.cache.launches.length, 'launches').toBe(c.launches);
      if (c.cta) {
        const first = f.cache.launches[0]!;
        const tx = Number(/const int tx = threadIdx\.x % (\d+),/.exec(first.source)![1]);
        expect({ tx, ty: (first.block as number) / tx, grid: first.grid }, 'the first launch').toEqual(c.cta);
      }
      const buffers: Buffer[] = [
        { ptr: base.storage.devicePtr!, dtype: c.dtype, values, ...(c.formula ? { formula: FORMULA_C } : {}) },
        { ptr: out.storage.devicePtr!, dtype: c.outDType, values: new Array(out.numel).fill(0) },
      ];
      replay(f.cache.launches, buffers);
      const got = buffers[1]!.values;
      const want = reference(c, values, x);
      const R = c.dims.reduce((a, d) => a * x.shape[d]!, 1);
      expect(got.length).toBe(want.length);
      for (let i = 0; i < want.length; i++) {
        const w = want[i]!;
        if (Number.isNaN(w)) expect(got[i], `${c.name} [${i}]`).toBeNaN();
        else if (c.op === 'amax' || c.op === 'amin' || c.dtype === 'i32') expect(got[i], `${c.name} [${i}]`).toBe(w);
        else expect(Math.abs(got[i]! - w), `${c.name} [${i}]: ${got[i]} vs ${w}`).toBeLessThanOrEqual((c.dtype === 'f64' ? 1e-12 : 2e-5) * (1 + Math.abs(w)) * Math.sqrt(R));
      }
      if (c.nans) expect(want.filter(Number.isNaN).length, 'NaN columns').toBe(c.nans.length);
    });
  });
});
