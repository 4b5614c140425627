/** fused_moe_gemm on the cpu backend: the float64 kernel against plain loops, its decomposition, the spec's errors. */
import { describe, expect, it } from 'vitest';
import { F, inferOp, type Tensor } from '@fastkernels/core';
import { cpu, expectClose, randn, Rng, tensor, values } from './test-helpers.js';

/** moe_align in plain loops: the slots of ids [M, topK] by expert, each expert padded to whole blocks of bs. */
function align(ids: number[], E: number, bs: number): { sorted: number[]; experts: number[]; post: number } {
  const n = ids.length;
  const NB = Math.ceil((n + E * (bs - 1)) / bs);
  const sorted = new Array<number>(NB * bs).fill(n);
  const experts = new Array<number>(NB).fill(-1);
  let at = 0;
  for (let e = 0; e < E; e++) {
    const slots = ids.flatMap((x, s) => (x === e ? [s] : []));
    slots.forEach((s, j) => (sorted[at + j] = s));
    const padded = Math.ceil(slots.length / bs) * bs;
    for (let b = at / bs; b < (at + padded) / bs; b++) experts[b] = e;
    at += padded;
  }
  return { sorted, experts, post: at };
}

/** out[s] = x[s / topK] . w[e(s)] (* weight[s]) for the slots of live blocks; zeros elsewhere. */
function reference(x: number[], w: number[], tw: number[], a: ReturnType<typeof align>, M: number, K: number, N: number, topK: number, mul: boolean): number[] {
  const out = new Array<number>(M * topK * N).fill(0);
  const bs = a.sorted.length / a.experts.length;
  a.sorted.forEach((s, i) => {
    const e = a.experts[Math.floor(i / bs)]!;
    if (s >= M * topK || Math.floor(i / bs) * bs >= a.post) return;
    for (let n = 0; n < N; n++) {
      let acc = 0;
      if (e >= 0) for (let k = 0; k < K; k++) acc += x[Math.floor(s / topK) * K + k]! * w[(e * N + n) * K + k]!;
      out[s * N + n] = acc * (mul ? tw[s]! : 1);
    }
  });
  return out;
}

function decomposed(inputs: (Tensor | null)[], attrs: { top_k: number; mul_routed_weight: boolean }): Tensor {
  const { spec, attrs: parsed, outputs } = inferOp('fused_moe_gemm', inputs, attrs);
  return (spec.decompose!({ op: spec, backend: cpu, inputs, attrs: parsed as Record<string, unknown>, outputs }) as Tensor[])[0]!;
}

describe('fused_moe_gemm (cpu)', () => {
  const cases = [
    { M: 7, K: 24, N: 10, E: 8, topK: 2, bs: 4, mul: false },
    { M: 5, K: 16, N: 6, E: 16, topK: 4, bs: 16, mul: false },
    { M: 14, K: 8, N: 12, E: 4, topK: 1, bs: 4, mul: true },
    { M: 1, K: 32, N: 8, E: 6, topK: 1, bs: 3, mul: true },
  ];
  for (const c of cases) {
    it(`M ${c.M} topK ${c.topK} of ${c.E} experts, block ${c.bs}${c.mul ? ', routed weights' : ''}: kernel = plain loops = decomposition`, () => {
      const rng = new Rng(c.M * 31 + c.topK);
      // experts 0 and E - 1 never chosen: zero-token experts between taken ones
      const ids = Array.from({ length: c.M }, () => {
        const pool = Array.from({ length: c.E - 2 }, (_, i) => i + 1);
        for (let i = pool.length - 1; i > 0; i--) {
          const j = Math.floor(rng.uniform() * (i + 1));
          [pool[i], pool[j]] = [pool[j]!, pool[i]!];
        }
        return pool.slice(0, c.topK);
      }).flat();
      const a = align(ids, c.E, c.bs);
      for (const dtype of ['f64', 'bf16'] as const) {
        const x = randn(rng, [c.M, c.K], dtype);
        const w = randn(rng, [c.E, c.N, c.K], dtype, 1 / Math.sqrt(c.K));
        const tw = tensor(Array.from({ length: c.M * c.topK }, () => 0.1 + rng.uniform()), [c.M, c.topK], 'f32');
        const inputs = [x, w, c.mul ? tw : null, tensor(a.sorted, [a.sorted.length], 'i32'), tensor(a.experts, [a.experts.length], 'i32'), tensor([a.post], [1], 'i32')];
        const attrs = { top_k: c.topK, mul_routed_weight: c.mul };
        const got = F.fusedMoeGemm(inputs[0]!, inputs[1]!, inputs[2] ?? null, inputs[3]!, inputs[4]!, inputs[5]!, attrs);
        expect(got.shape).toEqual([c.M, c.topK, c.N]);
        expect(got.dtype).toBe(dtype);
        const want = reference(values(x), values(w), values(tw), a, c.M, c.K, c.N, c.topK, c.mul);
        // one rounding of the float64 result
        expectClose(values(got), values(tensor(want, [want.length], dtype)), dtype === 'f64' ? 1e-12 : 0, dtype === 'f64' ? 1e-12 : 1e-7);
        // the decomposition rounds the GEMM, then the scaled product: within two bf16 roundings
        expectClose(values(decomposed(inputs, attrs)), values(got), dtype === 'f64' ? 1e-12 : 2e-2, dtype === 'f64' ? 1e-12 : 2e-2);
      }
    });
  }

  it('blocks at or past num_tokens_post_padded are skipped; expert -1 writes zero rows', () => {
    const x = tensor([1, 2, 3, 4], [2, 2], 'f64');
    const w = tensor([1, 0, 0, 1, 2, 0, 0, 2], [2, 2, 2], 'f64');
    // blocks of 2: [slot 0, pad] expert 1; [slot 1, pad] expert -1 (non-local); [slot 0, pad] past the count
    const sorted = tensor([0, 2, 1, 2, 0, 2], [6], 'i32');
    const args = [x, w, null, sorted, tensor([1, -1, 0], [3], 'i32'), tensor([4], [1], 'i32')] as const;
    expect(F.fusedMoeGemm(...args, { top_k: 1 }).toNested()).toEqual([[[2, 4]], [[0, 0]]]);
    expect(decomposed([...args], { top_k: 1, mul_routed_weight: false }).toNested()).toEqual([[[2, 4]], [[0, 0]]]);
  });

  it('errors name the argument and the fix', () => {
    const x = tensor([1, 2, 3, 4], [2, 2], 'f32');
    const w = tensor([1, 0, 0, 1], [1, 2, 2], 'f32');
    const ids = tensor([0, 1, 2, 2], [4], 'i32');
    const post = tensor([4], [1], 'i32');
    expect(() => F.fusedMoeGemm(x, w, null, ids, tensor([0, 0, 0], [3], 'i32'), post, { top_k: 1 })).toThrow(/fused_moe_gemm: sorted_token_ids \[4\] does not make 3 whole blocks/);
    expect(() => F.fusedMoeGemm(x, w, null, ids, tensor([0, 0], [2], 'i32'), post, { top_k: 1, mul_routed_weight: true })).toThrow(/mul_routed_weight needs topk_weights/);
    expect(() => F.fusedMoeGemm(x, w, tensor([1, 1, 1], [3], 'f32'), ids, tensor([0, 0], [2], 'i32'), post, { top_k: 1, mul_routed_weight: true })).toThrow(/topk_weights \[3\] must hold M \* top_k = 2/);
    expect(() => F.fusedMoeGemm(x, tensor([1, 0, 0, 1], [1, 4, 1], 'f32'), null, ids, tensor([0, 0], [2], 'i32'), post, { top_k: 1 })).toThrow(/weight \[1, 4, 1\] has K = 1 but input \[2, 2\] has K = 2/);
    expect(() => F.fusedMoeGemm(x, w.to('bf16'), null, ids, tensor([0, 0], [2], 'i32'), post, { top_k: 1 })).toThrow(/input is f32 but weight is bf16/);
  });
});

describe('moe_align (cpu)', () => {
  for (const c of [
    { M: 7, topK: 2, E: 8, bs: 4 },
    { M: 33, topK: 8, E: 128, bs: 16 },
    { M: 64, topK: 4, E: 32, bs: 64 },
    { M: 1, topK: 1, E: 3, bs: 5 },
  ]) {
    it(`M ${c.M} top-${c.topK} of ${c.E} experts, block ${c.bs}, some slots -1: kernel = plain loops = decomposition`, () => {
      const rng = new Rng(c.M * 31 + c.E);
      const ids = Array.from({ length: c.M * c.topK }, (_, s) => (s % 11 === 5 ? -1 : rng.int(0, c.E)));
      const t = tensor(ids, [c.M, c.topK], 'i64');
      const want = align(ids, c.E, c.bs);
      const attrs = { block_size: c.bs, num_experts: c.E };
      const got = F.moeAlign(t, attrs);
      const { spec, attrs: parsed, outputs } = inferOp('moe_align', [t], attrs);
      const dec = spec.decompose!({ op: spec, backend: cpu, inputs: [t], attrs: parsed as Record<string, unknown>, outputs }) as Tensor[];
      for (const [label, outs] of [['kernel', got], ['decomposition', dec]] as const) {
        expect(values(outs[0]!), `${label}: sorted_token_ids`).toEqual(want.sorted);
        expect(values(outs[1]!), `${label}: expert_ids`).toEqual(want.experts);
        expect(values(outs[2]!), `${label}: num_tokens_post_padded`).toEqual([want.post]);
      }
    });
  }
});
