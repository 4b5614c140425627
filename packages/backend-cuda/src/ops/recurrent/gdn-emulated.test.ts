/**
 * The gated-DeltaNet kernels' host path and index math without a GPU: each call goes through the op registry to
 * GdnKernels on the fake device (its launch recorded with the packed arguments), then test/gdn-emulator.ts runs that
 * launch — the recorded grid, the source's #defines, every pointer and stride as packed — over CPU copies of the
 * tensors, and the result is held to the float64 CPU backend's op on the same values: the outputs, and the pool rows
 * (rows no index names, padding's included, untouched bit for bit). Shapes cover grouped value heads, l2norm in the
 * kernel or not, partial V tiles, K not a multiple of the row groups, odd V (scalar state access), permuted q, packed
 * sequences with an empty one, -1 padding, i32 / i64 indices, Qwen3-Next-80B's heads; the conv's decode rows and
 * packed prefills over a pool (a transposed x, state_len > W - 1, has_initial_state), its batch-row forms with
 * initial / final states, and the race two sequences on one row are. KDA (fused_recurrent_kda, chunk_kda: g a decay a
 * key channel) over the same shapes, a permuted g, and Kimi-Linear-48B's heads.
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { emulateConv, emulateGdn } from '../../../test/gdn-emulator.js';
import { GlaRaceError } from '../../../test/gla-emulator.js';
import type { ConvCaseShape, RecurrentCaseShape } from '../../../test/gla-cases.js';
import { checkEmulated, cpu, def, f64, numel, rnd, type Operand } from '../../../test/recurrent-emulation.js';
import { DELTA_OPS, planGdn, type DeltaOp } from './gdn-plan.js';

interface DeltaCase extends RecurrentCaseShape {
  readonly op?: DeltaOp;
  /** KDA's g [B, H, T, K] seen as [B, T, H, K] (strided tokens and heads, channels contiguous). */
  readonly permuteG?: boolean;
  readonly HV: number;
  readonly l2norm?: boolean;
  readonly permuteQ?: boolean;
  readonly idxDType?: DType;
  readonly race?: boolean;
}

function checkDelta(c: DeltaCase): void {
  const { B, T, H, HV, K, V } = c;
  const N = c.cu ? c.cu.length - 1 : B;
  const pooled = c.idx !== undefined;
  const q = c.permuteQ ? f64([B, H, T, K], 1).permute([0, 2, 1, 3]) : f64([B, T, H, K], 1);
  // |k| ~ 1 without the in-kernel l2norm (the delta rule's domain)
  const k = c.l2norm ? f64([B, T, H, K], 2) : f64([B, T, H, K], 2, (x) => x / Math.sqrt(K));
  const v = f64([B, T, HV, V], 3);
  const op = c.op ?? 'fused_recurrent_gated_delta_rule';
  const { kind, gate } = DELTA_OPS[op];
  const logDecay = (x: number) => -Math.log1p(Math.exp(x)) / 2;
  // KDA: a decay a key channel
  const g = gate === 'head' ? f64([B, T, HV], 4, logDecay) : c.permuteG ? f64([B, HV, T, K], 4, logDecay).permute([0, 2, 1, 3]) : f64([B, T, HV, K], 4, logDecay);
  const beta = f64([B, T, HV], 5, (x) => 1 / (1 + Math.exp(-x)));
  const sShape = pooled ? [c.slots!, HV, K, V] : [N, HV, K, V];
  const s0 = pooled || c.init ? Tensor.fromArray(cpu, rnd(numel(sShape), 6, (x) => x / 2), sShape, 'f32') : null;
  const cu = c.cu ? Tensor.fromArray(cpu, c.cu, [c.cu.length], 'i32') : null;
  const idxDType = c.idxDType ?? 'i64';
  const idx = c.idx ? Tensor.fromArray(cpu, c.idx, [c.idx.length], idxDType) : null;
  const attrs = { scale: c.scale ?? null, output_final_state: !pooled && (c.final ?? true), use_qk_l2norm_in_kernel: c.l2norm ?? false };
  checkEmulated(
    op,
    [[q, 'bf16'], [k, 'bf16'], [v, 'bf16'], [g, 'f32'], [beta, 'bf16'], s0 && [s0, 'f32'], cu && [cu, 'i32'], idx && [idx, idxDType]],
    attrs,
    (l, ptr) => {
      const a = l.args;
      const plan = planGdn({ N, HV, K, V }, def(l.source, 'FK_VEC'), 132, kind, gate);
      expect(l.entry).toBe(`fk_${gate === 'channel' ? 'kda' : 'gdn'}_${kind}`);
      expect(def(l.source, 'FK_KDA')).toBe(gate === 'channel' ? 1 : 0);
      expect(def(l.source, 'FK_C')).toBe(plan.chunk || 1);
      expect([def(l.source, 'FK_K'), def(l.source, 'FK_BV'), def(l.source, 'FK_THREADS'), def(l.source, 'FK_L2')]).toEqual([K, plan.bv, plan.threads, c.l2norm ? 1 : 0]);
      expect(l.grid).toEqual(plan.grid);
      expect(l.block).toBe(plan.threads);
      emulateGdn(plan, {
        T: a[27]!, HV: a[28]!, V: a[29]!, R: a[30]!, scale: a[31]!, K, l2norm: def(l.source, 'FK_L2') === 1, kda: def(l.source, 'FK_KDA') === 1,
        o: ptr(a[0]!)!, q: ptr(a[1]!)!, k: ptr(a[2]!)!, v: ptr(a[3]!)!, g: ptr(a[4]!)!, beta: ptr(a[5]!)!,
        qs: a.slice(6, 9), ks: a.slice(9, 12), vs: a.slice(12, 15), gs: a.slice(15, 18), bs: a.slice(18, 21),
        sIn: ptr(a[21]!), sInStride: a[22]!, sOut: ptr(a[23]!), sOutStride: a[24]!, cu: ptr(a[25]!), idx: ptr(a[26]!),
      });
    },
    pooled ? { index: 5, named: c.idx!.filter((s) => s >= 0), per: HV * K * V } : undefined,
    c.race,
  );
}

interface ConvCase extends ConvCaseShape {
  readonly final?: boolean;
  readonly silu?: boolean;
  /** causal_conv1d_update's x as [B, D] (L 1). */
  readonly rank2?: boolean;
  readonly race?: boolean;
}

function checkConv(c: ConvCase): void {
  const { B, D, L, W } = c;
  const pooled = c.idx !== undefined;
  const S = c.S ?? W - 1;
  const x = c.rank2 ? f64([B, D], 1) : c.transposed ? f64([B, L, D], 1).transpose(1, 2) : f64([B, D, L], 1);
  const w = f64([D, W], 2, (v) => v / 2);
  const bias = c.bias ? f64([D], 3) : null;
  const stShape = pooled ? [c.slots!, D, S] : [B, D, S];
  const st = pooled || c.init || c.op === 'causal_conv1d_update' ? Tensor.fromArray(cpu, rnd(numel(stShape), 4), stShape, 'f32') : null;
  const cu = c.cu ? Tensor.fromArray(cpu, c.cu, [c.cu.length], 'i64') : null;
  const idx = c.idx ? Tensor.fromArray(cpu, c.idx, [c.idx.length], 'i32') : null;
  const his = c.his ? Tensor.fromArray(cpu, c.his, [c.his.length], 'bool') : null;
  const activation = c.silu === false ? null : 'silu';
  const operands: Operand[] =
    c.op === 'causal_conv1d'
      ? [[x, 'bf16'], [w, 'bf16'], bias && [bias, 'bf16'], st && [st, 'f32'], cu && [cu, 'i64'], idx && [idx, 'i32'], his && [his, 'bool']]
      : [[x, 'bf16'], [st!, 'f32'], [w, 'bf16'], bias && [bias, 'bf16'], idx && [idx, 'i32']];
  const attrs = c.op === 'causal_conv1d' ? { activation, return_final_states: !pooled && (c.final ?? true) } : { activation };
  checkEmulated(
    c.op,
    operands,
    attrs,
    (l, ptr) => {
      const a = l.args;
      emulateConv({
        W: def(l.source, 'FK_W'), ct: def(l.source, 'FK_CT'), tg: def(l.source, 'FK_TG'), silu: def(l.source, 'FK_SILU') === 1,
        grid: l.grid as number[], block: l.block as number,
        out: ptr(a[0]!)!, x: ptr(a[1]!)!, w: ptr(a[2]!)!, bias: ptr(a[3]!), xs: a.slice(4, 7),
        sIn: ptr(a[7]!), sIns: a.slice(8, 11), sOut: ptr(a[11]!), sOuts: a.slice(12, 15),
        cu: ptr(a[15]!), idx: ptr(a[16]!), his: ptr(a[17]!), L: a[18]!, D: a[19]!, S: a[20]!,
      });
      expect(def(l.source, 'FK_W')).toBe(W);
    },
    pooled ? { index: c.op === 'causal_conv1d' ? 3 : 1, named: c.idx!.filter((s) => s >= 0), per: D * S } : undefined,
    c.race,
  );
}

describe('gated delta rule kernel: the recorded launch emulated on the host vs the float64 CPU op', () => {
  it('batch rows, grouped value heads (HV 4 over H 2), initial and final state, l2norm, a partial V tile', () => checkDelta({ B: 3, T: 5, H: 2, HV: 4, K: 8, V: 12, init: true, l2norm: true }));
  it('K 40 (not a multiple of the row groups), V 10 (2-float access), permuted q, scale 0.3, no l2norm', () => checkDelta({ B: 2, T: 7, H: 1, HV: 2, K: 40, V: 10, permuteQ: true, scale: 0.3 }));
  it('V 7 (scalar access), no initial state, no final state', () => checkDelta({ B: 1, T: 6, H: 2, HV: 2, K: 16, V: 7, final: false, l2norm: true }));
  it('packed sequences (one empty) over a pool with a -1 padding row, i32 indices', () =>
    checkDelta({ B: 1, T: 14, H: 2, HV: 4, K: 24, V: 16, cu: [0, 5, 5, 11, 14], idx: [5, 0, -1, 2], slots: 6, l2norm: true, idxDType: 'i32' }));
  it('decode rows over a pool, i64 indices', () => checkDelta({ B: 5, T: 1, H: 1, HV: 3, K: 32, V: 64, idx: [4, -1, 0, 2, 1], slots: 6, l2norm: true }));
  it("Qwen3-Next-80B's head dims (K 128, V 128, HV / H = 2): decode rows over a pool", { timeout: 120_000 }, () =>
    checkDelta({ B: 3, T: 1, H: 1, HV: 2, K: 128, V: 128, idx: [2, -1, 0], slots: 4, l2norm: true, idxDType: 'i32' }));
  it('two sequences on one pool row are a race between their CTAs', () => {
    expect(() => checkDelta({ B: 3, T: 1, H: 1, HV: 1, K: 8, V: 16, idx: [1, -1, 1], slots: 2, race: true })).toThrow(GlaRaceError);
    expect(() => checkDelta({ op: 'chunk_gated_delta_rule', B: 1, T: 6, H: 1, HV: 1, K: 8, V: 16, cu: [0, 2, 6], idx: [1, 1], slots: 2, race: true })).toThrow(GlaRaceError);
  });
});

describe('chunked gated delta rule kernel (chunk_gated_delta_rule): the recorded launch emulated vs the float64 CPU op', () => {
  const op = 'chunk_gated_delta_rule' as const;
  it('batch rows across chunk ends (T 37 = 2 chunks of 16 + 5), grouped value heads, initial and final state, l2norm', () => checkDelta({ op, B: 2, T: 37, H: 2, HV: 4, K: 8, V: 12, init: true, l2norm: true }));
  it('K 40, V 10 (2-float access), permuted q, scale 0.3, prenormed k, no state in', () => checkDelta({ op, B: 1, T: 20, H: 1, HV: 2, K: 40, V: 10, permuteQ: true, scale: 0.3 }));
  it('V 7 (scalar access), no state at all', () => checkDelta({ op, B: 1, T: 17, H: 2, HV: 2, K: 16, V: 7, final: false, l2norm: true }));
  it('packed sequences (one empty, ends inside and across chunks) over a pool with a -1 padding row', () =>
    checkDelta({ op, B: 1, T: 45, H: 2, HV: 4, K: 24, V: 16, cu: [0, 17, 17, 40, 45], idx: [5, 0, -1, 2], slots: 6, l2norm: true, idxDType: 'i32' }));
  it("Qwen3-Next-80B's head dims (K 128, V 128): two packed prefills over a pool", { timeout: 120_000 }, () =>
    checkDelta({ op, B: 1, T: 21, H: 1, HV: 2, K: 128, V: 128, cu: [0, 3, 21], idx: [1, 3], slots: 4, l2norm: true }));
});

describe('KDA kernels (fused_recurrent_kda, chunk_kda: a decay a key channel): the recorded launch emulated vs the float64 CPU op', () => {
  for (const op of ['fused_recurrent_kda', 'chunk_kda'] as const) {
    it(`${op}: batch rows across chunk ends, grouped value heads, initial and final state, l2norm, a partial V tile`, () => checkDelta({ op, B: 2, T: 37, H: 2, HV: 4, K: 8, V: 12, init: true, l2norm: true }));
    it(`${op}: K 40 (not a multiple of the row groups), V 10, permuted q and g, scale 0.3, no l2norm, no state in`, () =>
      checkDelta({ op, B: 1, T: 20, H: 1, HV: 2, K: 40, V: 10, permuteQ: true, permuteG: true, scale: 0.3 }));
    it(`${op}: V 7 (scalar access), no state at all`, () => checkDelta({ op, B: 1, T: 17, H: 2, HV: 2, K: 16, V: 7, final: false, l2norm: true }));
    it(`${op}: packed sequences (one empty, ends inside and across chunks) over a pool with a -1 padding row, i32 indices`, () =>
      checkDelta({ op, B: 1, T: 45, H: 2, HV: 4, K: 24, V: 16, cu: [0, 17, 17, 40, 45], idx: [5, 0, -1, 2], slots: 6, l2norm: true, idxDType: 'i32' }));
  }
  it('fused_recurrent_kda: decode rows over a pool, i64 indices', () => checkDelta({ op: 'fused_recurrent_kda', B: 5, T: 1, H: 1, HV: 3, K: 32, V: 64, idx: [4, -1, 0, 2, 1], slots: 6, l2norm: true }));
  it("Kimi-Linear-48B's head dims (K = V = 128, HV = H): decode rows and two packed prefills over a pool", { timeout: 120_000 }, () => {
    checkDelta({ op: 'fused_recurrent_kda', B: 3, T: 1, H: 2, HV: 2, K: 128, V: 128, idx: [2, -1, 0], slots: 4, l2norm: true, idxDType: 'i32' });
    checkDelta({ op: 'chunk_kda', B: 1, T: 21, H: 1, HV: 1, K: 128, V: 128, cu: [0, 3, 21], idx: [1, 3], slots: 4, l2norm: true });
  });
  it('two sequences on one pool row are a race between their CTAs', () => {
    expect(() => checkDelta({ op: 'fused_recurrent_kda', B: 3, T: 1, H: 1, HV: 1, K: 8, V: 16, idx: [1, -1, 1], slots: 2, race: true })).toThrow(GlaRaceError);
    expect(() => checkDelta({ op: 'chunk_kda', B: 1, T: 6, H: 1, HV: 1, K: 8, V: 16, cu: [0, 2, 6], idx: [1, 1], slots: 2, race: true })).toThrow(GlaRaceError);
  });
});

describe('causal conv kernel: the recorded launch emulated on the host vs the float64 CPU op', () => {
  it('causal_conv1d: packed prefills (one empty, one shorter than the width) over a pool, a transposed x, padding, has_initial_state', () =>
    checkConv({ op: 'causal_conv1d', B: 1, D: 40, L: 19, W: 4, cu: [0, 7, 7, 9, 19], idx: [3, 0, -1, 5], slots: 6, his: [1, 1, 1, 0], transposed: true, bias: true }));
  it('causal_conv1d: decode rows over a pool (L 1, the batch rows the sequences), no bias, no activation', () =>
    checkConv({ op: 'causal_conv1d', B: 4, D: 130, L: 1, W: 4, idx: [2, -1, 0, 4], slots: 5, silu: false }));
  it('causal_conv1d: batch rows with initial and final states; without states; width 1', () => {
    checkConv({ op: 'causal_conv1d', B: 2, D: 33, L: 11, W: 4, init: true, bias: true });
    checkConv({ op: 'causal_conv1d', B: 2, D: 9, L: 3, W: 3, final: false });
    checkConv({ op: 'causal_conv1d', B: 1, D: 5, L: 4, W: 1 });
  });
  it('causal_conv1d_update: decode rows over a pool with state_len 5 > W - 1, [B, D] x; a new state out without a pool', () => {
    checkConv({ op: 'causal_conv1d_update', B: 4, D: 20, L: 1, W: 4, S: 5, idx: [1, 3, -1, 0], slots: 4, rank2: true, bias: true });
    checkConv({ op: 'causal_conv1d_update', B: 2, D: 20, L: 3, W: 4, S: 6, bias: true });
  });
  it('two sequences on one pool row are a race between their CTAs', () => {
    expect(() => checkConv({ op: 'causal_conv1d_update', B: 2, D: 8, L: 1, W: 4, idx: [1, 1], slots: 2, rank2: true, race: true })).toThrow(GlaRaceError);
  });
});
