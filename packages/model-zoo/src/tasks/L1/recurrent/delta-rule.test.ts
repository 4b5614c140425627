/**
 * The gated-delta-rule and causal-conv tasks against the definition: the recurrence on hand-computed values; the
 * chunked algorithm (UT transform within a chunk) at every chunk size equals the recurrence, with grouped value heads,
 * the in-kernel l2norm and a state in and out; the CPU ops (fused and chunk) equal the references on fresh inputs; a
 * prefill split in two with the state carried equals the whole; causal_conv1d by hand and split with its state carried.
 * KDA (a decay a key channel): the recurrence by hand (two channels decaying apart), the chunked algorithm at every chunk
 * size, the L1/chunk_kda and L1/fused_recurrent_kda modules on the CPU ops, and equal decays reducing to the gated rule.
 */
import { Rng, Tensor, hostArray, toHostArray, withContext, type ExecutionContext, type HostArray, type TaskCase } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { CausalConv1d, causalConv1dReference } from './causal_conv1d.js';
import { ChunkGatedDeltaRule } from './chunk_gated_delta_rule.js';
import { ChunkKDA } from './chunk_kda.js';
import { chunkGatedDeltaRuleReference, gatedDeltaRuleReference, makeDeltaInputs, makeKdaInputs } from './delta-rule-common.js';
import { FusedRecurrentGatedDeltaRule } from './fused_recurrent_gated_delta_rule.js';
import { FusedRecurrentKDA } from './fused_recurrent_kda.js';

const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
const run = <T>(f: () => T): T => withContext(ctx, f);
const toTensor = (h: HostArray): Tensor => Tensor.fromArray(ctx.backend, h.data, h.shape, 'f32', { device: 0 });
const worst = (a: Float64Array, b: Float64Array) => {
  expect(a.length).toBe(b.length);
  let w = 0;
  a.forEach((v, i) => (w = Math.max(w, Math.abs(v - b[i]!) / (1 + Math.abs(b[i]!)))));
  return w;
};

type Dims = { B: number; T: number; H: number; HV: number; K: number; V: number };
function inputs(seed: number, dims: Dims, state: boolean, l2norm = true, kda = false) {
  const c: TaskCase = { name: 't', dtype: 'f32', dims, init: [null, l2norm], options: state ? { initial_state: true } : {}, count: 1 };
  const ts = run(() => (kda ? makeKdaInputs : makeDeltaInputs)(c, ctx, new Rng(seed))) as (Tensor | null)[];
  const h = ts.map((t) => (t ? toHostArray(t) : null));
  return { ts, q: h[0]!, k: h[1]!, v: h[2]!, g: h[3]!, beta: h[4]!, s0: h[5] ?? null, l2norm };
}

describe('gated delta rule reference', () => {
  it('matches a hand computation (B = H = HV = K = V = 1, two steps, state in)', () => {
    // S <- e^g S; u = beta (v - k S); S += k u; o = scale q S
    const q = hostArray([1, 2, 1, 1], [2, 3]);
    const k = hostArray([1, 2, 1, 1], [1, -1]);
    const v = hostArray([1, 2, 1, 1], [4, 2]);
    const g = hostArray([1, 2, 1], [Math.log(0.5), Math.log(0.25)]);
    const beta = hostArray([1, 2, 1], [0.5, 0.25]);
    const [o, s] = gatedDeltaRuleReference({ q, k, v, g, beta, s0: hostArray([1, 1, 1, 1], [8]), scale: 0.5, l2norm: false });
    let S = 0.5 * 8;
    S += 1 * (0.5 * (4 - 1 * S));
    const o1 = 0.5 * 2 * S;
    S *= 0.25;
    S += -1 * (0.25 * (2 - -1 * S));
    expect([...o.data]).toEqual([o1, 0.5 * 3 * S].map((x) => expect.closeTo(x, 12)));
    expect(s.data[0]).toBeCloseTo(S, 12);
  });

  it('value head hv reads q/k head floor(hv / r); with beta = 1 and unit k the state forgets what k held', () => {
    const { q, k, v, g, beta } = inputs(1, { B: 1, T: 3, H: 2, HV: 4, K: 4, V: 3 }, false);
    const [o] = gatedDeltaRuleReference({ q, k, v, g, beta, s0: null, scale: null, l2norm: true });
    // value heads 0, 1 use q/k head 0: the same outputs as a one-head problem with v / g / beta of those heads
    const pick = (x: HostArray, heads: number[], per: number, H: number) => hostArray([1, 3, heads.length, per].slice(0, per ? 4 : 3), Array.from({ length: 3 }, (_, t) => heads.flatMap((h) => Array.from(x.data.subarray((t * H + h) * (per || 1), (t * H + h + 1) * (per || 1))))).flat());
    const [o0] = gatedDeltaRuleReference({ q: pick(q, [0], 4, 2), k: pick(k, [0], 4, 2), v: pick(v, [0, 1], 3, 4), g: pick(g, [0, 1], 0, 4), beta: pick(beta, [0, 1], 0, 4), s0: null, scale: null, l2norm: true });
    expect(worst(pick(o, [0, 1], 3, 4).data, o0.data)).toBeLessThan(1e-14);
    // beta = 1, g = 0, |k| = 1: after writing v at k, reading at q = k returns v exactly (the delta rule's overwrite)
    const u = hostArray([1, 2, 1, 2], [0.6, 0.8, 0.6, 0.8]);
    const [o2] = gatedDeltaRuleReference({ q: u, k: u, v: hostArray([1, 2, 1, 2], [1, 2, 5, -3]), g: hostArray([1, 2, 1], [0, 0]), beta: hostArray([1, 2, 1], [1, 1]), s0: null, scale: 1, l2norm: false });
    expect([...o2.data.subarray(2)].map((x) => +x.toFixed(12))).toEqual([5, -3]);
  });

  it('the chunked algorithm equals the recurrence at every chunk size (grouped heads, l2norm, state in and out)', () => {
    for (const [seed, dims, state, l2] of [
      [2, { B: 2, T: 70, H: 2, HV: 4, K: 8, V: 6 }, true, true],
      [3, { B: 1, T: 37, H: 1, HV: 3, K: 5, V: 7 }, false, false],
    ] as const) {
      const a = inputs(seed, dims, state, l2);
      const args = { ...a, scale: null };
      const [o, s] = gatedDeltaRuleReference(args);
      for (const C of [1, 2, 3, 8, 16, 64, 128]) {
        const [oc, sc] = chunkGatedDeltaRuleReference(args, C);
        expect(worst(oc.data, o.data), `o, chunk ${C}`).toBeLessThan(1e-10);
        expect(worst(sc.data, s.data), `state, chunk ${C}`).toBeLessThan(1e-10);
      }
    }
  });

  it('the CPU ops (fused and chunk) equal the reference; a prefill split in two with the state carried equals the whole', () => {
    const dims = { B: 2, T: 40, H: 2, HV: 4, K: 8, V: 6 };
    const a = inputs(4, dims, true);
    const [o, s] = gatedDeltaRuleReference({ ...a, scale: null });
    for (const m of run(() => [new FusedRecurrentGatedDeltaRule(null, true), new ChunkGatedDeltaRule(null, true)])) {
      const [oo, ss] = run(() => m.forward(...(a.ts as [Tensor, Tensor, Tensor, Tensor, Tensor, Tensor])));
      expect(worst(oo!.toFloat64Array(), o.data)).toBeLessThan(1e-5);
      expect(worst(ss!.toFloat64Array(), s.data)).toBeLessThan(1e-5);
    }
    const split = (x: HostArray, from: number, to: number) => {
      const per = x.data.length / (2 * 40);
      return hostArray([2, to - from, ...x.shape.slice(2)], [0, 1].flatMap((b) => Array.from(x.data.subarray((b * 40 + from) * per, (b * 40 + to) * per))));
    };
    const part = (from: number, to: number, s0: HostArray | null) => gatedDeltaRuleReference({ q: split(a.q, from, to), k: split(a.k, from, to), v: split(a.v, from, to), g: split(a.g, from, to), beta: split(a.beta, from, to), s0, scale: null, l2norm: true });
    const [o1, s1] = part(0, 25, a.s0);
    const [o2, s2] = part(25, 40, s1);
    expect(worst(s2.data, s.data)).toBeLessThan(1e-12);
    expect(worst(o1.data, split(o, 0, 25).data)).toBeLessThan(1e-12);
    expect(worst(o2.data, split(o, 25, 40).data)).toBeLessThan(1e-12);
  });
});

describe('KDA (a decay a key channel) reference and tasks', () => {
  it('matches a hand computation (K = 2 channels decaying apart, V = 1, two steps, state in)', () => {
    // S_i <- e^{g_i} S_i; u = beta (v - k.S); S_i += k_i u; o = scale q.S
    const q = hostArray([1, 2, 1, 2], [1, 2, -1, 3]);
    const k = hostArray([1, 2, 1, 2], [0.6, 0.8, 1, 0]);
    const v = hostArray([1, 2, 1, 1], [4, 2]);
    const g = hostArray([1, 2, 1, 2], [Math.log(0.5), Math.log(0.25), 0, Math.log(0.5)]);
    const beta = hostArray([1, 2, 1], [0.5, 1]);
    const [o, s] = gatedDeltaRuleReference({ q, k, v, g, beta, s0: hostArray([1, 1, 2, 1], [8, -4]), scale: 0.5, l2norm: false });
    let S = [8 * 0.5, -4 * 0.25];
    let u = 0.5 * (4 - (0.6 * S[0]! + 0.8 * S[1]!));
    S = [S[0]! + 0.6 * u, S[1]! + 0.8 * u];
    const o1 = 0.5 * (1 * S[0]! + 2 * S[1]!);
    S = [S[0]!, S[1]! * 0.5];
    u = 1 * (2 - (1 * S[0]! + 0 * S[1]!));
    S = [S[0]! + u, S[1]!];
    expect([...o.data]).toEqual([o1, 0.5 * (-1 * S[0]! + 3 * S[1]!)].map((x) => expect.closeTo(x, 12)));
    expect([...s.data]).toEqual(S.map((x) => expect.closeTo(x, 12)));
  });

  it('equal decays on every channel give the gated delta rule', () => {
    const a = inputs(7, { B: 1, T: 9, H: 1, HV: 2, K: 4, V: 3 }, true);
    const wide = hostArray([...a.g.shape, 4], Array.from(a.g.data).flatMap((x) => [x, x, x, x]));
    const [o, s] = gatedDeltaRuleReference({ ...a, scale: null });
    const [ok, sk] = gatedDeltaRuleReference({ ...a, g: wide, scale: null });
    expect(worst(ok.data, o.data)).toBeLessThan(1e-14);
    expect(worst(sk.data, s.data)).toBeLessThan(1e-14);
  });

  it('the chunked algorithm equals the recurrence at every chunk size (grouped heads, l2norm, state in and out)', () => {
    for (const [seed, dims, state, l2] of [
      [8, { B: 2, T: 70, H: 2, HV: 4, K: 8, V: 6 }, true, true],
      [9, { B: 1, T: 37, H: 1, HV: 3, K: 5, V: 7 }, false, false],
    ] as const) {
      const a = inputs(seed, dims, state, l2, true);
      expect(a.g.shape).toEqual([dims.B, dims.T, dims.HV, dims.K]);
      const args = { ...a, scale: null };
      const [o, s] = gatedDeltaRuleReference(args);
      for (const C of [1, 2, 3, 8, 16, 64, 128]) {
        const [oc, sc] = chunkGatedDeltaRuleReference(args, C);
        expect(worst(oc.data, o.data), `o, chunk ${C}`).toBeLessThan(1e-10);
        expect(worst(sc.data, s.data), `state, chunk ${C}`).toBeLessThan(1e-10);
      }
    }
  });

  it('L1/fused_recurrent_kda and L1/chunk_kda (the CPU ops) equal the reference; a prefill split in two with the state carried equals the whole', () => {
    const a = inputs(10, { B: 2, T: 40, H: 2, HV: 4, K: 8, V: 6 }, true, true, true);
    const [o, s] = gatedDeltaRuleReference({ ...a, scale: null });
    for (const m of run(() => [new FusedRecurrentKDA(null, true), new ChunkKDA(null, true)])) {
      const [oo, ss] = run(() => m.forward(...(a.ts as [Tensor, Tensor, Tensor, Tensor, Tensor, Tensor])));
      expect(worst(oo!.toFloat64Array(), o.data)).toBeLessThan(1e-5);
      expect(worst(ss!.toFloat64Array(), s.data)).toBeLessThan(1e-5);
    }
    const split = (x: HostArray, from: number, to: number) => {
      const per = x.data.length / (2 * 40);
      return hostArray([2, to - from, ...x.shape.slice(2)], [0, 1].flatMap((b) => Array.from(x.data.subarray((b * 40 + from) * per, (b * 40 + to) * per))));
    };
    const part = (from: number, to: number, s0: HostArray | null) => gatedDeltaRuleReference({ q: split(a.q, from, to), k: split(a.k, from, to), v: split(a.v, from, to), g: split(a.g, from, to), beta: split(a.beta, from, to), s0, scale: null, l2norm: true });
    const [, s1] = part(0, 25, a.s0);
    const [o2, s2] = part(25, 40, s1);
    expect(worst(s2.data, s.data)).toBeLessThan(1e-12);
    expect(worst(o2.data, split(o, 25, 40).data)).toBeLessThan(1e-12);
  });
});

describe('causal_conv1d', () => {
  it('matches a hand computation and carries its state across a split', () => {
    // one channel, width 3: out_t = w0 x_{t-2} + w1 x_{t-1} + w2 x_t over [init, x]
    const [o, f] = causalConv1dReference(hostArray([1, 1, 3], [1, 2, 3]), hostArray([1, 3], [0.5, -1, 2]), null, hostArray([1, 1, 2], [4, 5]), null);
    expect([...o.data]).toEqual([0.5 * 4 - 5 + 2, 0.5 * 5 - 1 + 4, 0.5 * 1 - 2 + 6]);
    expect([...f.data]).toEqual([2, 3]);
    const rng = new Rng(6);
    const x = hostArray([2, 5, 11], rng.fillNormal(110, 1));
    const m = run(() => new CausalConv1d('silu'));
    const w = hostArray([5, 4], rng.fillNormal(20, 1));
    const [whole, wf] = causalConv1dReference(x, w, null, null, 'silu');
    const cut = (from: number, to: number) => hostArray([2, 5, to - from], Array.from({ length: 10 }, (_, r) => Array.from(x.data.subarray(r * 11 + from, r * 11 + to))).flat());
    const [, f1] = run(() => m.forward(toTensor(cut(0, 7)), toTensor(w)));
    const [o2, f2] = run(() => m.forward(toTensor(cut(7, 11)), toTensor(w), f1!));
    const tail = Array.from({ length: 10 }, (_, r) => Array.from(whole.data.subarray(r * 11 + 7, r * 11 + 11))).flat();
    expect(worst(o2!.toFloat64Array(), Float64Array.from(tail))).toBeLessThan(1e-6);
    expect(worst(f2!.toFloat64Array(), wf.data)).toBeLessThan(1e-6);
  });
});

