import { describe, expect, it } from 'vitest';
import { cpu, expectClose, randn, Rng, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

/** cos|sin cache as vLLM builds it: inv_freq_i = base^(-2i/rotaryDim), angle = pos * inv_freq. */
function cosSinCache(maxPos: number, rotaryDim: number, base = 10000) {
  const half = rotaryDim / 2;
  const data: number[] = [];
  for (let p = 0; p < maxPos; p++) {
    const ang = Array.from({ length: half }, (_, i) => p * base ** (-(2 * i) / rotaryDim));
    data.push(...ang.map(Math.cos), ...ang.map(Math.sin));
  }
  return tensor(data, [maxPos, rotaryDim], 'f64');
}

describe('rotaryEmbedding', () => {
  const a = 0.3;
  const b = 1.1;
  // one position whose two frequencies have angles a and b
  const cache = tensor([1, 1, 0, 0, Math.cos(a), Math.cos(b), Math.sin(a), Math.sin(b)], [2, 4], 'f64');
  const [c0, c1, s0, s1] = [Math.cos(a), Math.cos(b), Math.sin(a), Math.sin(b)];

  it('neox style rotates pairs (i, i + rotaryDim/2)', () => {
    const q = tensor([1, 2, 3, 4], [1, 4], 'f64');
    const [y, k] = ops.rotaryEmbedding(tensor([1], [1], 'i64'), q, null, cache, 4, true);
    expect(k).toBeNull();
    expectClose(values(y), [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1], 1e-15);
  });

  it('gpt-j style rotates pairs (2i, 2i + 1)', () => {
    const q = tensor([1, 2, 3, 4], [1, 4], 'f64');
    const [y] = ops.rotaryEmbedding(tensor([1], [1], 'i32'), q, null, cache, 4, false);
    expectClose(values(y), [1 * c0 - 2 * s0, 2 * c0 + 1 * s0, 3 * c1 - 4 * s1, 4 * c1 + 3 * s1], 1e-15);
  });

  it('leaves the tail beyond rotaryDim unchanged and rotates every head of query and key', () => {
    // headSize 6, rotaryDim 4; query 2 heads, key 1 head
    const q = tensor([1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 7, 8], [1, 12], 'f64');
    const k = tensor([1, 2, 3, 4, 9, 9], [1, 1, 6], 'f64');
    const [yq, yk] = ops.rotaryEmbedding(tensor([1], [1], 'i32'), q, k, cache, 6, true);
    const head = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1];
    expectClose(values(yq), [...head, 5, 6, ...head, 7, 8], 1e-15);
    expect(yk!.shape).toEqual([1, 1, 6]);
    expectClose(values(yk!), [...head, 9, 9], 1e-15);
  });

  it('position 0 is the identity and rotation keeps pair norms', () => {
    const rng = new Rng(6);
    const T = 5;
    const q = randn(rng, [T, 2 * 8], 'f64');
    const pos = tensor([0, 3, 7, 1, 15], [T], 'i64');
    const [y] = ops.rotaryEmbedding(pos, q, null, cosSinCache(16, 8), 8, true);
    const Q = values(q);
    const Y = values(y);
    expectClose(Y.slice(0, 16), Q.slice(0, 16), 1e-15);
    for (let t = 0; t < T; t++)
      for (let h = 0; h < 2; h++)
        for (let i = 0; i < 4; i++) {
          const o = t * 16 + h * 8;
          expect(Math.hypot(Y[o + i]!, Y[o + i + 4]!)).toBeCloseTo(Math.hypot(Q[o + i]!, Q[o + i + 4]!), 12);
        }
  });

  it('flattens [B, S] positions like vLLM (query viewed as [B*S, heads, head])', () => {
    const q = tensor([1, 2, 3, 4, 1, 2, 3, 4], [1, 2, 4], 'f64');
    const [y] = ops.rotaryEmbedding(tensor([0, 1], [1, 2], 'i32'), q, null, cache, 4, true);
    expect(y.shape).toEqual([1, 2, 4]);
    expectClose(values(y), [1, 2, 3, 4, 1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1], 1e-15);
  });

  it('keeps the input dtype', () => {
    const [y, k] = ops.rotaryEmbedding(tensor([1], [1], 'i32'), tensor([1, 2, 3, 4], [1, 4], 'bf16'), tensor([1, 2, 3, 4], [1, 4], 'f16'), cache, 4, true);
    expect(y.dtype).toBe('bf16');
    expect(k!.dtype).toBe('f16');
  });

  it('rejects bad positions and shapes', () => {
    const q = tensor([1, 2, 3, 4], [1, 4], 'f64');
    expect(() => ops.rotaryEmbedding(tensor([2], [1], 'i32'), q, null, cache, 4, true)).toThrow(/position 2/);
    expect(() => ops.rotaryEmbedding(tensor([0, 1, 1], [3], 'i32'), q, null, cache, 4, true)).toThrow(/query/);
    expect(() => ops.rotaryEmbedding(tensor([0], [1], 'i32'), q, null, cache, 3, true)).toThrow(/rotaryDim/);
    expect(() => ops.rotaryEmbedding(tensor([0], [1], 'f32'), q, null, cache, 4, true)).toThrow(/integer/);
  });
});
