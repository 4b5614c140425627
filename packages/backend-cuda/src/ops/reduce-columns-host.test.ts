/**
 * The column reductions end to end on the host, without a GPU: GeneratedReductions plans and launches on a fake device
 * (test/ops-fake.ts records each launch's source, grid, block and arguments), and each launch is replayed with g++
 * (test/host-cuda.ts: a CTA's threads as std::threads; here __syncthreads as a CTA barrier, __shared__ as static, the
 * grid's y for R's slices) on real host arrays, a split's partials carried from stage 1 to stage 2. Checked against a
 * float64 reference: split and unsplit, uneven last slices, odd inner (scalar loads), a non-contiguous outer stride, a
 * misaligned view, NaN in amax, an i32 sum to i64, a prologue. f32 / f64 / int variants only (no cuda_bf16.h on the
 * host); bf16 and the real memory system are GPU-tested (generated-reduce.gpu.test.ts). Skipped where g++ is absent.
 */
import { Rng, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { hasGxx, runOnHost } from '../../test/host-cuda.js';
import { fake } from '../../test/ops-fake.js';
import { singleOp, type Expr } from './expr.js';
import { GeneratedReductions } from './reduce.js';
import type { ReduceOp } from './reduce-source.js';

/** What the host run needs beyond host-cuda.ts: a CTA-wide barrier, static shared memory, a 2-d grid of any block. */
const CTA_SHIM = `#define __shared__ static
std::barrier<>* fk_cta_bar;
inline void __syncthreads() { fk_cta_bar->arrive_and_wait(); }
inline void fk_launch_ctas(unsigned gx, unsigned gy, unsigned threads, const std::function<void()>& kernel) {
  gridDim = {gx, gy, 1};
  blockDim = {threads, 1, 1};
  for (unsigned by = 0; by < gy; by++)
    for (unsigned bx = 0; bx < gx; bx++) {
      std::barrier<> bar(threads);
      fk_cta_bar = &bar;
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < threads; t++)
        ts.emplace_back([&, t] {
          threadIdx = {t, 0, 0};
          blockIdx = {bx, by, 0};
          kernel();
        });
      for (auto& th : ts) th.join();
    }
}
`;

const CTYPE: Readonly<Record<string, string>> = { f32: 'float', f64: 'double', i32: 'int', i64: 'long long' };
const ITEMSIZE: Readonly<Record<string, number>> = { f32: 4, f64: 8, i32: 4, i64: 8 };

interface Buffer {
  readonly ptr: number;
  readonly dtype: string;
  values: number[];
}

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
    const main = `alignas(16) static ${CTYPE[x.dtype]} xin[] = {${cValues(x.dtype, x.values)}};
alignas(16) static ${CTYPE[out.dtype]} outb[${Math.max(1, out.values.length)}];
int main() {
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
  readonly dim: number;
  /** The view reduced: of the base tensor (shape `shape`), e.g. a permute or a narrow. */
  readonly view?: (t: Tensor) => Tensor;
  readonly prologue?: Expr;
  readonly nans?: boolean;
  /** Launches expected: 2 for a split. */
  readonly launches: number;
}

const CASES: Case[] = [
  { name: 'f32 mean over dim 0 of [512, 64] (split in 8)', op: 'mean', shape: [512, 64], dtype: 'f32', outDType: 'f32', dim: 0, launches: 2 },
  { name: 'f32 sum of [1, 3001, 8] over dim 1 (split, 4-row batches, an uneven last slice)', op: 'sum', shape: [1, 3001, 8], dtype: 'f32', outDType: 'f32', dim: 1, launches: 2 },
  { name: 'f32 amax over dim 1 of [3, 300, 5] with NaNs (inner 5: scalar loads)', op: 'amax', shape: [3, 300, 5], dtype: 'f32', outDType: 'f32', dim: 1, nans: true, launches: 2 },
  { name: 'f32 amin over dim 1 of [3, 600, 3]', op: 'amin', shape: [3, 600, 3], dtype: 'f32', outDType: 'f32', dim: 1, launches: 2 },
  { name: 'i32 sum over dim 1 of [2, 600, 12] -> i64 (f64 partials)', op: 'sum', shape: [2, 600, 12], dtype: 'i32', outDType: 'i64', dim: 1, launches: 2 },
  { name: 'f64 mean over dim 1 of [5, 7, 9] (one launch)', op: 'mean', shape: [5, 7, 9], dtype: 'f64', outDType: 'f64', dim: 1, launches: 1 },
  { name: 'a non-contiguous outer stride: [300, 4, 40] viewed [4, 300, :32] (sOuter 40 < sR 160), sum over dim 1', op: 'sum', shape: [300, 4, 40], dtype: 'f32', outDType: 'f32', dim: 1, view: (t) => t.permute([1, 0, 2]).narrow(2, 0, 32), launches: 2 },
  { name: 'a misaligned narrow [400, 34] -> [400, 32] at 1, mean over dim 0', op: 'mean', shape: [400, 34], dtype: 'f32', outDType: 'f32', dim: 0, view: (t) => t.narrow(1, 1, 32), launches: 2 },
  { name: 'sum of squares over dim 0 of [700, 16] (a prologue)', op: 'sum', shape: [700, 16], dtype: 'f32', outDType: 'f32', dim: 0, prologue: singleOp('square', 1), launches: 2 },
];

/** The float64 reference of op over `dim` of the strided view (shape, strides, offset) of base values. */
function reference(c: Case, base: readonly number[], view: Tensor): number[] {
  const { shape, strides, offset } = view;
  const outShape = shape.filter((_, d) => d !== c.dim);
  const n = outShape.reduce((a, b) => a * b, 1);
  const R = shape[c.dim]!;
  const res: number[] = [];
  for (let o = 0; o < n; o++) {
    // the kept dims' index of output o, row-major
    let rem = o;
    const idx = new Array(shape.length).fill(0);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (d === c.dim) continue;
      idx[d] = rem % shape[d]!;
      rem = Math.floor(rem / shape[d]!);
    }
    let acc = c.op === 'amax' ? -Infinity : c.op === 'amin' ? Infinity : 0;
    for (let r = 0; r < R; r++) {
      idx[c.dim] = r;
      let v = base[offset + idx.reduce((a: number, i: number, d: number) => a + i * strides[d]!, 0)]!;
      if (c.prologue) v = v * v;
      acc = c.op === 'amax' ? (v > acc || Number.isNaN(v) || Number.isNaN(acc) ? (Number.isNaN(acc) ? acc : v) : acc)
        : c.op === 'amin' ? (v < acc || Number.isNaN(v) || Number.isNaN(acc) ? (Number.isNaN(acc) ? acc : v) : acc)
        : acc + v;
    }
    res.push(c.op === 'mean' ? acc / R : acc);
  }
  return res;
}

describe(`column reductions replayed on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  CASES.forEach((c, k) => {
    it.skipIf(!hasGxx)(c.name, () => {
      const f = fake();
      const red = new GeneratedReductions(f.cache, f.runtime);
      const rng = new Rng(40 + k);
      const numel = c.shape.reduce((a, b) => a * b, 1);
      const values = c.dtype === 'i32' ? Array.from({ length: numel }, () => rng.int(-512, 512)) : Array.from(rng.fillNormal(numel, 1), (v) => (c.dtype === 'f32' ? Math.fround(v) : v));
      if (c.nans) for (const i of [7, 300 * 5 + 2, 2 * 1500 + 4 * 5 + 1]) values[i] = NaN; // columns 2 of o 0, 2 of o 1, 1 of o 2
      const base = f.t(c.shape, c.dtype);
      const x = c.view ? c.view(base) : base;
      const out = f.t(x.shape.filter((_, d) => d !== c.dim), c.outDType);
      red.reduce(c.op, x, [c.dim], out, c.prologue);
      expect(f.cache.launches.length, 'launches').toBe(c.launches);
      const buffers: Buffer[] = [
        { ptr: base.storage.devicePtr!, dtype: c.dtype, values },
        { ptr: out.storage.devicePtr!, dtype: c.outDType, values: new Array(out.numel).fill(0) },
      ];
      replay(f.cache.launches, buffers);
      const got = buffers[1]!.values;
      const want = reference(c, values, x);
      expect(got.length).toBe(want.length);
      for (let i = 0; i < want.length; i++) {
        const w = want[i]!;
        if (Number.isNaN(w)) expect(got[i], `${c.name} [${i}]`).toBeNaN();
        else if (c.op === 'amax' || c.op === 'amin' || c.dtype === 'i32') expect(got[i], `${c.name} [${i}]`).toBe(w);
        else expect(Math.abs(got[i]! - w), `${c.name} [${i}]: ${got[i]} vs ${w}`).toBeLessThanOrEqual((c.dtype === 'f64' ? 1e-12 : 2e-5) * (1 + Math.abs(w)) * Math.sqrt(c.shape[c.dim]!));
      }
      if (c.nans) expect(want.filter(Number.isNaN).length).toBe(3);
    });
  });
});
