import { describe, expect, it } from 'vitest';
import { roundToDType, type DType, type Tensor } from '@fastkernels/core';
import { conv1d } from './ops/conv.js';
import { causalConv1d, causalConv1dUpdate, chunkGla, fusedRecurrentGatedDeltaRule, fusedRecurrentGla, fusedRecurrentKda } from './ops/recurrent.js';
import { cpu, expectClose, randn, relayout, Rng, tensor, values } from './test-helpers.js';

const silu = (x: number) => x / (1 + Math.exp(-x));
const logSigmoid = (x: number) => -Math.log1p(Math.exp(-x));

describe('causal_conv1d', () => {
  it('hand-computed: past-only taps, bias, silu, initial and final states', () => {
    const x = tensor([1, 2, 3, 4], [1, 1, 4]);
    const w = tensor([1, 10, 100], [1, 3]);
    expect(values(causalConv1d(cpu, x, w)[0])).toEqual([100, 210, 321, 432]);
    const [y, fin] = causalConv1d(cpu, x, w, { bias: tensor([1], [1]), initial_states: tensor([5, 6], [1, 1, 2]), return_final_states: true, activation: 'silu' });
    expectClose(values(y), [5 + 60 + 100 + 1, 6 + 10 + 200 + 1, 1 + 20 + 300 + 1, 2 + 30 + 400 + 1].map(silu), 1e-5, 1e-6);
    expect(values(fin!)).toEqual([3, 4]);
    const [, fin1] = causalConv1d(cpu, tensor([1], [1, 1, 1]), w, { initial_states: tensor([5, 6], [1, 1, 2]), return_final_states: true });
    expect(values(fin1!)).toEqual([6, 1]);
  });

  it('equals the reference definition (depthwise conv1d padded by W - 1, first L outputs), for dtypes and layouts', () => {
    const rng = new Rng(1);
    for (const dtype of ['f32', 'bf16', 'f16'] as DType[]) {
      const x = randn(rng, [2, 5, 9], dtype);
      const w = randn(rng, [5, 4], dtype);
      const b = randn(rng, [5], dtype);
      const full = values(conv1d(cpu, x.to('f64'), w.to('f64').unsqueeze(1), b.to('f64'), { padding: 3, groups: 5 })); // [2, 5, 12]
      const want: number[] = [];
      for (let r = 0; r < 10; r++) for (let t = 0; t < 9; t++) want.push(silu(full[r * 12 + t]!));
      const [y] = causalConv1d(cpu, relayout(x, 'transposed'), relayout(w, 'stepped'), { bias: b, activation: 'silu' });
      expect(y.dtype).toBe(dtype);
      expectClose(values(y), want.map((v) => roundToDType(v, dtype)), 1e-6, 1e-6);
    }
  });

  it('chunked calls carried by final_states equal one call; errors', () => {
    const rng = new Rng(2);
    const x = randn(rng, [1, 3, 10], 'f64');
    const w = randn(rng, [3, 4], 'f64');
    const [whole] = causalConv1d(cpu, x, w);
    const [a, st] = causalConv1d(cpu, x.narrow(2, 0, 6), w, { return_final_states: true });
    const [b2] = causalConv1d(cpu, x.narrow(2, 6, 4), w, { initial_states: st! });
    const W = values(whole);
    const A = values(a);
    const B2 = values(b2);
    for (let d = 0; d < 3; d++) expectClose([...A.slice(d * 6, d * 6 + 6), ...B2.slice(d * 4, d * 4 + 4)], W.slice(d * 10, d * 10 + 10), 1e-12, 1e-12);
    expect(() => causalConv1d(cpu, x, randn(rng, [4, 4]))).toThrow(/causal_conv1d: weight \[4, 4\] must be \[3, width\] for x \[1, 3, 10\]/);
    expect(() => causalConv1d(cpu, x, w, { initial_states: randn(rng, [1, 3, 2]) })).toThrow(/initial_states has shape \[1, 3, 2\], expected \[1, 3, 3\]/);
  });
});

describe('causal_conv1d_update (decode steps)', () => {
  it('hand-computed: one token over a state longer than width - 1', () => {
    const st = tensor([7, 5, 6], [1, 1, 3]); // state_len 3, width 3: taps see the last 2 state columns
    const [y, next] = causalConv1dUpdate(cpu, tensor([1], [1, 1]), st, tensor([1, 10, 100], [1, 3])) as [Tensor, Tensor];
    expect(y.shape).toEqual([1, 1]);
    expect(values(y)).toEqual([5 + 60 + 100]);
    expect(values(next)).toEqual([5, 6, 1]);
  });

  it('prefill then token-by-token updates equal one causal_conv1d over the whole sequence', () => {
    const rng = new Rng(7);
    const [B, D, L, W, S] = [2, 3, 8, 4, 5];
    const x = randn(rng, [B, D, L], 'f64');
    const w = randn(rng, [D, W], 'f64');
    const b = randn(rng, [D], 'f64');
    const [whole] = causalConv1d(cpu, x, w, { bias: b, activation: 'silu' });
    const W0 = values(whole);
    // a zero state of length S is what a fresh sequence has; feed 3 tokens at once, then one at a time
    let state = tensor(new Array(B * D * S).fill(0), [B, D, S], 'f64');
    const got: number[][] = Array.from({ length: B * D }, () => []);
    const [y3, s3] = causalConv1dUpdate(cpu, x.narrow(2, 0, 3), state, w, { bias: b, activation: 'silu' }) as [Tensor, Tensor];
    values(y3).forEach((v, i) => got[Math.floor(i / 3)]!.push(v));
    state = s3;
    for (let t = 3; t < L; t++) {
      const [y, s] = causalConv1dUpdate(cpu, relayout(x.select(2, t).contiguous(), 'transposed'), state, w, { bias: b, activation: 'silu' }) as [Tensor, Tensor];
      values(y).forEach((v, i) => got[i]!.push(v));
      state = s;
    }
    expectClose(got.flat(), W0, 1e-12, 1e-12);
    // the state holds the last S inputs
    const X = values(x);
    expect(values(state)).toEqual(Array.from({ length: B * D * S }, (_, i) => X[Math.floor(i / S) * L + L - S + (i % S)]));
    expect(() => causalConv1dUpdate(cpu, tensor([1], [1, 1]), tensor([1], [1, 1, 1]), tensor([1, 2, 3], [1, 3]))).toThrow(/conv_state length 1 must be at least width - 1 = 2/);
  });
});

/** o_t = scale * (sum_i q_t[i] exp(sum_{r<=t} g_r[i]) S0[i, :] + sum_{s<=t} sum_i q_t[i] k_s[i] exp(sum_{s<r<=t} g_r[i]) v_s), directly. */
function naiveGla(Q: number[], Kt: number[], Vt: number[], G: number[], S0: number[] | null, B: number, T: number, H: number, K: number, V: number, scale: number): number[] {
  const out: number[] = [];
  const at = (b: number, t: number, h: number, i: number, D: number) => ((b * T + t) * H + h) * D + i;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < H; h++) {
        for (let j = 0; j < V; j++) {
          let o = 0;
          for (let i = 0; i < K; i++) {
            let gsum = 0;
            for (let r = 0; r <= t; r++) gsum += G[at(b, r, h, i, K)]!;
            if (S0) o += Q[at(b, t, h, i, K)]! * Math.exp(gsum) * S0[((b * H + h) * K + i) * V + j]!;
            for (let s = 0; s <= t; s++) {
              let d = 0;
              for (let r = s + 1; r <= t; r++) d += G[at(b, r, h, i, K)]!;
              o += Q[at(b, t, h, i, K)]! * Kt[at(b, s, h, i, K)]! * Math.exp(d) * Vt[at(b, s, h, j, V)]!;
            }
          }
          out.push(scale * o);
        }
      }
    }
  }
  return out;
}

describe('gated linear attention (fused_recurrent_gla / chunk_gla)', () => {
  it('hand-computed one-dim recurrence', () => {
    const q = tensor([1, 1], [1, 2, 1, 1], 'f64');
    const k = tensor([1, 2], [1, 2, 1, 1], 'f64');
    const v = tensor([3, 4], [1, 2, 1, 1], 'f64');
    const g = tensor([Math.log(0.5), Math.log(0.5)], [1, 2, 1, 1], 'f64');
    const [o, s] = fusedRecurrentGla(cpu, q, k, v, g, { scale: 1, output_final_state: true });
    expectClose(values(o), [3, 9.5], 1e-12, 0);
    expectClose(values(s!), [9.5], 1e-12, 0);
    expectClose(values(chunkGla(cpu, q, k, v, g, { scale: 1, chunk_size: 1 })[0]), [3, 9.5], 1e-12, 0);
  });

  it('recurrent, chunked (chunk sizes 1, 3, 4, 64) and the direct formula agree, with an initial state', () => {
    const rng = new Rng(3);
    const [B, T, H, K, V] = [2, 7, 2, 4, 3];
    const q = randn(rng, [B, T, H, K], 'f64');
    const k = randn(rng, [B, T, H, K], 'f64');
    const v = randn(rng, [B, T, H, V], 'f64');
    const g = tensor(Array.from(rng.fillNormal(B * T * H * K, 1), logSigmoid), [B, T, H, K], 'f64');
    const s0 = randn(rng, [B, H, K, V], 'f32');
    const want = naiveGla(values(q), values(k), values(v), values(g), values(s0), B, T, H, K, V, 0.5);
    const [o, s] = fusedRecurrentGla(cpu, relayout(q, 'transposed'), k, relayout(v, 'stepped'), g, { scale: 0.5, initial_state: s0, output_final_state: true });
    expectClose(values(o), want, 1e-10, 1e-10);
    expect(s!.dtype).toBe('f32');
    for (const C of [1, 3, 4, 64]) {
      const [oc, sc] = chunkGla(cpu, q, relayout(k, 'narrowed'), v, relayout(g, 'transposed'), { scale: 0.5, initial_state: s0, output_final_state: true, chunk_size: C });
      expectClose(values(oc), values(o), 1e-10, 1e-10);
      expectClose(values(sc!), values(s!), 1e-6, 1e-6);
    }
  });

  it('two calls carried by the final state equal one call; bf16 output; default scale', () => {
    const rng = new Rng(4);
    const [B, T, H, K, V] = [1, 6, 1, 8, 4];
    const q = randn(rng, [B, T, H, K], 'bf16');
    const k = randn(rng, [B, T, H, K], 'bf16');
    const v = randn(rng, [B, T, H, V], 'bf16');
    const g = tensor(Array.from(rng.fillNormal(B * T * H * K, 1), logSigmoid), [B, T, H, K], 'bf16');
    const [whole] = chunkGla(cpu, q, k, v, g, { chunk_size: 4 });
    expect(whole.dtype).toBe('bf16');
    const want = naiveGla(values(q), values(k), values(v), values(g), null, B, T, H, K, V, 1 / Math.sqrt(K));
    expectClose(values(whole), want.map((x) => roundToDType(x, 'bf16')), 1.6e-2, 1.6e-2);
    const part = (t: typeof q, a: number, n: number) => t.narrow(1, a, n);
    const [o1, s1] = fusedRecurrentGla(cpu, part(q, 0, 4), part(k, 0, 4), part(v, 0, 4), part(g, 0, 4), { output_final_state: true });
    const [o2] = fusedRecurrentGla(cpu, part(q, 4, 2), part(k, 4, 2), part(v, 4, 2), part(g, 4, 2), { initial_state: s1! });
    expectClose([...values(o1), ...values(o2)], values(fusedRecurrentGla(cpu, q, k, v, g)[0]), 1e-2, 1e-2);
    expect(() => chunkGla(cpu, q, k, v, randn(rng, [1, 6, 1, 7]))).toThrow(/chunk_gla: gk has shape \[1, 6, 1, 7\], expected \[1, 6, 1, 8\]/);
  });
});

describe('gla varlen (cu_seqlens) and a state pool (ssm_state_indices)', () => {
  it('packed sequences equal separate calls; the pool rows are read and written in place, padding slots untouched', () => {
    const rng = new Rng(5);
    const [H, K, V] = [2, 4, 3];
    const lens = [5, 1, 7];
    const T = lens.reduce((a, b) => a + b, 0);
    const q = randn(rng, [1, T, H, K], 'f64');
    const k = randn(rng, [1, T, H, K], 'f64');
    const v = randn(rng, [1, T, H, V], 'f64');
    const g = tensor(Array.from(rng.fillNormal(T * H * K, 1), (x) => logSigmoid(x) / 4), [1, T, H, K], 'f64');
    const pool = randn(rng, [6, H, K, V], 'f32');
    const before = values(pool);
    const slots = [4, 0, 2];
    const per = H * K * V;
    const cu = tensor([0, 5, 6, 13], [4], 'i32');
    // the same sequences one call each, from their pool rows
    const want: { o: number[]; s: number[] }[] = [];
    let t0 = 0;
    lens.forEach((n, i) => {
      const part = (x: typeof q) => x.narrow(1, t0, n);
      const s0 = tensor(before.slice(slots[i]! * per, (slots[i]! + 1) * per), [1, H, K, V], 'f32');
      const [o, s] = fusedRecurrentGla(cpu, part(q), part(k), part(v), part(g), { initial_state: s0, output_final_state: true });
      want.push({ o: values(o), s: values(s!) });
      t0 += n;
    });
    for (const [fn, opts] of [[fusedRecurrentGla, {}], [chunkGla, { chunk_size: 3 }]] as const) {
      pool.copy_(tensor(before, [6, H, K, V], 'f32'));
      const out = fn(cpu, q, k, v, g, { ...opts, initial_state: pool, cu_seqlens: cu, ssm_state_indices: tensor(slots, [3], 'i32') });
      expect(out).toHaveLength(1);
      expectClose(values(out[0]), want.flatMap((w) => w.o), 1e-9, 1e-9);
      const after = values(pool);
      slots.forEach((s, i) => expectClose(after.slice(s * per, (s + 1) * per), want[i]!.s, 1e-6, 1e-6));
      for (const s of [1, 3, 5]) expect(after.slice(s * per, (s + 1) * per)).toEqual(before.slice(s * per, (s + 1) * per));
    }
    // decode rows (B sequences of one token) with a padding row (-1): no read, no write
    pool.copy_(tensor(before, [6, H, K, V], 'f32'));
    const one = (x: typeof q) => x.narrow(1, 0, 2).reshape([2, 1, H, x.shape[3]!]);
    const [od] = fusedRecurrentGla(cpu, one(q), one(k), one(v), one(g), { initial_state: pool, ssm_state_indices: tensor([3, -1], [2], 'i64') });
    expect(od.shape).toEqual([2, 1, H, V]);
    const after = values(pool);
    expect(after.slice(0, 3 * per)).toEqual(before.slice(0, 3 * per));
    expect(after.slice(4 * per)).toEqual(before.slice(4 * per));
    expect(after.slice(3 * per, 4 * per)).not.toEqual(before.slice(3 * per, 4 * per));
    expect(() => fusedRecurrentGla(cpu, q, k, v, g, { initial_state: pool, cu_seqlens: tensor([0, 5, 12], [3], 'i32') })).toThrow(/cu_seqlens must run from 0 to T = 13/);
    expect(() => fusedRecurrentGla(cpu, q, k, v, g, { initial_state: pool, cu_seqlens: cu, ssm_state_indices: tensor([4, 0, 6], [3], 'i32') })).toThrow(/ssm_state_indices\[2\] = 6 is outside the pool of 6 slots/);
    // two live sequences on one slot would race on a device (the kernels update the pool in place, in parallel)
    expect(() => fusedRecurrentGla(cpu, q, k, v, g, { initial_state: pool, cu_seqlens: cu, ssm_state_indices: tensor([2, -1, 2], [3], 'i32') })).toThrow(/ssm_state_indices\[2\] = 2 repeats ssm_state_indices\[0\]/);
  });
});

describe('gated delta rule (fused_recurrent_gated_delta_rule)', () => {
  it('hand-computed one-dim steps', () => {
    const q = tensor([1, 1], [1, 2, 1, 1], 'f64');
    const k = tensor([1, 1], [1, 2, 1, 1], 'f64');
    const v = tensor([2, 4], [1, 2, 1, 1], 'f64');
    const g = tensor([0, Math.log(0.5)], [1, 2, 1], 'f64');
    const beta = tensor([0.5, 1], [1, 2, 1], 'f64');
    const [o, s] = fusedRecurrentGatedDeltaRule(cpu, q, k, v, g, beta, { scale: 1, output_final_state: true });
    // S = 0 -> u = 0.5 * 2 = 1 -> S = 1, o = 1; S = 0.5 -> u = 4 - 0.5 -> S = 4, o = 4
    expectClose(values(o), [1, 4], 1e-12, 0);
    expectClose(values(s!), [4], 1e-12, 0);
  });

  it('against the matrix form S = exp(g) (I - beta k k^T) S + beta k v^T, grouped value heads, l2norm, initial state', () => {
    const rng = new Rng(5);
    const [B, T, H, HV, K, V] = [2, 5, 2, 4, 3, 2];
    const q = randn(rng, [B, T, H, K], 'f32');
    const k = randn(rng, [B, T, H, K], 'f32');
    const v = randn(rng, [B, T, HV, V], 'f32');
    const g = tensor(Array.from(rng.fillNormal(B * T * HV, 1), logSigmoid), [B, T, HV], 'f32');
    const beta = tensor(Array.from(rng.fillNormal(B * T * HV, 1), (x) => 1 / (1 + Math.exp(-x))), [B, T, HV], 'f32');
    const s0 = randn(rng, [B, HV, K, V], 'f32');
    const [Q, Kt, Vt, G, Be, S0] = [q, k, v, g, beta, s0].map(values) as number[][];
    const norm = (x: number[]) => {
      const n = Math.sqrt(x.reduce((a, c) => a + c * c, 0) + 1e-6);
      return x.map((c) => c / n);
    };
    const want: number[] = new Array(B * T * HV * V).fill(0);
    const finals: number[] = [];
    for (let b = 0; b < B; b++) {
      for (let hv = 0; hv < HV; hv++) {
        const h = Math.floor(hv / 2);
        let S = Array.from({ length: K }, (_, i) => Array.from({ length: V }, (_, j) => S0![((b * HV + hv) * K + i) * V + j]!));
        for (let t = 0; t < T; t++) {
          const qv = norm(Q!.slice(((b * T + t) * H + h) * K, ((b * T + t) * H + h) * K + K));
          const kv = norm(Kt!.slice(((b * T + t) * H + h) * K, ((b * T + t) * H + h) * K + K));
          const vv = Vt!.slice(((b * T + t) * HV + hv) * V, ((b * T + t) * HV + hv) * V + V);
          const e = Math.exp(G![(b * T + t) * HV + hv]!);
          const bt = Be![(b * T + t) * HV + hv]!;
          // (I - beta k k^T) S, scaled, plus beta k v^T
          S = S.map((_, i) => Array.from({ length: V }, (_, j) => e * (S[i]![j]! - bt * kv[i]! * kv.reduce((a, kl, l) => a + kl * S[l]![j]!, 0)) + bt * kv[i]! * vv[j]!));
          for (let j = 0; j < V; j++) want[((b * T + t) * HV + hv) * V + j] = 0.7 * qv.reduce((a, qi, i) => a + qi * S[i]![j]!, 0);
        }
        finals.push(...S.flat());
      }
    }
    const [o, s] = fusedRecurrentGatedDeltaRule(cpu, relayout(q, 'transposed'), k, relayout(v, 'stepped'), g, beta, { scale: 0.7, initial_state: s0, output_final_state: true, use_qk_l2norm_in_kernel: true });
    expect(o.shape).toEqual([B, T, HV, V]);
    expectClose(values(o), want.map(Math.fround), 1e-5, 1e-5);
    expectClose(values(s!), finals.map(Math.fround), 1e-5, 1e-5);
  });

  it('explains bad shapes; empty sequences give the initial state back', () => {
    const rng = new Rng(6);
    const q = randn(rng, [1, 3, 2, 4]);
    expect(() => fusedRecurrentGatedDeltaRule(cpu, q, q, randn(rng, [1, 3, 3, 4]), randn(rng, [1, 3, 3]), randn(rng, [1, 3, 3]))).toThrow(/value heads 3 \(v \[1, 3, 3, 4\]\) must be a multiple of q\/k heads 2/);
    expect(() => fusedRecurrentGatedDeltaRule(cpu, q, q, randn(rng, [1, 3, 2, 4]), randn(rng, [1, 3, 1]), randn(rng, [1, 3, 2]))).toThrow(/g has shape \[1, 3, 1\], expected \[1, 3, 2\]/);
    const s0 = randn(rng, [1, 2, 4, 4]);
    const e = randn(rng, [1, 0, 2, 4]);
    const [o, s] = fusedRecurrentGatedDeltaRule(cpu, e, e, e, randn(rng, [1, 0, 2]), randn(rng, [1, 0, 2]), { initial_state: s0, output_final_state: true });
    expect(o.shape).toEqual([1, 0, 2, 4]);
    expect(values(s!)).toEqual(values(s0));
  });
});

describe('KDA (fused_recurrent_kda): the delta rule with a per-key-channel decay', () => {
  it('a channel-constant gate reproduces the gated delta rule', () => {
    const rng = new Rng(8);
    const [B, T, H, K, V] = [1, 6, 2, 4, 3];
    const q = randn(rng, [B, T, H, K], 'f64');
    const k = randn(rng, [B, T, H, K], 'f64');
    const v = randn(rng, [B, T, H, V], 'f64');
    const gs = Array.from(rng.fillNormal(B * T * H, 1), logSigmoid);
    const beta = tensor(Array.from(rng.fillNormal(B * T * H, 1), (x) => 1 / (1 + Math.exp(-x))), [B, T, H], 'f64');
    const gd = fusedRecurrentGatedDeltaRule(cpu, q, k, v, tensor(gs, [B, T, H], 'f64'), beta, { output_final_state: true });
    const kda = fusedRecurrentKda(cpu, q, k, v, tensor(gs.flatMap((x) => new Array(K).fill(x)), [B, T, H, K], 'f64'), beta, { output_final_state: true });
    expectClose(values(kda[0]), values(gd[0]), 1e-12, 1e-12);
    expectClose(values(kda[1]!), values(gd[1]!), 1e-6, 1e-6);
  });

  it('against the matrix form S = (I - beta k k^T) diag(exp g) S + beta k v^T', () => {
    const rng = new Rng(9);
    const [T, K, V] = [5, 3, 2];
    const q = randn(rng, [1, T, 1, K], 'bf16');
    const k = randn(rng, [1, T, 1, K], 'bf16');
    const v = randn(rng, [1, T, 1, V], 'bf16');
    const g = tensor(Array.from(rng.fillNormal(T * K, 1), logSigmoid), [1, T, 1, K], 'f32');
    const beta = tensor(Array.from(rng.fillNormal(T, 1), (x) => 1 / (1 + Math.exp(-x))), [1, T, 1], 'f32');
    const [Q, Kt, Vt, G, Be] = [q, k, v, g, beta].map(values) as number[][];
    let S = Array.from({ length: K }, () => new Array<number>(V).fill(0));
    const want: number[] = [];
    for (let t = 0; t < T; t++) {
      const kv = Kt!.slice(t * K, t * K + K);
      const D = S.map((row, i) => row.map((x) => x * Math.exp(G![t * K + i]!)));
      const bt = Be![t]!;
      S = D.map((row, i) => row.map((x, j) => x - bt * kv[i]! * kv.reduce((a, kl, l) => a + kl * D[l]![j]!, 0) + bt * kv[i]! * Vt![t * V + j]!));
      for (let j = 0; j < V; j++) want.push(Q!.slice(t * K, t * K + K).reduce((a, qi, i) => a + qi * S[i]![j]!, 0) / Math.sqrt(K));
    }
    const [o] = fusedRecurrentKda(cpu, q, relayout(k, 'transposed'), v, g, beta);
    expect(o.dtype).toBe('bf16');
    expectClose(values(o), want.map((x) => roundToDType(x, 'bf16')), 1.6e-2, 1.6e-2);
    expect(() => fusedRecurrentKda(cpu, q, k, v, beta, beta)).toThrow(/fused_recurrent_kda: g has shape \[1, 5, 1\], expected \[1, 5, 1, 3\]/);
  });
});
