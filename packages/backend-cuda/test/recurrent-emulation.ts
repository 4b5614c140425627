/**
 * The harness the recurrent kernels' emulated tests share (gla-emulated, gdn-emulated): an op runs on the float64 CPU
 * backend (want) and through the CUDA kernels on the fake device, whose one recorded launch an emulator
 * (test/gla-emulator.ts, test/gdn-emulator.ts) runs over CPU copies of the tensors — every pointer the launch packed
 * resolves to the copy it points into. Then every output is held to the CPU's, and a state pool's rows: the rows the
 * indices name to the CPU's, every other row (padding's too) untouched bit for bit.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Tensor, callOp, opRoute, type DType, type OpArg } from '@fastkernels/core';
import { expect } from 'vitest';
import type { EmuPtr } from './gla-emulator.js';
import { fake } from './ops-fake.js';
import { registerRecurrentKernels } from '../src/ops/recurrent/register.js';

export const cpu = new CpuBackend();
export const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);
/** Deterministic values in about [-1.3, 1.3], through f. */
export const rnd = (n: number, seed: number, f: (x: number) => number = (x) => x) => Float64Array.from({ length: n }, (_, i) => f(Math.sin(seed * 12.9898 + i * 78.233) * 1.3));
/** A float64 CPU tensor of rnd values. */
export const f64 = (shape: number[], seed: number, f?: (x: number) => number) => Tensor.fromArray(cpu, rnd(numel(shape), seed, f), shape, 'f64');
/** A #define's value in a launch's source. */
export const def = (source: string, name: string) => Number(new RegExp(`#define ${name} (\\d+)`).exec(source)![1]);

/** The whole storage of a CPU tensor as float64 (index 0 = storage element 0). */
export function hostData(t: Tensor): Float64Array {
  const flat = new Tensor({ storage: t.storage, dtype: t.dtype, shape: [t.storage.byteLength / t.itemsize] });
  const d = flat.toFloat64Array();
  flat.dispose();
  return d;
}

/** An operand: its CPU tensor (f64 values, any layout) and the dtype of its fake-device twin. */
export type Operand = [Tensor, DType] | null;

/** The one launch the fake device recorded. */
export interface RecordedLaunch {
  readonly entry: string;
  readonly source: string;
  readonly grid: unknown;
  readonly block: unknown;
  readonly args: number[];
}

/** A state pool operand to compare after: its index among the operands, the rows the indices name, a row's size. */
export interface PoolCheck {
  readonly index: number;
  readonly named: number[];
  readonly per: number;
}

/** One expect an array, not one an element (a production-head pool is millions of them). */
function expectAllClose(x: Float64Array, y: Float64Array, what: string): void {
  expect(x.length, what).toBe(y.length);
  const bad = y.findIndex((w, i) => !(Math.abs(x[i]! - w) < 1e-6 * (1 + Math.abs(w))));
  expect(bad, bad < 0 ? what : `${what} [${bad}]: ${x[bad]} vs ${y[bad]}`).toBe(-1);
}

/**
 * Runs `op` on the CPU (want) and through the CUDA kernels on the fake device (one recorded launch, emulated), and
 * compares every output; `pool` is compared after, rows in `named` to the CPU's, the others untouched. `expectRace`:
 * two CTAs must race (the emulator throws) before anything is compared; the CPU op, which refuses such a pool, is not run.
 */
export function checkEmulated(op: string, operands: Operand[], attrs: Record<string, unknown>, emulate: (launch: RecordedLaunch, ptr: (address: number) => EmuPtr | null) => void, pool?: PoolCheck, expectRace = false): void {
  const f = fake();
  registerRecurrentKernels(f.backend.opKernels!, f.cache, f.runtime);
  const mem = new Map<number, { data: Float64Array; itemsize: number; bytes: number }>();
  const twin = (o: Operand): Tensor | null => {
    if (!o) return null;
    const [t, dtype] = o;
    const base = Tensor.empty(f.backend, [t.storage.byteLength / t.itemsize], dtype);
    const v = new Tensor({ storage: base.storage, dtype, shape: [...t.shape], strides: [...t.strides], offset: t.offset });
    mem.set(base.storage.devicePtr!, { data: hostData(t), itemsize: base.itemsize, bytes: base.storage.byteLength });
    return v;
  };
  const ins: OpArg[] = operands.map(twin);
  const cpuIns = operands.map((o) => (o ? o[0] : null));
  const poolBefore = pool ? hostData(cpuIns[pool.index]!) : null;
  const want = expectRace ? [] : callOp(op, cpuIns, attrs); // after the twins copied the pool: it updates it in place
  expect(opRoute(op, ins, attrs)).toEqual({ via: 'kernel' });
  const got = callOp(op, ins, attrs);
  for (const t of got) if (!mem.has(t.storage.devicePtr!)) mem.set(t.storage.devicePtr!, { data: new Float64Array(t.storage.byteLength / t.itemsize).fill(Number.NaN), itemsize: t.itemsize, bytes: t.storage.byteLength });
  expect(f.cache.launches.length).toBe(1);
  const l = f.cache.launches[0]!;
  const ptr = (address: number): EmuPtr | null => {
    if (address === 0) return null;
    for (const [base, r] of mem) if (address >= base && address < base + Math.max(r.bytes, 1)) return { data: r.data, off: (address - base) / r.itemsize };
    throw new Error(`address ${address} is in no tensor`);
  };
  emulate({ entry: l.entry, source: l.source, grid: l.grid, block: l.block, args: l.args as number[] }, ptr);
  if (expectRace) throw new Error('two live sequences shared a pool row and the emulator did not report a race');
  expect(got.length, 'outputs').toBe(want.length);
  got.forEach((g, i) => expectAllClose(mem.get(g.storage.devicePtr!)!.data.subarray(0, g.numel), want[i]!.toFloat64Array(), `output ${i}`));
  if (pool) {
    const p = ins[pool.index] as Tensor;
    const after = mem.get(p.storage.devicePtr!)!.data;
    expectAllClose(after, hostData(cpuIns[pool.index]!), 'pool');
    const rows = after.length / pool.per;
    for (let sl = 0; sl < rows; sl++) {
      if (pool.named.includes(sl)) continue;
      const changed = after.subarray(sl * pool.per, (sl + 1) * pool.per).findIndex((x, i) => !Object.is(x, poolBefore![sl * pool.per + i]));
      expect(changed, `pool row ${sl} untouched`).toBe(-1);
    }
  }
}
