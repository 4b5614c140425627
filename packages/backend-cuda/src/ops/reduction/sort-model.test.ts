/**
 * A host model of fk_sort_segments (sort-source.ts) and of the long sort (long-sort-source.ts), step for step: the f32
 * key, the bitonic network over (key, position) pairs, padding, the stages planSort chooses and the launches of
 * planLongSort (chunk-local passes, global steps), checked against the float64 CPU backend's sort / topk on
 * inputs with NaN, ±inf, ±0 and many ties. It checks the algorithm (the staged topk's tie order above all) where no GPU
 * is; the CUDA source itself is checked by nvcc here and on the GPU by along-dim.gpu.test.ts.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Tensor, callOp } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { planLongSort, planSort, type SortStage } from './sort-plan.js';
import { SORT_MAX } from './sort-source.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
/** fk_key for f32: NaN the largest, -0 = +0, order-preserving bits. */
function key(x: number): number {
  if (Number.isNaN(x)) return 0xffffffff;
  f32[0] = x === 0 ? 0 : x;
  const b = u32[0]!;
  return (b & 0x80000000 ? ~b : b | 0x80000000) >>> 0;
}

/** One block: segment `seg` of a line (values xs, original indices ids or null), its first K pairs. */
function segment(xs: Float64Array, ids: Float64Array | null, s: SortStage, seg: number, desc: boolean): [number[], number[]] {
  const { P, segLen, K } = s;
  const start = seg * segLen;
  const n = Math.min(segLen, s.D - start);
  const k = new Array<number>(P);
  const pos = new Array<number>(P);
  for (let p = 0; p < P; p++) {
    const real = p < n && !(ids && ids[start + p]! < 0);
    k[p] = real ? (desc ? ~key(xs[start + p]!) >>> 0 : key(xs[start + p]!)) : 0xffffffff;
    pos[p] = p;
  }
  for (let kk = 2; kk <= P; kk <<= 1) {
    for (let j = kk >> 1; j > 0; j >>= 1) {
      for (let t = 0; t < P >> 1; t++) {
        const a = 2 * t - (t & (j - 1));
        const b = a + j;
        const after = k[a]! > k[b]! || (k[a] === k[b] && pos[a]! > pos[b]!);
        if (after === ((a & kk) === 0)) {
          [k[a], k[b]] = [k[b]!, k[a]!];
          [pos[a], pos[b]] = [pos[b]!, pos[a]!];
        }
      }
    }
  }
  const v: number[] = [];
  const i: number[] = [];
  for (let r = 0; r < K; r++) {
    const p = pos[r]!;
    let real = p < n;
    let at = 0;
    if (real) {
      at = ids ? ids[start + p]! : start + p;
      real = at >= 0;
    }
    v.push(xs[start + (real ? p : 0)]!);
    i.push(real ? at : -1);
  }
  return [v, i];
}

/** The staged kernel on one line. */
function modelTopk(line: Float64Array, k: number, desc: boolean): [number[], number[]] {
  const stages = planSort(line.length, k);
  if (typeof stages === 'string') throw new Error(stages);
  let xs = line;
  let ids: Float64Array | null = null;
  for (const s of stages) {
    const v: number[] = [];
    const i: number[] = [];
    for (let seg = 0; seg < s.nSeg; seg++) {
      const [sv, si] = segment(xs, ids, s, seg, desc);
      v.push(...sv);
      i.push(...si);
    }
    xs = Float64Array.from(v);
    ids = Float64Array.from(i);
  }
  return [[...xs], [...ids!]];
}

/** The long sort's launches on one line (init, planLongSort's steps, out). */
function modelLongSort(line: Float64Array, k: number, desc: boolean): [number[], number[]] {
  const plan = planLongSort(line.length);
  if (typeof plan === 'string') throw new Error(plan);
  const { P } = plan;
  const keys = Array.from({ length: P }, (_, p) => (p < line.length ? (desc ? ~key(line[p]!) >>> 0 : key(line[p]!)) : 0xffffffff));
  const pos = Array.from({ length: P }, (_, p) => p);
  const step = (a: number, b: number, up: boolean) => {
    const after = keys[a]! > keys[b]! || (keys[a] === keys[b] && pos[a]! > pos[b]!);
    if (after === up) {
      [keys[a], keys[b]] = [keys[b]!, keys[a]!];
      [pos[a], pos[b]] = [pos[b]!, pos[a]!];
    }
  };
  for (const s of plan.steps) {
    if (!s.local) {
      for (let t = 0; t < P / 2; t++) {
        const a = 2 * t - (t & (s.j - 1));
        step(a, a + s.j, (a & s.k) === 0);
      }
      continue;
    }
    for (let chunk = 0; chunk < P / SORT_MAX; chunk++) {
      const base = chunk * SORT_MAX;
      for (let kk = s.kLo; kk <= s.kHi; kk *= 2) {
        for (let j = kk < SORT_MAX ? kk >> 1 : SORT_MAX / 2; j > 0; j >>= 1) {
          for (let t = 0; t < SORT_MAX / 2; t++) {
            const a = 2 * t - (t & (j - 1));
            step(base + a, base + a + j, ((base + a) & kk) === 0);
          }
        }
      }
    }
  }
  return [pos.slice(0, k).map((p) => line[p]!), pos.slice(0, k)];
}

const cpu = new CpuBackend();
function specials(n: number, seed: number): Float64Array {
  const pool = [NaN, Infinity, -Infinity, 0, -0, 1, -1, 0.5, 2, -2];
  let s = seed >>> 0;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
  return Float64Array.from({ length: n }, () => (next() < 0.5 ? pool[Math.floor(next() * pool.length)]! : Math.fround(next() * 4 - 2)));
}

describe('the segmented bitonic sort, modelled on the host, vs the CPU backend', () => {
  const cases: [number, number][] = [[1, 1], [7, 7], [33, 5], [1000, 1000], [4096, 17], [9001, 30], [20000, 2048], [70000, 64], [5000, 1]];
  for (const [D, k] of cases) {
    for (const desc of [true, false]) {
      it(`D=${D}, k=${k}, ${desc ? 'largest' : 'smallest'}: values and indices equal the reference`, () => {
        const line = specials(D, D * 31 + k);
        const x = Tensor.fromArray(cpu, line, [D], 'f32');
        const [rv, ri] = callOp('topk', [x], { k, largest: desc });
        const [v, i] = modelTopk(Float64Array.from(x.toFloat64Array()), k, desc);
        expect(i).toEqual([...ri!.toFloat64Array()]);
        expect(v.map((a) => (Number.isNaN(a) ? 'NaN' : a))).toEqual([...rv!.toFloat64Array()].map((a) => (Number.isNaN(a) ? 'NaN' : a)));
        for (const t of [x, rv!, ri!]) t.dispose();
      });
    }
  }
});

describe('the global-memory long sort, modelled on the host, vs the CPU backend', () => {
  for (const [D, k] of [[4097, 4097], [9001, 9001], [20000, 3000]] as const) {
    for (const desc of [true, false]) {
      it(`D=${D}, k=${k}, ${desc ? 'descending' : 'ascending'}`, () => {
        const x = Tensor.fromArray(cpu, specials(D, D + k), [D], 'f32');
        const [rv, ri] = callOp('topk', [x], { k, largest: desc });
        const [v, i] = modelLongSort(Float64Array.from(x.toFloat64Array()), k, desc);
        expect(i).toEqual([...ri!.toFloat64Array()]);
        expect(v.map((a) => (Number.isNaN(a) ? 'NaN' : a))).toEqual([...rv!.toFloat64Array()].map((a) => (Number.isNaN(a) ? 'NaN' : a)));
        for (const t of [x, rv!, ri!]) t.dispose();
      });
    }
  }
});
