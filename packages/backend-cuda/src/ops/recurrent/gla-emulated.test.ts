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
import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { GLA27, GLA_DECODE_BATCHES, glaDecodeSlots, type RecurrentCaseShape } from '../../../test/gla-cases.js';
import { GlaRaceError, emulateGla } from '../../../test/gla-emulator.js';
import { checkEmulated, cpu, def, f64, numel, rnd } from '../../../test/recurrent-emulation.js';
import { planGla } from './gla-plan.js';

interface Case extends RecurrentCaseShape {
  /** q stored [B, H, T, K] and seen through a permute. */
  readonly permuteQ?: boolean;
  readonly idxI32?: boolean;
}

function check(op: 'fused_recurrent_gla' | 'chunk_gla', c: Case): void {
  const N = c.cu ? c.cu.length - 1 : c.B;
  const { B, T, H, K, V } = c;
  const qc = c.permuteQ ? f64([B, H, T, K], 1).permute([0, 2, 1, 3]) : f64([B, T, H, K], 1);
  const kc = f64([B, T, H, K], 2);
  const vc = f64([B, T, H, V], 3);
  const gc = f64([B, T, H, K], 4, (x) => -Math.abs(x) * 0.4 - 0.01); // log-space forget gates (< 0)
  const pooled = c.idx !== undefined;
  const sShape = pooled ? [c.slots!, H, K, V] : [N, H, K, V];
  const s0c = pooled || c.init ? Tensor.fromArray(cpu, rnd(numel(sShape), 5), sShape, 'f32') : null;
  const cuc = c.cu ? Tensor.fromArray(cpu, c.cu, [c.cu.length], 'i32') : null;
  const idxDType = c.idxI32 ? 'i32' : 'i64';
  const idxc = c.idx ? Tensor.fromArray(cpu, c.idx, [c.idx.length], idxDType) : null;
  const attrs = { scale: c.scale ?? null, output_final_state: !pooled && (c.final ?? true), ...(op === 'chunk_gla' ? { chunk_size: 64 } : {}) };
  // the float64 op refuses live sequences sharing a slot (they race on a device): those cases only check that the
  // emulator catches the race, before any comparison
  const live = (c.idx ?? []).filter((s) => s >= 0);
  const sharesSlot = new Set(live).size !== live.length;
  checkEmulated(
    op,
    [[qc, 'f32'], [kc, 'f32'], [vc, 'f32'], [gc, 'f32'], s0c && [s0c, 'f32'], cuc && [cuc, 'i32'], idxc && [idxc, idxDType]],
    attrs,
    (l, ptr) => {
      const a = l.args;
      const plan = planGla(op === 'chunk_gla' ? 'chunk' : 'recurrent', { N, H, K, V }, def(l.source, 'FK_VEC'), 132);
      expect([def(l.source, 'FK_K'), def(l.source, 'FK_BV'), def(l.source, 'FK_THREADS')]).toEqual([K, plan.bv, plan.threads]);
      expect(l.grid).toEqual(plan.grid);
      expect(l.block).toBe(plan.threads);
      emulateGla(plan, {
        T: a[23]!, H: a[24]!, K, V: a[25]!, scale: a[26]!,
        o: ptr(a[0]!)!, q: ptr(a[1]!)!, k: ptr(a[2]!)!, v: ptr(a[3]!)!, g: ptr(a[4]!)!,
        qs: a.slice(5, 8), ks: a.slice(8, 11), vs: a.slice(11, 14), gs: a.slice(14, 17),
        sIn: ptr(a[17]!), sInStride: a[18]!, sOut: ptr(a[19]!), sOutStride: a[20]!,
        cu: ptr(a[21]!), idx: ptr(a[22]!),
      });
    },
    pooled ? { index: 4, named: live, per: H * K * V } : undefined,
    sharesSlot,
  );
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
