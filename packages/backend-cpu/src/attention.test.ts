import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { pagedDecodeAttention } from './ops/attention.js';
import { cpu, expectClose, randn, Rng, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

/** Straightforward attention of one query row over explicit key/value rows (test oracle). */
function naive(q: number[], keys: number[][], vals: number[][], scale: number): number[] {
  if (keys.length === 0) return q.map(() => 0);
  const s = keys.map((k) => scale * k.reduce((acc, kv, d) => acc + kv * q[d]!, 0));
  const m = Math.max(...s);
  const w = s.map((x) => Math.exp(x - m));
  const z = w.reduce((a, b) => a + b, 0);
  return q.map((_, d) => vals.reduce((acc, v, j) => acc + (w[j]! / z) * v[d]!, 0));
}

const row = (flat: number[], i: number, n: number) => flat.slice(i * n, (i + 1) * n);

describe('storeKvcache_', () => {
  it('writes key/value at their slots in place and skips slot -1', () => {
    const kc = Tensor.zeros(cpu, [2, 2, 1, 2], 'f32');
    const vc = Tensor.zeros(cpu, [2, 2, 1, 2], 'f32');
    const key = tensor([1, 2, 3, 4, 5, 6], [3, 1, 2]);
    const value = tensor([-1, -2, -3, -4, -5, -6], [3, 1, 2]);
    ops.storeKvcache_(key, value, kc, vc, tensor([3, -1, 0], [3], 'i64'));
    expect(values(kc)).toEqual([5, 6, 0, 0, 0, 0, 1, 2]);
    expect(values(vc)).toEqual([-5, -6, 0, 0, 0, 0, -1, -2]);
  });

  it('writes through strided cache views and converts to the cache dtype', () => {
    const both = Tensor.zeros(cpu, [2, 1, 2, 1, 2], 'fp8e4m3'); // [k|v, blocks, blockSize, nKv, head]
    const kc = both.select(0, 0);
    const vc = both.select(0, 1);
    ops.storeKvcache_(tensor([0.3, 500], [1, 1, 2]), tensor([1, 2], [1, 1, 2]), kc, vc, tensor([1], [1], 'i32'));
    const kv = values(kc);
    expect(kv.slice(0, 3)).toEqual([0, 0, 0.3125]); // 0.3 rounds to the nearest e4m3 value
    expect(Number.isNaN(kv[3]!)).toBe(true); // 500 overflows e4m3fn: NaN like torch's cast
    expect(values(vc)).toEqual([0, 0, 1, 2]);
  });

  it('a latent cache (one tensor as both caches, one row as key and value) is written once; two sources for it are an error', () => {
    const cache = Tensor.zeros(cpu, [2, 2, 1, 3], 'f32');
    const rows = tensor([1, 2, 3, 4, 5, 6], [2, 1, 3]);
    ops.storeKvcache_(rows, rows, cache, cache, tensor([2, 1], [2], 'i64'));
    expect(values(cache)).toEqual([0, 0, 0, 4, 5, 6, 1, 2, 3, 0, 0, 0]);
    ops.storeKvcache_(rows, rows.view([2, 1, 3]), cache, cache.view([2, 2, 1, 3]), tensor([0, -1], [2], 'i64')); // views of them
    expect(values(cache).slice(0, 3)).toEqual([1, 2, 3]);
    expect(() => ops.storeKvcache_(rows, tensor([0, 0, 0, 0, 0, 0], [2, 1, 3]), cache, cache, tensor([0, 1], [2], 'i64'))).toThrow(/one tensor \(a latent cache\) but key and value differ/);
    expect(values(cache).slice(0, 3)).toEqual([1, 2, 3]); // nothing written
  });

  it('rejects mismatched shapes and slots beyond the cache', () => {
    const kc = Tensor.zeros(cpu, [1, 2, 1, 2], 'f32');
    const k = tensor([1, 2], [1, 1, 2]);
    expect(() => ops.storeKvcache_(k, k, kc, kc, tensor([2], [1], 'i32'))).toThrow(/slot 2/);
    expect(() => ops.storeKvcache_(k, k, kc, kc, tensor([0, 1], [2], 'i32'))).toThrow(/slotMapping/);
    expect(() => ops.storeKvcache_(tensor([1, 2, 3], [1, 1, 3]), tensor([1, 2, 3], [1, 1, 3]), kc, kc, tensor([0], [1], 'i32'))).toThrow(/per slot/);
  });
});

describe('pagedDecodeAttention', () => {
  it('one visible token returns its value; two tokens weight by softmax(scale q.k)', () => {
    // blockSize 1: token t of sequence 0 lives in block table[t]
    const kc = tensor([1, 0, 0, 1, 9, 9], [3, 1, 1, 2], 'f64');
    const vc = tensor([10, 20, 30, 40, 7, 7], [3, 1, 1, 2], 'f64');
    const q = tensor([2, 0], [1, 1, 2], 'f64');
    const one = ops.pagedDecodeAttention(q, kc, vc, tensor([1, 0], [1, 2], 'i32'), tensor([1], [1], 'i32'), 0.5, 0);
    expect(values(one)).toEqual([30, 40]);
    const two = ops.pagedDecodeAttention(q, kc, vc, tensor([0, 1], [1, 2], 'i32'), tensor([2], [1], 'i32'), 0.5, 0);
    const p = Math.exp(1) / (Math.exp(1) + 1);
    expectClose(values(two), [10 * p + 30 * (1 - p), 20 * p + 40 * (1 - p)], 1e-14);
    // sliding window 1: only the last token
    expect(values(ops.pagedDecodeAttention(q, kc, vc, tensor([0, 1], [1, 2], 'i32'), tensor([2], [1], 'i32'), 0.5, 1))).toEqual([30, 40]);
  });

  it('maps query heads to kv heads (GQA), outputs zeros for empty sequences', () => {
    const kc = tensor([1, 1, 1, 1], [1, 1, 2, 2], 'f64');
    const vc = tensor([1, 2, 3, 4], [1, 1, 2, 2], 'f64');
    const q = tensor([1, 0, 0, 1, 1, 1, 5, 5, 0, 0, 0, 0, 0, 0, 0, 0], [2, 4, 2], 'f64');
    const out = ops.pagedDecodeAttention(q, kc, vc, tensor([0, 0], [2, 1], 'i32'), tensor([1, 0], [2], 'i32'), 1, 0);
    expect(out.shape).toEqual([2, 4, 2]);
    expect(values(out)).toEqual([1, 2, 1, 2, 3, 4, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
  });

  it('agrees with a naive gather of the paged tokens on random data', () => {
    const rng = new Rng(7);
    const [B, nQ, nKv, head, blockSize, numBlocks] = [3, 4, 2, 8, 4, 10];
    const lens = [5, 11, 1];
    const perm = rng.permutation(numBlocks);
    const tables = [perm.slice(0, 3), perm.slice(3, 6), perm.slice(6, 9)].flat();
    const q = randn(rng, [B, nQ, head], 'f32');
    const kc = randn(rng, [numBlocks, blockSize, nKv, head], 'bf16');
    const vc = randn(rng, [numBlocks, blockSize, nKv, head], 'bf16');
    const scale = 1 / Math.sqrt(head);
    for (const window of [0, 3]) {
      const out = values(ops.pagedDecodeAttention(q, kc, vc, tensor(tables, [B, 3], 'i32'), tensor(lens, [B], 'i32'), scale, window));
      const Q = values(q);
      const K = values(kc);
      const V = values(vc);
      const want: number[] = [];
      for (let b = 0; b < B; b++)
        for (let h = 0; h < nQ; h++) {
          const kvh = Math.floor(h / 2);
          const ks: number[][] = [];
          const vs: number[][] = [];
          for (let t = window ? Math.max(0, lens[b]! - window) : 0; t < lens[b]!; t++) {
            const slot = (tables[b * 3 + Math.floor(t / blockSize)]! * blockSize + (t % blockSize)) * nKv + kvh;
            ks.push(row(K, slot, head));
            vs.push(row(V, slot, head));
          }
          want.push(...naive(row(Q, b * nQ + h, head), ks, vs, scale).map(Math.fround));
        }
      expectClose(out, want, 1e-6);
    }
  });

  it('rejects inconsistent inputs', () => {
    const kc = Tensor.zeros(cpu, [2, 2, 2, 4], 'f32');
    const q3 = Tensor.zeros(cpu, [1, 3, 4], 'f32');
    const tbl = tensor([0], [1, 1], 'i32');
    expect(() => ops.pagedDecodeAttention(q3, kc, kc, tbl, tensor([1], [1], 'i32'), 1, 0)).toThrow(/multiple/);
    const q = Tensor.zeros(cpu, [1, 2, 4], 'f32');
    expect(() => ops.pagedDecodeAttention(q, kc, kc, tbl, tensor([3], [1], 'i32'), 1, 0)).toThrow(/exceeds/);
    expect(() => ops.pagedDecodeAttention(q, kc, kc, tensor([5], [1, 1], 'i32'), tensor([1], [1], 'i32'), 1, 0)).toThrow(/out of range/);
    expect(() => ops.pagedDecodeAttention(Tensor.zeros(cpu, [1, 2, 3], 'f32'), kc, kc, tbl, tensor([1], [1], 'i32'), 1, 0)).toThrow(/head size/);
  });

  it('a value width below the row width keeps the first dims of each value row; out of range is an error', () => {
    // one token: the output is its value row's first valueDim dims
    const kc = tensor([1, 0, 0, 1, 9, 9], [3, 1, 1, 2], 'f64');
    const vc = tensor([10, 20, 30, 40, 7, 7], [3, 1, 1, 2], 'f64');
    const q = tensor([2, 0], [1, 1, 2], 'f64');
    const [tbl, one] = [tensor([1, 0], [1, 2], 'i32'), tensor([1], [1], 'i32')];
    const out = pagedDecodeAttention(cpu, q, kc, vc, tbl, one, 0.5, 0, null, 1);
    expect(out.shape).toEqual([1, 1, 1]);
    expect(values(out)).toEqual([30]);
    expect(values(pagedDecodeAttention(cpu, q, kc, vc, tbl, one, 0.5, 0, null, 2))).toEqual([30, 40]);
    for (const bad of [0, 3, 1.5]) expect(() => pagedDecodeAttention(cpu, q, kc, vc, tbl, one, 0.5, 0, null, bad)).toThrow(`value width ${bad} must be an integer in 1..2`);
  });
});

describe('varlenPrefillAttention', () => {
  /** Naive oracle over explicit masks. */
  function reference(Q: number[], K: number[], V: number[], cq: number[], ck: number[], nQ: number, nKv: number, head: number, scale: number, causal: boolean, w: number): number[] {
    const out = new Array<number>(Q.length).fill(0);
    for (let i = 0; i + 1 < cq.length; i++) {
      const lq = cq[i + 1]! - cq[i]!;
      const lk = ck[i + 1]! - ck[i]!;
      for (let j = 0; j < lq; j++)
        for (let h = 0; h < nQ; h++) {
          const kvh = Math.floor(h / (nQ / nKv));
          const ks: number[][] = [];
          const vs: number[][] = [];
          for (let key = 0; key < lk; key++) {
            const diag = j + lk - lq;
            if (causal && key > diag) continue;
            if (w > 0 && key < diag - w + 1) continue;
            ks.push(row(K, (ck[i]! + key) * nKv + kvh, head));
            vs.push(row(V, (ck[i]! + key) * nKv + kvh, head));
          }
          const o = naive(row(Q, (cq[i]! + j) * nQ + h, head), ks, vs, scale);
          o.forEach((x, d) => (out[((cq[i]! + j) * nQ + h) * head + d] = x));
        }
    }
    return out;
  }

  it('bottom-right causal: with 2 queries over 3 keys, query 0 sees keys 0..1', () => {
    const q = tensor([0, 0], [2, 1, 1], 'f64');
    const k = tensor([0, 0, 0], [3, 1, 1], 'f64');
    const v = tensor([3, 6, 9], [3, 1, 1], 'f64');
    const cu = (n: number) => tensor([0, n], [2], 'i32');
    expect(values(ops.varlenPrefillAttention(q, k, v, cu(2), cu(3), 1, true, 0))).toEqual([4.5, 6]);
    expect(values(ops.varlenPrefillAttention(q, k, v, cu(2), cu(3), 1, false, 0))).toEqual([6, 6]);
    expect(values(ops.varlenPrefillAttention(q, k, v, cu(2), cu(3), 1, true, 1))).toEqual([6, 9]);
  });

  it('a query that sees no key outputs zeros', () => {
    const q = tensor([1, 1, 1], [3, 1, 1], 'f64');
    const k = tensor([1], [1, 1, 1], 'f64');
    const v = tensor([5], [1, 1, 1], 'f64');
    const out = ops.varlenPrefillAttention(q, k, v, tensor([0, 3], [2], 'i32'), tensor([0, 1], [2], 'i32'), 1, true, 0);
    expect(values(out)).toEqual([0, 0, 5]);
  });

  it('matches the naive oracle for several sequences with GQA, windows and causal/non-causal', () => {
    const rng = new Rng(8);
    const [nQ, nKv, head] = [4, 2, 4];
    const cq = [0, 3, 4, 9];
    const ck = [0, 5, 9, 14];
    const q = randn(rng, [9, nQ, head], 'f32');
    const k = randn(rng, [14, nKv, head], 'f32');
    const v = randn(rng, [14, nKv, head], 'f32');
    for (const [causal, w] of [[true, 0], [true, 2], [false, 0], [false, 3]] as const) {
      const out = ops.varlenPrefillAttention(q, k, v, tensor(cq, [4], 'i32'), tensor(ck, [4], 'i32'), 0.5, causal, w);
      expect(out.dtype).toBe('f32');
      expectClose(values(out), reference(values(q), values(k), values(v), cq, ck, nQ, nKv, head, 0.5, causal, w).map(Math.fround), 1e-6);
    }
  });

  it('equals paged decode for a single query per sequence', () => {
    const rng = new Rng(9);
    const [nQ, nKv, head] = [2, 1, 4];
    const k = randn(rng, [7, nKv, head], 'f64');
    const v = randn(rng, [7, nKv, head], 'f64');
    const q = randn(rng, [2, nQ, head], 'f64');
    const varlen = ops.varlenPrefillAttention(q, k, v, tensor([0, 1, 2], [3], 'i32'), tensor([0, 3, 7], [3], 'i32'), 0.7, true, 0);
    // the same tokens in a cache with blockSize 1, blocks in order
    const kc = k.view(7, 1, nKv, head);
    const vc = v.view(7, 1, nKv, head);
    const tables = tensor([0, 1, 2, 0, 3, 4, 5, 6], [2, 4], 'i32');
    const paged = ops.pagedDecodeAttention(q, kc, vc, tables, tensor([3, 4], [2], 'i32'), 0.7, 0);
    expectClose(values(paged), values(varlen), 1e-14);
  });

  it('rejects bad cu_seqlens and shapes', () => {
    const q = Tensor.zeros(cpu, [2, 2, 4], 'f32');
    const k = Tensor.zeros(cpu, [2, 1, 4], 'f32');
    expect(() => ops.varlenPrefillAttention(q, k, k, tensor([0, 3], [2], 'i32'), tensor([0, 2], [2], 'i32'), 1, true, 0)).toThrow(/cu_seqlens/);
    expect(() => ops.varlenPrefillAttention(q, k, k, tensor([0, 2], [2], 'i32'), tensor([0, 1, 2], [3], 'i32'), 1, true, 0)).toThrow(/B \+ 1/);
    expect(() => ops.varlenPrefillAttention(q, Tensor.zeros(cpu, [2, 1, 3], 'f32'), k, tensor([0, 2], [2], 'i32'), tensor([0, 2], [2], 'i32'), 1, true, 0)).toThrow(/must both be/);
  });
});
