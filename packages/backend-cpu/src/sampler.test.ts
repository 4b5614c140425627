import { counterUniform } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpu, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

/** Run sample with per-row settings given as arrays. */
function run(logits: number[][], temperature: number[], topK: number[], topP: number[], seeds: number[]) {
  const B = logits.length;
  const V = logits[0]!.length;
  return ops.sample(tensor(logits.flat(), [B, V], 'f32'), tensor(temperature, [B], 'f32'), tensor(topK, [B], 'i32'), tensor(topP, [B], 'f32'), tensor(seeds, [B], 'i64'));
}

const repeat = <T>(n: number, x: T) => Array.from({ length: n }, () => x);

describe('sample', () => {
  it('temperature 0 is argmax with the lowest index on ties; output is i64 [B]', () => {
    const out = run([[1, 3, 3, 0], [-1, -2, -5, -1], [0, 0, 0, 0]], [0, 0, 0], [0, 0, 0], [1, 1, 1], [1, 2, 3]);
    expect(out.dtype).toBe('i64');
    expect(out.shape).toEqual([3]);
    expect(values(out)).toEqual([1, 0, 0]);
  });

  it('top-k 1 and tiny top-p both reduce to argmax whatever the seed', () => {
    const logits = repeat(20, [0.1, 0.5, 2, 1.9, -3]);
    expect(values(run(logits, repeat(20, 1), repeat(20, 1), repeat(20, 1), [...Array(20).keys()]))).toEqual(repeat(20, 2));
    expect(values(run(logits, repeat(20, 1), repeat(20, 0), repeat(20, 1e-6), [...Array(20).keys()]))).toEqual(repeat(20, 2));
  });

  it('is the exponential race over softmax(logits / T): argmax of p_i / -ln u(seed, 0, i), in every row', () => {
    const logits = [0.5, -1, 2, 0, 1.5, 0.25];
    const T = 0.8;
    for (let seed = 0; seed < 10; seed++) {
      const row = 3;
      const z = logits.map((l) => Math.exp(l / T));
      const scores = z.map((p, i) => p / -Math.log(counterUniform(seed, 0, i)));
      const want = scores.indexOf(Math.max(...scores));
      const out = run(repeat(4, logits), repeat(4, T), repeat(4, 0), repeat(4, 1), repeat(4, seed));
      expect(values(out)[row]).toBe(want);
    }
  });

  it('depends on the seed, not the batch slot: a request draws the same token in any row; the seed changes it', () => {
    const logits = repeat(8, [0, 0, 0, 0, 0, 0, 0, 0]);
    const a = values(run(logits, repeat(8, 1), repeat(8, 0), repeat(8, 1), repeat(8, 42)));
    expect(new Set(a).size).toBe(1); // same seed, same logits: the same token in every slot
    const seeds = [...Array(8).keys()].map((r) => 100 + r);
    const b = values(run(logits, repeat(8, 1), repeat(8, 0), repeat(8, 1), seeds));
    const reversed = values(run(logits, repeat(8, 1), repeat(8, 0), repeat(8, 1), [...seeds].reverse()));
    expect(reversed).toEqual([...b].reverse()); // the draws move with their requests
    expect(new Set(b).size).toBeGreaterThan(1); // different seeds draw different noise
  });

  it('draws from the softmax distribution', () => {
    const B = 4000;
    const probs = [0.1, 0.2, 0.3, 0.4];
    const out = values(run(repeat(B, probs.map(Math.log)), repeat(B, 1), repeat(B, 0), repeat(B, 1), [...Array(B).keys()]));
    const freq = probs.map((_, i) => out.filter((x) => x === i).length / B);
    freq.forEach((f, i) => expect(Math.abs(f - probs[i]!)).toBeLessThan(0.03));
  });

  it('top-k keeps the k largest (ties at the threshold kept); top-p keeps the smallest prefix reaching p', () => {
    const B = 3000;
    const probs = [0.1, 0.2, 0.3, 0.4];
    const seeds = [...Array(B).keys()].map((i) => i + 7);
    const k2 = values(run(repeat(B, probs.map(Math.log)), repeat(B, 1), repeat(B, 2), repeat(B, 1), seeds));
    expect(new Set(k2)).toEqual(new Set([2, 3]));
    expect(Math.abs(k2.filter((x) => x === 3).length / B - 4 / 7)).toBeLessThan(0.03);
    // cumulative 0.4, 0.7 >= 0.5: keeps {3, 2}
    const p5 = values(run(repeat(B, probs.map(Math.log)), repeat(B, 1), repeat(B, 0), repeat(B, 0.5), seeds));
    expect(new Set(p5)).toEqual(new Set([2, 3]));
    // p = 0.39 is reached by the first token (0.4) alone
    expect(new Set(values(run(repeat(50, probs.map(Math.log)), repeat(50, 1), repeat(50, 0), repeat(50, 0.39), seeds.slice(0, 50))))).toEqual(new Set([3]));
    // ties: k = 2 over [1, 1, 1, 0] keeps all three 1s
    const tie = values(run(repeat(300, [1, 1, 1, 0]), repeat(300, 1), repeat(300, 2), repeat(300, 1), seeds.slice(0, 300)));
    expect(new Set(tie)).toEqual(new Set([0, 1, 2]));
    // k >= V and k < 0 are off
    const off = values(run(repeat(300, [0, 0, 0]), repeat(300, 1), repeat(300, 3), repeat(300, 1), seeds.slice(0, 300)));
    expect(new Set(off).size).toBe(3);
  });

  it('top-k then top-p: p applies to the distribution renormalised over the top k', () => {
    // top-2 of [0.1, 0.2, 0.3, 0.4] renormalises to 3/7, 4/7; p = 0.5 then keeps only token 3
    const out = values(run(repeat(100, [0.1, 0.2, 0.3, 0.4].map(Math.log)), repeat(100, 1), repeat(100, 2), repeat(100, 0.5), [...Array(100).keys()]));
    expect(new Set(out)).toEqual(new Set([3]));
  });

  it('never samples a -inf logit and handles per-row settings', () => {
    const out = values(run([[-Infinity, 0, -Infinity], [5, 1, 0]], [1, 0], [0, 0], [1, 1], [1, 1]));
    expect(out).toEqual([1, 0]);
  });

  it('rejects bad shapes and negative temperatures', () => {
    expect(() => run([[1, 2]], [-1], [0], [1], [0])).toThrow(/temperature/);
    expect(() => ops.sample(tensor([1, 2], [2]), tensor([1], [1]), tensor([0], [1], 'i32'), tensor([1], [1]), tensor([0], [1], 'i64'))).toThrow(/rank 2/);
    expect(() => ops.sample(tensor([1, 2], [1, 2]), tensor([1, 1], [2]), tensor([0], [1], 'i32'), tensor([1], [1]), tensor([0], [1], 'i64'))).toThrow(/temperature/);
  });
});
