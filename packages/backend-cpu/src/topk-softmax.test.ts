/**
 * topk_softmax (MoE routing) on the cpu backend: the float64 kernel against a sort of the softmax (an independent
 * route), the op's decomposition (softmax, topk, sum, div, to: what backends without the kernel run), hand values, ties,
 * bf16 / f16 logits, strided views, and the spec's errors.
 */
import { describe, expect, it } from 'vitest';
import { F, inferOp, opRoute, roundToDType, type Tensor } from '@fastkernels/core';
import { cpu, expectClose, randn, relayout, Rng, tensor, values } from './test-helpers.js';

/** Each row's softmax in float64, its ids sorted by probability (descending, ties: lower id), the first k kept. */
function bySort(logits: number[], T: number, E: number, k: number, renormalize: boolean): { weights: number[]; ids: number[] } {
  const weights: number[] = [];
  const ids: number[] = [];
  for (let t = 0; t < T; t++) {
    const row = logits.slice(t * E, (t + 1) * E);
    const m = Math.max(...row);
    const ex = row.map((x) => Math.exp(x - m));
    const sum = ex.reduce((a, b) => a + b, 0);
    const order = ex.map((_, e) => e).sort((a, b) => ex[b]! - ex[a]! || a - b).slice(0, k);
    const p = order.map((e) => ex[e]! / sum);
    const kept = p.reduce((a, b) => a + b, 0);
    weights.push(...p.map((x) => roundToDType(renormalize ? x / kept : x, 'f32')));
    ids.push(...order);
  }
  return { weights, ids };
}

/** The op's decomposition run directly (what a backend without the kernel gets). */
function decomposed(x: Tensor, k: number, renormalize: boolean): Tensor[] {
  const { spec, attrs, outputs } = inferOp('topk_softmax', [x], { k, renormalize });
  return spec.decompose!({ op: spec, backend: cpu, inputs: [x], attrs: attrs as Record<string, unknown>, outputs }) as Tensor[];
}

describe('topk_softmax (cpu)', () => {
  it('is a cpu kernel with a decomposition', () => {
    const x = tensor([1, 2, 3, 4], [1, 4]);
    expect(opRoute('topk_softmax', [x], { k: 2 })).toEqual({ via: 'kernel' });
    expect(inferOp('topk_softmax', [x], { k: 2 }).spec.decompose).toBeTypeOf('function');
  });

  it('hand values: softmax of [0, ln 2, ln 5, 0] top-2 = 5/9, 2/9 (renormalised 5/7, 2/7); a tie goes to the lower id', () => {
    const x = tensor([0, Math.log(2), Math.log(5), 0, 1, 3, 3, 1], [2, 4], 'f64');
    const [w, ids] = F.topkSoftmax(x, 2);
    expect([w!.dtype, ids!.dtype, w!.shape, ids!.shape]).toEqual(['f32', 'i32', [2, 2], [2, 2]]);
    expect(values(ids!)).toEqual([2, 1, 1, 2]);
    const e3 = Math.exp(3);
    expectClose(values(w!), [5 / 9, 2 / 9, e3 / (2 * e3 + 2 * Math.E), e3 / (2 * e3 + 2 * Math.E)], 1e-7);
    const [wr] = F.topkSoftmax(x, 2, { renormalize: true });
    expectClose(values(wr!), [5 / 7, 2 / 7, 0.5, 0.5], 1e-7);
    // equal logits all through: ids in order
    const [, flat] = F.topkSoftmax(tensor([7, 7, 7, 7, 7], [1, 5]), 3);
    expect(values(flat!)).toEqual([0, 1, 2]);
  });

  for (const c of [
    { name: 'Mixtral', T: 13, E: 8, k: 2, renormalize: true },
    { name: 'Qwen3-30B-A3B', T: 7, E: 128, k: 8, renormalize: true },
    { name: 'Qwen3-like, no renormalisation', T: 9, E: 64, k: 8, renormalize: false },
    { name: 'gpt-oss-20b', T: 5, E: 32, k: 4, renormalize: true },
    { name: 'Qwen3-Next', T: 3, E: 512, k: 10, renormalize: true },
    { name: 'k = E', T: 4, E: 6, k: 6, renormalize: false },
  ]) {
    it(`${c.name} (E ${c.E}, top-${c.k}): kernel = sorted softmax = decomposition; f32, bf16, f16 logits`, () => {
      for (const dtype of ['f32', 'bf16', 'f16'] as const) {
        const x = randn(new Rng(c.E * 7 + c.k), [c.T, c.E], dtype, 2);
        const want = bySort(values(x), c.T, c.E, c.k, c.renormalize);
        const [w, ids] = F.topkSoftmax(x, c.k, { renormalize: c.renormalize });
        expect(values(ids!), `${dtype} ids`).toEqual(want.ids);
        expect(values(w!), `${dtype} weights`).toEqual(want.weights);
        const [dw, dids] = decomposed(x, c.k, c.renormalize);
        expect(values(dids!), `${dtype} decomposition ids`).toEqual(want.ids);
        expectClose(values(dw!), want.weights, 1e-6, 1e-5); // float32 softmax
        if (c.renormalize) for (let t = 0; t < c.T; t++) expectClose([values(w!).slice(t * c.k, (t + 1) * c.k).reduce((a, b) => a + b, 0)], [1], 1e-6);
      }
    });
  }

  it('bf16 logits with many equal values: ties go to the lower id in the kernel and the decomposition', () => {
    const rng = new Rng(3);
    const logits = Array.from({ length: 6 * 32 }, () => rng.int(0, 4)); // 4 distinct values over 32 experts
    const x = tensor(logits, [6, 32], 'bf16');
    const want = bySort(logits, 6, 32, 4, true);
    const [w, ids] = F.topkSoftmax(x, 4, { renormalize: true });
    expect(values(ids!)).toEqual(want.ids);
    expect(values(w!)).toEqual(want.weights);
    expect(values(decomposed(x, 4, true)[1]!)).toEqual(want.ids);
  });

  it('strided logits (transposed, stepped, narrowed views) give the contiguous answer', () => {
    const x = randn(new Rng(11), [5, 16], 'f32', 3);
    const [w0, i0] = F.topkSoftmax(x, 3, { renormalize: true });
    for (const layout of ['transposed', 'stepped', 'narrowed'] as const) {
      const [w, ids] = F.topkSoftmax(relayout(x, layout), 3, { renormalize: true });
      expect(values(ids!), layout).toEqual(values(i0!));
      expect(values(w!), layout).toEqual(values(w0!));
    }
  });

  it('the decomposition and the kernel free what they allocate', () => {
    for (const renormalize of [true, false]) {
      for (const route of ['decomposition', 'kernel'] as const) {
        const before = cpu.memoryStats().liveStorages;
        const x = randn(new Rng(2), [4, 16], 'bf16');
        const outs = route === 'kernel' ? F.topkSoftmax(x, 3, { renormalize }) : decomposed(x, 3, renormalize);
        for (const o of [...outs, x]) o.dispose();
        expect(cpu.memoryStats().liveStorages, `${route}${renormalize ? ' renormalised' : ''}`).toBe(before);
      }
    }
  });

  it('no tokens: empty outputs', () => {
    const [w, ids] = F.topkSoftmax(tensor([], [0, 8]), 2);
    expect([w!.shape, ids!.shape]).toEqual([[0, 2], [0, 2]]);
  });

  it('errors name the op and the shapes', () => {
    expect(() => F.topkSoftmax(tensor([1, 2, 3], [1, 3]), 4)).toThrow(/topk_softmax: k=4 is larger than the 3 experts of gating_output \[1, 3\]/);
    expect(() => F.topkSoftmax(tensor([1, 2, 3, 4], [1, 2, 2]), 1)).toThrow(/topk_softmax: gating_output must be \[T, E\], got \[1, 2, 2\]/);
    expect(() => F.topkSoftmax(tensor([1, 2], [1, 2], 'i32'), 1)).toThrow(/topk_softmax: gating_output has dtype i32/);
    expect(() => F.topkSoftmax(tensor([1, 2], [1, 2]), 0)).toThrow(/topk_softmax/);
  });
});
