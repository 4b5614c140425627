/**
 * The pooled form of the conv and gated-delta-rule ops (vLLM's causal_conv1d_fn with query_start_loc / cache_indices /
 * has_initial_state, causal_conv1d_update with conv_state_indices, the delta rule with cu_seqlens / ssm_state_indices):
 * hand values, then random packed sequences over a pool against the unpooled op on each sequence alone (its pool row as
 * the initial state), padding rows (-1) and unnamed rows untouched, and the distinct-slot rule.
 */
import { describe, expect, it } from 'vitest';
import { F, type DType } from '@fastkernels/core';
import { causalConv1d, causalConv1dUpdate, fusedRecurrentGatedDeltaRule, fusedRecurrentKda } from './ops/recurrent.js';
import { cpu, expectClose, randn, Rng, tensor, values, type Tensor } from './test-helpers.js';

const logSigmoid = (x: number) => -Math.log1p(Math.exp(-x));
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const rows = (a: number[], per: number, s: number) => a.slice(s * per, (s + 1) * per);

describe('causal_conv1d over a conv state pool (vLLM causal_conv1d_fn varlen)', () => {
  it('hand-computed: two packed sequences, one from its row, one padding', () => {
    // W = 3, D = 1, pool rows of 2: slot 0 = [5, 6], slot 1 = [7, 8]
    const pool = tensor([5, 6, 7, 8], [2, 1, 2]);
    const w = tensor([1, 10, 100], [1, 3]);
    const x = tensor([1, 2, 3, 4], [1, 1, 4]);
    const [y] = causalConv1d(cpu, x, w, { initial_states: pool, query_start_loc: tensor([0, 1, 3, 4], [4], 'i32'), cache_indices: tensor([1, -1, 0], [3], 'i64') });
    // seq 0 (slot 1): x' = [7, 8, 1] -> 7 + 80 + 100; seq 1 (padding): zeros then [2, 3] -> 200, 20 + 300; seq 2 (slot 0): [5, 6, 4]
    expect(values(y)).toEqual([187, 200, 320, 5 + 60 + 400]);
    expect(values(pool)).toEqual([6, 4, 8, 1]);
    // has_initial_state false: zeros, the row still written
    const pool2 = tensor([5, 6], [1, 1, 2]);
    const [y2] = causalConv1d(cpu, tensor([1], [1, 1, 1]), w, { initial_states: pool2, query_start_loc: tensor([0, 1], [2], 'i32'), cache_indices: tensor([0], [1], 'i32'), has_initial_state: tensor([0], [1], 'bool') });
    expect(values(y2)).toEqual([100]);
    expect(values(pool2)).toEqual([0, 1]);
  });

  it('random packed sequences equal one causal_conv1d each from its row; other rows untouched; silu, bias, dtypes', () => {
    const rng = new Rng(11);
    for (const dtype of ['f32', 'bf16'] as DType[]) {
      const [D, W, slots] = [5, 4, 7];
      const lens = [6, 0, 1, 9, 3];
      const idx = [3, 6, -1, 0, 5];
      const his = [1, 1, 1, 0, 1];
      const T = lens.reduce((a, b) => a + b, 0);
      const x = randn(rng, [1, D, T], dtype);
      const w = randn(rng, [D, W], dtype);
      const b = randn(rng, [D], dtype);
      const pool = randn(rng, [slots, D, W - 1], 'f32');
      const before = values(pool);
      const per = D * (W - 1);
      const cu = lens.reduce((a, n) => [...a, a[a.length - 1]! + n], [0]);
      const want: number[] = [];
      const fin: number[][] = [];
      lens.forEach((n, i) => {
        const init = idx[i]! >= 0 && his[i] ? rows(before, per, idx[i]!) : new Array(per).fill(0);
        const [y, f] = causalConv1d(cpu, x.narrow(2, cu[i]!, n).to('f64'), w.to('f64'), { bias: b.to('f64'), initial_states: tensor(init, [1, D, W - 1], 'f64'), return_final_states: true, activation: 'silu' });
        // [1, D, n] -> per channel runs, packed back along T below
        fin.push(values(f!));
        want.push(...values(y));
      });
      const [y] = causalConv1d(cpu, x, w, { bias: b, initial_states: pool, query_start_loc: tensor(cu, [cu.length], 'i64'), cache_indices: tensor(idx, [idx.length], 'i32'), has_initial_state: tensor(his, [his.length], 'bool'), activation: 'silu' });
      expect(y.shape).toEqual([1, D, T]);
      // out [1, D, T]: channel d of sequence i at d * T + cu[i] + t
      const got = values(y);
      const packed: number[] = [];
      lens.forEach((n, i) => { for (let d = 0; d < D; d++) for (let t = 0; t < n; t++) packed.push(got[d * T + cu[i]! + t]!); });
      expectClose(packed, want, dtype === 'f32' ? 1e-5 : 2e-2, dtype === 'f32' ? 1e-5 : 2e-2);
      const after = values(pool);
      idx.forEach((s, i) => { if (s >= 0) expectClose(rows(after, per, s), fin[i]!, 1e-2, 1e-2); });
      for (const s of [1, 2, 4]) expect(rows(after, per, s)).toEqual(rows(before, per, s));
    }
  });

  it('rejects two live sequences on one row, indices outside the pool, the pooled args without a pool', () => {
    const rng = new Rng(2);
    const x = randn(rng, [1, 3, 5]);
    const w = randn(rng, [3, 4]);
    const pool = randn(rng, [4, 3, 3]);
    const cu = tensor([0, 2, 5], [3], 'i32');
    expect(() => causalConv1d(cpu, x, w, { initial_states: pool, query_start_loc: cu, cache_indices: tensor([1, 1], [2], 'i32') })).toThrow(/cache_indices\[1\] = 1 repeats cache_indices\[0\]/);
    expect(() => causalConv1d(cpu, x, w, { initial_states: pool, query_start_loc: cu, cache_indices: tensor([1, 4], [2], 'i32') })).toThrow(/cache_indices\[1\] = 4 is outside the pool of 4 slots/);
    expect(() => causalConv1d(cpu, x, w, { query_start_loc: cu })).toThrow(/pooled form/);
    expect(() => F.causalConv1d(x, w, { initial_states: pool, cache_indices: tensor([1, 2], [2], 'i32'), query_start_loc: cu, return_final_states: true })).toThrow(/return_final_states must be false/);
    expect(() => F.causalConv1d(x, w, { initial_states: randn(rng, [4, 2, 3]), cache_indices: tensor([1, 2], [2], 'i32'), query_start_loc: cu })).toThrow(/conv state pool \[4, 2, 3\] must be \[slots, 3, state_len >= 3\]/);
  });
});

describe('causal_conv1d_update over a conv state pool (conv_state_indices)', () => {
  it('decode rows equal the unpooled update on each row; padding reads and writes nothing; state_len > W - 1', () => {
    const rng = new Rng(3);
    const [B, D, W, S, slots] = [4, 6, 4, 5, 6];
    const x = randn(rng, [B, D]);
    const w = randn(rng, [D, W]);
    const b = randn(rng, [D]);
    const pool = randn(rng, [slots, D, S]);
    const before = values(pool);
    const per = D * S;
    const idx = [5, -1, 0, 2];
    const out = F.causalConv1dUpdate(x, pool, w, { bias: b, activation: 'silu', conv_state_indices: tensor(idx, [B], 'i64') });
    expect(out).toHaveLength(1);
    expect(out[0]!.shape).toEqual([B, D]);
    const after = values(pool);
    idx.forEach((s, i) => {
      const st = tensor(s >= 0 ? rows(before, per, s) : new Array(per).fill(0), [1, D, S], 'f64');
      const [y, next] = causalConv1dUpdate(cpu, x.narrow(0, i, 1), st, w, { bias: b, activation: 'silu' }) as [Tensor, Tensor];
      expectClose(values(out[0]!).slice(i * D, (i + 1) * D), values(y), 1e-5, 1e-5);
      if (s >= 0) expectClose(rows(after, per, s), values(next), 1e-6, 1e-6);
    });
    for (const s of [1, 3, 4]) expect(rows(after, per, s)).toEqual(rows(before, per, s));
    expect(() => F.causalConv1dUpdate(x, pool, w, { conv_state_indices: tensor([1, 2, 1, -1], [B], 'i32') })).toThrow(/conv_state_indices\[2\] = 1 repeats conv_state_indices\[0\]/);
    expect(() => F.causalConv1dUpdate(x, pool, w, { conv_state_indices: tensor([1, 2], [2], 'i32') })).toThrow(/cache indices has shape \[2\], expected \[4\]/);
  });
});

describe('gated delta rule over a state pool (cu_seqlens, ssm_state_indices)', () => {
  const inputs = (rng: Rng, T: number, H: number, HV: number, K: number, V: number, channel: boolean, B = 1) => ({
    q: randn(rng, [B, T, H, K], 'f64'),
    k: F.l2Norm(randn(rng, [B, T, H, K], 'f64')),
    v: randn(rng, [B, T, HV, V], 'f64'),
    g: tensor(Array.from(rng.fillNormal(B * T * HV * (channel ? K : 1), 1), (x) => logSigmoid(x) / 2), channel ? [B, T, HV, K] : [B, T, HV], 'f64'),
    beta: tensor(Array.from(rng.fillNormal(B * T * HV, 1), sigmoid), [B, T, HV], 'f64'),
  });

  it('hand-computed: a one-dim step from a pool row, and a padding row', () => {
    const pool = tensor([2, 9], [2, 1, 1, 1]);
    const one = (a: number[]) => tensor(a, [2, 1, 1, 1], 'f64');
    // row 0 (slot 1): S = 9 * 0.5 = 4.5, u = 1 * (5 - 4.5) = 0.5, S = 5, o = 5; row 1 padding: S = 0 -> u = 0.5 * 2 -> o = 1
    const [o] = fusedRecurrentGatedDeltaRule(cpu, one([1, 1]), one([1, 1]), one([5, 2]), tensor([Math.log(0.5), 0], [2, 1, 1], 'f64'), tensor([1, 0.5], [2, 1, 1], 'f64'), { scale: 1, initial_state: pool, ssm_state_indices: tensor([1, -1], [2], 'i32') });
    expectClose(values(o), [5, 1], 1e-12, 0);
    expect(values(pool)).toEqual([2, 5]);
  });

  for (const [name, fn, chunk, channel] of [
    ['fused_recurrent_gated_delta_rule', fusedRecurrentGatedDeltaRule, 'chunkGatedDeltaRule', false],
    ['fused_recurrent_kda', fusedRecurrentKda, 'chunkKda', true],
  ] as const) {
    it(`${name} (and its chunk_ op through the registry): packed sequences over a pool equal one call each from its row`, () => {
      const rng = new Rng(channel ? 8 : 7);
      const [H, HV, K, V, slots] = [2, 4, 5, 3, 7];
      const lens = [4, 0, 1, 6];
      const idx = [6, 2, -1, 0];
      const T = lens.reduce((a, b) => a + b, 0);
      const cu = lens.reduce((a, n) => [...a, a[a.length - 1]! + n], [0]);
      const x = inputs(rng, T, H, HV, K, V, channel);
      const pool = randn(rng, [slots, HV, K, V], 'f32', 0.5);
      const before = values(pool);
      const per = HV * K * V;
      for (const l2 of [false, true]) {
        const want: number[] = [];
        const fin: number[][] = [];
        lens.forEach((n, i) => {
          const part = (t: Tensor) => t.narrow(1, cu[i]!, n);
          const s0 = tensor(idx[i]! >= 0 ? rows(before, per, idx[i]!) : new Array(per).fill(0), [1, HV, K, V], 'f32');
          const [o, s] = fn(cpu, part(x.q), part(x.k), part(x.v), part(x.g), part(x.beta), { initial_state: s0, output_final_state: true, use_qk_l2norm_in_kernel: l2 });
          want.push(...values(o));
          fin.push(values(s!));
        });
        for (const via of ['cpu', 'registry'] as const) {
          pool.copy_(tensor(before, [slots, HV, K, V], 'f32'));
          const opts = { initial_state: pool, cu_seqlens: tensor(cu, [cu.length], 'i32'), ssm_state_indices: tensor(idx, [idx.length], 'i64'), use_qk_l2norm_in_kernel: l2 };
          const out = via === 'cpu' ? fn(cpu, x.q, x.k, x.v, x.g, x.beta, opts) : F[chunk](x.q, x.k, x.v, x.g, x.beta, opts);
          expect(out).toHaveLength(1);
          expectClose(values(out[0]!), want, 1e-9, 1e-9);
          const after = values(pool);
          idx.forEach((s, i) => { if (s >= 0) expectClose(rows(after, per, s), fin[i]!, 1e-6, 1e-6); });
          for (const s of [1, 3, 4, 5]) expect(rows(after, per, s)).toEqual(rows(before, per, s));
        }
      }
    });
  }

  it('decode rows (B one-token rows) over a pool; the distinct-slot rule; shapes the pool must have', () => {
    const rng = new Rng(9);
    const [B, H, HV, K, V] = [3, 1, 2, 4, 4];
    const x = inputs(rng, 1, H, HV, K, V, false, B);
    const pool = randn(rng, [5, HV, K, V], 'f32', 0.5);
    const before = values(pool);
    const per = HV * K * V;
    const [o] = F.fusedRecurrentGatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, { initial_state: pool, ssm_state_indices: tensor([4, -1, 1], [3], 'i32') });
    expect(o!.shape).toEqual([B, 1, HV, V]);
    const s0 = tensor([...rows(before, per, 4), ...new Array(per).fill(0), ...rows(before, per, 1)], [B, HV, K, V], 'f32');
    const [wo, ws] = fusedRecurrentGatedDeltaRule(cpu, x.q, x.k, x.v, x.g, x.beta, { initial_state: s0, output_final_state: true });
    expectClose(values(o!), values(wo), 1e-9, 1e-9);
    const after = values(pool);
    expectClose(rows(after, per, 4), rows(values(ws!), per, 0), 1e-6, 1e-6);
    expectClose(rows(after, per, 1), rows(values(ws!), per, 2), 1e-6, 1e-6);
    for (const s of [0, 2, 3]) expect(rows(after, per, s)).toEqual(rows(before, per, s));
    expect(() => F.fusedRecurrentGatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, { initial_state: pool, ssm_state_indices: tensor([2, -1, 2], [3], 'i32') })).toThrow(/ssm_state_indices\[2\] = 2 repeats ssm_state_indices\[0\]/);
    expect(() => F.fusedRecurrentGatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, { initial_state: pool, ssm_state_indices: tensor([0, 1, 5], [3], 'i32') })).toThrow(/ssm_state_indices\[2\] = 5 is outside the pool of 5 slots/);
    expect(() => F.fusedRecurrentGatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, { initial_state: randn(rng, [5, HV, K, V + 1], 'f32'), ssm_state_indices: tensor([0, 1, 2], [3], 'i32') })).toThrow(/the state pool\) \[5, 2, 4, 5\] must be \[slots, 2, 4, 4\]/);
    expect(() => F.fusedRecurrentGatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, { initial_state: pool, ssm_state_indices: tensor([0, 1, 2], [3], 'i32'), output_final_state: true })).toThrow(/output_final_state must be false/);
  });
});
