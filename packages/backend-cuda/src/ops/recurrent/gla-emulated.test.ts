/**
 * The GLA kernels' host path and index math without a GPU: each call goes through the op registry to GlaKernels on the
 * fake device (its launch recorded with the packed arguments), then test/gla-emulator.ts runs that launch — the
 * recorded grid, the source's #defines, every pointer and stride as packed — over CPU copies of the tensors, and the
 * result is held to the float64 CPU backend's op on the same values: o and the final state or the pool rows.
 * Shapes cover partial V tiles, K not a multiple of the row groups, odd V (scalar state access), permuted q, packed
 * sequences with an empty one, pool slots with -1 padding, chunks cut by sequence ends, GLA-2.7B's head dims, and the
 * GPU test's decode batches with its plans (132 SMs), pool and i32 indices. The emulator throws where two CTAs race
 * on a state element (two sequences on one pool slot: the H100 run's decode bs 7 failure, issue 32).
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Tensor, callOp, opRoute, type OpArg } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { GLA27, GLA_DECODE_BATCHES, glaDecodeSlots } from '../../../test/gla-cases.js';
import { GlaRaceError, emulateGla, type EmuPtr } from '../../../test/gla-emulator.js';
import { fake } from '../../../test/ops-fake.js';
import { planGla } from './gla-plan.js';
import { registerRecurrentKernels } from './register.js';

const cpu = new CpuBackend();

interface Case {
  readonly B: number;
  readonly T: number;
  readonly H: number;
  readonly K: number;
  readonly V: number;
  readonly cu?: number[];
  /** Pool slots (ssm_state_indices) and the pool's size; else an initial state when `init`. */
  readonly idx?: number[];
  readonly slots?: number;
  readonly init?: boolean;
  readonly final?: boolean;
  /** q stored [B, H, T, K] and seen through a permute. */
  readonly permuteQ?: boolean;
  readonly scale?: number;
  readonly idxI32?: boolean;
}

const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);
const rnd = (n: number, seed: number, f: (x: number) => number = (x) => x) => Float64Array.from({ length: n }, (_, i) => f(Math.sin(seed * 12.9898 + i * 78.233) * 1.3));

/** The whole storage of a CPU tensor as float64 (index 0 = storage element 0). */
function hostData(t: Tensor): Float64Array {
  const flat = new Tensor({ storage: t.storage, dtype: t.dtype, shape: [t.storage.byteLength / t.itemsize] });
  const d = flat.toFloat64Array();
  flat.dispose();
  return d;
}

function check(op: 'fused_recurrent_gla' | 'chunk_gla', c: Case): void {
  const N = c.cu ? c.cu.length - 1 : c.B;
  const { B, T, H, K, V } = c;
  // CPU operands (f64) and their fake-device twins with the same shapes and strides
  const qStore = c.permuteQ ? [B, H, T, K] : [B, T, H, K];
  const mk = (shape: number[], seed: number, f?: (x: number) => number) => Tensor.fromArray(cpu, rnd(numel(shape), seed, f), shape, 'f64');
  const view = (t: Tensor) => (c.permuteQ ? t.permute([0, 2, 1, 3]) : t);
  const qc = view(mk(qStore, 1));
  const kc = mk([B, T, H, K], 2);
  const vc = mk([B, T, H, V], 3);
  const gc = mk([B, T, H, K], 4, (x) => -Math.abs(x) * 0.4 - 0.01); // log-space forget gates (< 0)
  const pooled = c.idx !== undefined;
  const sShape = pooled ? [c.slots!, H, K, V] : [N, H, K, V];
  const s0c = pooled || c.init ? Tensor.fromArray(cpu, rnd(numel(sShape), 5), sShape, 'f32') : null;
  const poolBefore = s0c ? hostData(s0c) : null;
  const cuc = c.cu ? Tensor.fromArray(cpu, c.cu, [c.cu.length], 'i32') : null;
  const idxDType = c.idxI32 ? 'i32' : 'i64';
  const idxc = c.idx ? Tensor.fromArray(cpu, c.idx, [c.idx.length], idxDType) : null;
  const attrs = { scale: c.scale ?? null, output_final_state: !pooled && (c.final ?? true), ...(op === 'chunk_gla' ? { chunk_size: 64 } : {}) };

  const f = fake();
  registerRecurrentKernels(f.backend.opKernels!, f.cache, f.runtime);
  const mem = new Map<number, { data: Float64Array; itemsize: number; bytes: number }>();
  const twin = (t: Tensor | null, dtype: Tensor['dtype']): Tensor | null => {
    if (!t) return null;
    const base = Tensor.empty(f.backend, [t.storage.byteLength / t.itemsize], dtype);
    const v = new Tensor({ storage: base.storage, dtype, shape: [...t.shape], strides: [...t.strides], offset: t.offset });
    mem.set(base.storage.devicePtr!, { data: hostData(t), itemsize: base.itemsize, bytes: base.storage.byteLength });
    return v;
  };
  const ins: OpArg[] = [twin(qc, 'f32'), twin(kc, 'f32'), twin(vc, 'f32'), twin(gc, 'f32'), twin(s0c, 'f32'), twin(cuc, 'i32'), twin(idxc, idxDType)];
  // the float64 op refuses live sequences sharing a slot (they race on a device): those cases only check that the
  // emulator catches the race, before any comparison
  const live = (c.idx ?? []).filter((s) => s >= 0);
  const sharesSlot = new Set(live).size !== live.length;
  const want = sharesSlot ? [] : callOp(op, [qc, kc, vc, gc, s0c, cuc, idxc], attrs); // after the twins copied the pool: it updates it in place
  expect(opRoute(op, ins, attrs)).toEqual({ via: 'kernel' });
  const got = callOp(op, ins, attrs);
  for (const t of got) mem.set(t.storage.devicePtr!, { data: new Float64Array(t.numel).fill(Number.NaN), itemsize: t.itemsize, bytes: t.storage.byteLength });
  expect(f.cache.launches.length).toBe(1);
  const l = f.cache.launches[0]!;
  const a = l.args as number[];
  const ptr = (address: number): EmuPtr | null => {
    if (address === 0) return null;
    for (const [base, r] of mem) if (address >= base && address < base + r.bytes) return { data: r.data, off: (address - base) / r.itemsize };
    throw new Error(`address ${address} is in no tensor`);
  };
  const def = (name: string) => Number(new RegExp(`#define ${name} (\\d+)`).exec(l.source)![1]);
  const plan = planGla(op === 'chunk_gla' ? 'chunk' : 'recurrent', { N, H, K, V }, def('FK_VEC'), 132);
  expect([def('FK_K'), def('FK_BV'), def('FK_THREADS')]).toEqual([K, plan.bv, plan.threads]);
  expect(l.grid).toEqual(plan.grid);
  expect(l.block).toBe(plan.threads);
  emulateGla(plan, {
    T: a[23]!, H: a[24]!, K, V: a[25]!, scale: a[26]!,
    o: ptr(a[0]!)!, q: ptr(a[1]!)!, k: ptr(a[2]!)!, v: ptr(a[3]!)!, g: ptr(a[4]!)!,
    qs: a.slice(5, 8), ks: a.slice(8, 11), vs: a.slice(11, 14), gs: a.slice(14, 17),
    sIn: ptr(a[17]!), sInStride: a[18]!, sOut: ptr(a[19]!), sOutStride: a[20]!,
    cu: ptr(a[21]!), idx: ptr(a[22]!),
  });
  if (sharesSlot) throw new Error('two live sequences shared a pool slot and the emulator did not report a race');
  // one expect per array, not per element (a GLA-2.7B pool is millions of them)
  const close = (x: Float64Array, y: Float64Array, what: string) => {
    expect(x.length, what).toBe(y.length);
    const bad = y.findIndex((w, i) => !(Math.abs(x[i]! - w) < 1e-6 * (1 + Math.abs(w))));
    expect(bad, bad < 0 ? what : `${what} [${bad}]: ${x[bad]} vs ${y[bad]}`).toBe(-1);
  };
  close(mem.get(got[0]!.storage.devicePtr!)!.data, want[0]!.toFloat64Array(), 'o');
  if (pooled) {
    // rows named by the indices hold the CPU's final states; every other row (padding's too) is untouched
    const after = mem.get(ins[4] instanceof Tensor ? ins[4].storage.devicePtr! : 0)!.data;
    close(after, hostData(s0c!), 'pool');
    const per = H * K * V;
    for (let sl = 0; sl < c.slots!; sl++) {
      if (c.idx!.includes(sl)) continue;
      const changed = after.subarray(sl * per, (sl + 1) * per).findIndex((x, i) => !Object.is(x, poolBefore![sl * per + i]));
      expect(changed, `slot ${sl} untouched`).toBe(-1);
    }
  } else if (attrs.output_final_state) close(mem.get(got[1]!.storage.devicePtr!)!.data, want[1]!.toFloat64Array(), 'final state');
}

describe('GLA kernels: the recorded launch emulated on the host vs the float64 CPU op', () => {
  for (const op of ['fused_recurrent_gla', 'chunk_gla'] as const) {
    it(`${op}: batch rows, an initial and a final state, a partial V tile`, () => check(op, { B: 3, T: 5, H: 2, K: 8, V: 12, init: true }));
    it(`${op}: K 40 (not a multiple of the row groups), V 10 (2-float access), permuted q, scale 0.3`, () =>
      check(op, { B: 2, T: 19, H: 1, K: 40, V: 10, permuteQ: true, scale: 0.3 }));
    it(`${op}: V 7 (scalar access), no initial state, no final state`, () => check(op, { B: 1, T: 18, H: 2, K: 16, V: 7, final: false }));
    it(`${op}: packed sequences (one empty, lengths across chunk ends) over a pool with a -1 padding row`, () =>
      check(op, { B: 1, T: 40, H: 2, K: 24, V: 16, cu: [0, 17, 17, 33, 40], idx: [5, 0, -1, 2], slots: 6 }));
    it(`${op}: GLA-2.7B head dims (K 256, V 512), 3 packed sequences over a pool`, { timeout: 120_000 }, () =>
      check(op, { B: 1, T: op === 'chunk_gla' ? 21 : 4, H: 1, K: 256, V: 512, cu: op === 'chunk_gla' ? [0, 3, 20, 21] : [0, 1, 3, 4], idx: [1, 3, -1], slots: 4 }));
  }
  it('fused_recurrent_gla: decode rows (B one-token rows) over a pool, i32 indices', () =>
    check('fused_recurrent_gla', { B: 5, T: 1, H: 3, K: 32, V: 64, idx: [4, -1, 0, 2, 1], slots: 6, idxI32: true }));
  it(`fused_recurrent_gla: the GPU test's GLA-2.7B decode batches (${GLA_DECODE_BATCHES.join(', ')}) with their plans, pools and slots`, { timeout: 120_000 }, () => {
    // bs 64 on one head: the same plan (BV 32 from bs 7 up) over a 5x smaller pool
    for (const D of GLA_DECODE_BATCHES) check('fused_recurrent_gla', { B: D, T: 1, ...GLA27, ...(D === 64 ? { H: 1 } : {}), ...glaDecodeSlots(D), idxI32: true });
  });
  it('two sequences on one pool slot are a race between their CTAs (the H100 run of issue 32: bs 7 on slots [2, -1, 2, 7, 2, 7, 2])', () => {
    expect(() => check('fused_recurrent_gla', { B: 7, T: 1, ...GLA27, idx: [2, -1, 2, 7, 2, 7, 2], slots: 10, idxI32: true })).toThrow(GlaRaceError);
    expect(() => check('chunk_gla', { B: 1, T: 6, H: 1, K: 8, V: 16, cu: [0, 2, 6], idx: [1, 1], slots: 2 })).toThrow(/CTA \(x 0, head 0, seq 1\) (reads|writes) state element/);
  });
});
