import { describe, expect, it } from 'vitest';
import { roundToDType, type DType } from '@fastkernels/core';
import { scaledDotProductAttention as sdpa } from './ops/sdpa.js';
import { cpu, expectClose, LAYOUTS, randn, relayout, Rng, tensor, values } from './test-helpers.js';

/**
 * Naive reference for [B, H, L, E] inputs: kv heads repeated explicitly (repeat_interleave), the mask materialised as
 * an additive float matrix (-inf where not allowed), softmax by definition.
 */
function naive(q: number[], k: number[], v: number[], B: number, Hq: number, Hkv: number, L: number, S: number, E: number, Ev: number, o: { causal?: boolean; mask?: (b: number, h: number, i: number, j: number) => number; scale?: number }): number[] {
  const out: number[] = [];
  const scale = o.scale ?? 1 / Math.sqrt(E);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const hk = Math.floor(h / (Hq / Hkv));
      for (let i = 0; i < L; i++) {
        const logits: number[] = [];
        for (let j = 0; j < S; j++) {
          let s = 0;
          for (let d = 0; d < E; d++) s += q[((b * Hq + h) * L + i) * E + d]! * k[((b * Hkv + hk) * S + j) * E + d]!;
          let add = o.mask ? o.mask(b, h, i, j) : 0;
          if (o.causal && j > i) add = -Infinity;
          logits.push(s * scale + add);
        }
        const m = Math.max(...logits);
        const p = logits.map((x) => (m === -Infinity ? 0 : Math.exp(x - m)));
        const z = p.reduce((a, c) => a + c, 0);
        for (let d = 0; d < Ev; d++) out.push(m === -Infinity ? 0 : p.reduce((acc, pj, j) => acc + (pj / z) * v[((b * Hkv + hk) * S + j) * Ev + d]!, 0));
      }
    }
  }
  return out;
}

const round = (v: number[], d: DType) => v.map((x) => roundToDType(x, d));
/** One rounding step of the dtype: the kernel and the reference sum in different orders before rounding. */
const TOL: Record<string, number> = { f32: 1e-6, f16: 2e-3, bf16: 1.6e-2 };

describe('scaled_dot_product_attention', () => {
  it('hand-computed: one query over two keys', () => {
    // scores q.k = [0, ln 3 * sqrt(E)/...]: pick scale 1 and keys so softmax is [1/4, 3/4]
    const q = tensor([1], [1, 1, 1, 1]);
    const k = tensor([0, Math.log(3)], [1, 1, 2, 1], 'f64');
    const v = tensor([4, 8], [1, 1, 2, 1], 'f64');
    const y = sdpa(cpu, q.to('f64'), k, v, { scale: 1 });
    expect(values(y)[0]).toBeCloseTo(1 + 6, 12);
    // causal: the first query sees only key 0
    const y2 = sdpa(cpu, tensor([1, 1], [1, 1, 2, 1], 'f64'), k, v, { scale: 1, is_causal: true });
    expectClose(values(y2), [4, 7], 1e-12, 0);
  });

  it('random inputs against the naive reference: plain, causal (L < S and L > S), GQA, head dims 32..256, dtypes', () => {
    const rng = new Rng(1);
    const cases = [
      { B: 2, Hq: 3, Hkv: 3, L: 5, S: 5, E: 32, Ev: 32, causal: false, gqa: false },
      { B: 1, Hq: 2, Hkv: 2, L: 3, S: 6, E: 64, Ev: 48, causal: true, gqa: false }, // top-left: query i sees keys 0..i
      { B: 1, Hq: 2, Hkv: 2, L: 6, S: 3, E: 40, Ev: 40, causal: true, gqa: false }, // rows 0..2 partly, the rest all keys
      { B: 2, Hq: 8, Hkv: 2, L: 4, S: 7, E: 128, Ev: 128, causal: true, gqa: true },
      { B: 1, Hq: 4, Hkv: 1, L: 3, S: 5, E: 256, Ev: 96, causal: false, gqa: true },
    ];
    for (const c of cases) {
      for (const dtype of ['f32', 'bf16', 'f16'] as DType[]) {
        const q = randn(rng, [c.B, c.Hq, c.L, c.E], dtype);
        const k = randn(rng, [c.B, c.Hkv, c.S, c.E], dtype);
        const v = randn(rng, [c.B, c.Hkv, c.S, c.Ev], dtype);
        const want = round(naive(values(q), values(k), values(v), c.B, c.Hq, c.Hkv, c.L, c.S, c.E, c.Ev, { causal: c.causal }), dtype);
        const y = sdpa(cpu, relayout(q, 'transposed'), relayout(k, 'stepped'), relayout(v, 'narrowed'), { is_causal: c.causal, enable_gqa: c.gqa });
        expect(y.shape).toEqual([c.B, c.Hq, c.L, c.Ev]);
        expect(y.dtype).toBe(dtype);
        expectClose(values(y), want, TOL[dtype]!, TOL[dtype]!);
      }
    }
  });

  it('bool and additive masks broadcast from [L, S] and [B, 1, L, S]; custom scale', () => {
    const rng = new Rng(2);
    const [B, H, L, S, E] = [2, 2, 3, 4, 8];
    const q = randn(rng, [B, H, L, E]);
    const k = randn(rng, [B, H, S, E]);
    const v = randn(rng, [B, H, S, E]);
    const allowed = [1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0]; // [L, S]
    const bm = tensor(allowed, [L, S], 'bool');
    const want = naive(values(q), values(k), values(v), B, H, H, L, S, E, E, { mask: (_b, _h, i, j) => (allowed[i * S + j] ? 0 : -Infinity), scale: 0.3 });
    for (const layout of LAYOUTS) expectClose(values(sdpa(cpu, q, relayout(k, layout), v, { attn_mask: bm, scale: 0.3 })), round(want, 'f32'), 1e-6, 1e-6);
    const add = randn(rng, [B, 1, L, S]);
    const A = values(add);
    const want2 = naive(values(q), values(k), values(v), B, H, H, L, S, E, E, { mask: (b, _h, i, j) => A[(b * L + i) * S + j]! });
    expectClose(values(sdpa(cpu, q, k, v, { attn_mask: relayout(add, 'transposed') })), round(want2, 'f32'), 1e-6, 1e-6);
  });

  it('a fully masked row gives zeros (torch math path since 2.5), not NaN; empty inputs', () => {
    const q = tensor([1, 2], [1, 1, 2, 1]);
    const k = tensor([1, 1], [1, 1, 2, 1]);
    const v = tensor([3, 5], [1, 1, 2, 1]);
    const mask = tensor([0, 0, 1, 0], [2, 2], 'bool');
    expect(values(sdpa(cpu, q, k, v, { attn_mask: mask }))).toEqual([0, 3]);
    expect(sdpa(cpu, randn(new Rng(0), [1, 2, 0, 8]), randn(new Rng(0), [1, 2, 3, 8]), randn(new Rng(0), [1, 2, 3, 8])).shape).toEqual([1, 2, 0, 8]);
    expect(values(sdpa(cpu, randn(new Rng(0), [1, 1, 2, 4]), randn(new Rng(0), [1, 1, 0, 4]), randn(new Rng(0), [1, 1, 0, 4])))).toEqual(new Array(8).fill(0));
  });

  it('3-D inputs (no head dim) and a broadcast batch', () => {
    const rng = new Rng(3);
    const q = randn(rng, [2, 4, 16]);
    const k = randn(rng, [1, 5, 16]);
    const v = randn(rng, [1, 5, 16]);
    const K = values(k);
    const V = values(v);
    const want = naive(values(q), [...K, ...K], [...V, ...V], 2, 1, 1, 4, 5, 16, 16, {});
    expectClose(values(sdpa(cpu, q, k, v)), round(want, 'f32'), 1e-6, 1e-6);
  });

  it('explains bad calls', () => {
    const q = randn(new Rng(0), [1, 4, 3, 8]);
    const k = randn(new Rng(0), [1, 2, 5, 8]);
    expect(() => sdpa(cpu, q, k, k)).toThrow(/do not broadcast \(different head counts need enable_gqa=true\)/);
    expect(() => sdpa(cpu, q, randn(new Rng(0), [1, 3, 5, 8]), randn(new Rng(0), [1, 3, 5, 8]), { enable_gqa: true })).toThrow(/query heads \(4\) to be a multiple of key\/value heads \(3\)/);
    expect(() => sdpa(cpu, q, randn(new Rng(0), [1, 4, 5, 7]), randn(new Rng(0), [1, 4, 5, 8]))).toThrow(/key \[1, 4, 5, 7\] head dim must equal query's 8/);
    expect(() => sdpa(cpu, q, k, k, { enable_gqa: true, is_causal: true, attn_mask: tensor([1], [1, 1], 'bool') })).toThrow(/must not be given when is_causal/);
    expect(() => sdpa(cpu, q, k, k, { enable_gqa: true, dropout_p: 0.1 })).toThrow(/dropout_p must be 0/);
    expect(() => sdpa(cpu, q, k, k, { enable_gqa: true, attn_mask: randn(new Rng(0), [2, 5]) })).toThrow(/attn_mask \[2, 5\] does not broadcast to \[1, 4, 3, 5\]/);
  });
});
