import { describe, expect, it } from 'vitest';
import { cpu, LAYOUTS, randn, relayout, Rng, tensor, Tensor, values } from './test-helpers.js';

const ops = cpu.ops;
type Result = Tensor | readonly (Tensor | null)[];

const flatten = (r: Result): (number[] | null)[] => (r instanceof Tensor ? [r] : r).map((t) => (t ? values(t) : null));

/**
 * Every op must read through strides: the result on transposed, stepped and narrowed copies
 * of the inputs equals (bit for bit) the result on the contiguous inputs.
 */
function expectLayoutInvariant(inputs: Tensor[], fn: (...xs: Tensor[]) => Result): void {
  const variants = LAYOUTS.map((layout) => inputs.map((t) => relayout(t, layout)));
  for (const v of variants) v.forEach((t, i) => expect(t.shape).toEqual(inputs[i]!.shape));
  expect(variants.some((v) => v.some((t) => !t.isContiguous()))).toBe(true);
  const want = flatten(fn(...inputs));
  for (const v of variants) expect(flatten(fn(...v))).toEqual(want);
}

describe('ops on non-contiguous inputs equal ops on contiguous copies', () => {
  const rng = new Rng(11);

  it('fill writes only the view elements', () => {
    const v = relayout(tensor([1, 2, 3, 4, 5, 6], [2, 3]), 'stepped');
    ops.fill(v, 9);
    expect(values(v)).toEqual([9, 9, 9, 9, 9, 9]);
    const all = new Float32Array(v.storage.hostBytes!.buffer, 0, v.storage.byteLength / 4);
    expect(Array.from(all).filter((x) => x === 9)).toHaveLength(6);
    expect(Array.from(all).filter(Number.isNaN)).toHaveLength(all.length - 6);
  });

  it('copy', () => {
    const src = randn(rng, [3, 4]);
    for (const a of LAYOUTS)
      for (const b of LAYOUTS) {
        const dst = relayout(Tensor.zeros(cpu, [3, 4], 'bf16'), a);
        ops.copy(dst, relayout(src, b));
        expect(values(dst)).toEqual(values(src.to('bf16')));
      }
  });

  it('add / mul (also with stride-0 expanded operands)', () => {
    expectLayoutInvariant([randn(rng, [3, 4]), randn(rng, [3, 4])], (a, b) => [ops.add(a!, b!), ops.mul(a!, b!)]);
    expectLayoutInvariant([randn(rng, [2, 3, 4]), randn(rng, [3, 1])], (a, b) => [ops.add(a!, b!), ops.mul(a!, b!)]);
    const row = randn(rng, [4]);
    const expanded = row.unsqueeze(0).expand(3, 4);
    expect(expanded.strides[0]).toBe(0);
    const x = randn(rng, [3, 4]);
    expect(values(ops.mul(x, expanded))).toEqual(values(ops.mul(x, expanded.contiguous())));
    expect(values(ops.add(expanded, x))).toEqual(values(ops.add(expanded.contiguous(), x)));
  });

  it('matmul / linear / embedding', () => {
    expectLayoutInvariant([randn(rng, [2, 3, 5]), randn(rng, [2, 5, 4])], (a, b) => ops.matmul(a!, b!));
    expectLayoutInvariant([randn(rng, [3, 5]), randn(rng, [4, 5]), randn(rng, [4])], (x, w, b) => ops.linear(x!, w!, b!));
    expectLayoutInvariant([tensor([3, 0, 2, 2], [2, 2], 'i64'), randn(rng, [4, 6], 'bf16')], (ids, w) => ops.embedding(ids!, w!));
    const w = randn(rng, [4, 5]);
    const bcast = w.unsqueeze(0).expand(2, 4, 5).transpose(1, 2);
    const a = randn(rng, [2, 3, 5]);
    expect(values(ops.matmul(a, bcast))).toEqual(values(ops.matmul(a, bcast.contiguous())));
  });

  it('rmsNorm / fusedAddRmsNorm / softmax', () => {
    expectLayoutInvariant([randn(rng, [3, 8], 'bf16'), randn(rng, [8], 'bf16')], (x, w) => ops.rmsNorm(x!, w!, 1e-6));
    expectLayoutInvariant([randn(rng, [3, 8], 'f16'), randn(rng, [3, 8], 'f16'), randn(rng, [8], 'f16')], (x, r, w) => ops.fusedAddRmsNorm(x!, r!, w!, 1e-5));
    expectLayoutInvariant([randn(rng, [3, 5, 2])], (x) => [ops.softmax(x!, 0), ops.softmax(x!, -2), ops.softmax(x!, -1)]);
    const x = randn(rng, [1, 8]).expand(4, 8);
    const w = randn(rng, [8]);
    expect(values(ops.rmsNorm(x, w, 1e-6))).toEqual(values(ops.rmsNorm(x.contiguous(), w, 1e-6)));
    expect(values(ops.softmax(x, 0))).toEqual(Array(32).fill(0.25));
  });

  it('siluAndMul / geluAndMul', () => {
    expectLayoutInvariant([randn(rng, [3, 8])], (x) => [ops.siluAndMul(x!), ops.geluAndMul(x!, 'none'), ops.geluAndMul(x!, 'tanh')]);
  });

  it('rotaryEmbedding (neox and gpt-j, with and without key)', () => {
    const cache = randn(rng, [16, 4], 'f32');
    const pos = tensor([3, 0, 15], [3], 'i64');
    for (const neox of [true, false]) {
      expectLayoutInvariant([pos, randn(rng, [3, 12]), randn(rng, [3, 6]), cache], (p, q, k, c) => ops.rotaryEmbedding(p!, q!, k!, c!, 6, neox));
      expectLayoutInvariant([pos, randn(rng, [3, 2, 6], 'bf16'), cache], (p, q, c) => ops.rotaryEmbedding(p!, q!, null, c!, 6, neox));
    }
  });

  it('storeKvcache_ writes through strided caches', () => {
    const inputs = [randn(rng, [3, 2, 4]), randn(rng, [3, 2, 4]), Tensor.zeros(cpu, [2, 2, 2, 4], 'f32'), Tensor.zeros(cpu, [2, 2, 2, 4], 'bf16'), tensor([2, -1, 1], [3], 'i32')];
    expectLayoutInvariant(inputs, (k, v, kc, vc, slots) => {
      ops.storeKvcache_(k!, v!, kc!, vc!, slots!);
      return [kc!, vc!];
    });
  });

  it('pagedDecodeAttention / varlenPrefillAttention', () => {
    expectLayoutInvariant(
      [randn(rng, [2, 4, 8]), randn(rng, [4, 2, 2, 8], 'bf16'), randn(rng, [4, 2, 2, 8], 'bf16'), tensor([3, 1, 0, 2], [2, 2], 'i32'), tensor([3, 4], [2], 'i32')],
      (q, kc, vc, bt, sl) => [ops.pagedDecodeAttention(q!, kc!, vc!, bt!, sl!, 0.35, 0), ops.pagedDecodeAttention(q!, kc!, vc!, bt!, sl!, 0.35, 2)],
    );
    expectLayoutInvariant(
      [randn(rng, [5, 4, 4]), randn(rng, [7, 2, 4]), randn(rng, [7, 2, 4]), tensor([0, 2, 5], [3], 'i32'), tensor([0, 3, 7], [3], 'i32')],
      (q, k, v, cq, ck) => [ops.varlenPrefillAttention(q!, k!, v!, cq!, ck!, 0.5, true, 0), ops.varlenPrefillAttention(q!, k!, v!, cq!, ck!, 0.5, false, 2)],
    );
  });

  it('sample', () => {
    expectLayoutInvariant(
      [randn(rng, [4, 10]), tensor([0, 1, 0.7, 1.3], [4]), tensor([0, 3, 0, 5], [4], 'i32'), tensor([1, 1, 0.8, 0.9], [4]), tensor([5, 6, 7, 2 ** 40 + 3], [4], 'i64')],
      (l, t, k, p, s) => ops.sample(l!, t!, k!, p!, s!),
    );
  });
});
