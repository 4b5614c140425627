/** The attention and quant groups through the op registry on the cpu backend. */
import { describe, expect, it } from 'vitest';
import { F, getOp, inferOp, OpError, supportedOps, type OpCall, type Tensor } from '@fastkernels/core';
import { cpu, expectClose, randn, Rng, tensor, values } from './test-helpers.js';

describe('attention group via the registry', () => {
  it('runs as a cpu kernel and matches the hand-computed value', () => {
    expect(supportedOps(cpu).find((s) => s.name === 'scaled_dot_product_attention')?.via).toBe('kernel');
    const k = tensor([0, Math.log(3)], [1, 1, 2, 1], 'f64');
    const v = tensor([4, 8], [1, 1, 2, 1], 'f64');
    expectClose(values(F.scaledDotProductAttention(tensor([1, 1], [1, 1, 2, 1], 'f64'), k, v, { scale: 1, is_causal: true })), [4, 7], 1e-12, 0);
    const mask = tensor([1, 0, 1, 1], [2, 2], 'bool');
    expectClose(values(F.scaledDotProductAttention(tensor([1, 1], [1, 1, 2, 1], 'f64'), k, v, { scale: 1, attn_mask: mask })), [4, 7], 1e-12, 0);
  });

  it('GQA shapes and errors', () => {
    const rng = new Rng(1);
    const y = F.scaledDotProductAttention(randn(rng, [2, 8, 3, 64], 'bf16'), randn(rng, [2, 2, 5, 64], 'bf16'), randn(rng, [2, 2, 5, 32], 'bf16'), { enable_gqa: true, is_causal: true });
    expect(y.shape).toEqual([2, 8, 3, 32]);
    expect(y.dtype).toBe('bf16');
    const q = randn(rng, [1, 4, 3, 8]);
    const kv = randn(rng, [1, 2, 5, 8]);
    expect(() => F.scaledDotProductAttention(q, kv, kv)).toThrow(OpError);
    expect(() => F.scaledDotProductAttention(q, kv, kv)).toThrow(/different head counts need enable_gqa=true/);
    expect(() => F.scaledDotProductAttention(q, kv, kv, { enable_gqa: true, attn_mask: randn(rng, [2, 5]) })).toThrow(/scaled_dot_product_attention: attn_mask \[2, 5\] does not broadcast to \[1, 4, 3, 5\]/);
    expect(() => F.scaledDotProductAttention(q, kv, kv, { enable_gqa: true, dropout_p: 0.5 })).toThrow(/dropout_p must be 0/);
  });
});

describe('scaled_dot_product_attention decomposition (matmul, mask, softmax, matmul)', () => {
  it('matches the kernel: GQA, causal, bool and float masks, bf16', () => {
    const rng = new Rng(11);
    const run = (inputs: (Tensor | null)[], attrs: Record<string, unknown>) => {
      const { spec, attrs: parsed, outputs } = inferOp('scaled_dot_product_attention', inputs, attrs);
      return (spec.decompose!({ op: spec, backend: cpu, inputs, attrs: parsed as Record<string, unknown>, outputs }) as Tensor[])[0]!;
    };
    for (const dtype of ['f32', 'bf16'] as const) {
      const tol = dtype === 'f32' ? 1e-5 : 3e-2;
      const q = randn(rng, [2, 4, 5, 16], dtype);
      const k = randn(rng, [2, 2, 7, 16], dtype);
      const v = randn(rng, [2, 2, 7, 8], dtype);
      const cases: [Tensor | null, Record<string, unknown>][] = [
        [null, { enable_gqa: true }],
        [null, { enable_gqa: true, is_causal: true, scale: 0.2 }],
        [tensor(Array.from({ length: 35 }, (_, i) => (i % 3 === 2 || i % 7 === 0 ? 1 : 0)), [5, 7], 'bool'), { enable_gqa: true }],
        [randn(rng, [2, 1, 5, 7], 'f32'), { enable_gqa: true }],
      ];
      for (const [mask, attrs] of cases) {
        const want = F.scaledDotProductAttention(q, k, v, { ...attrs, attn_mask: mask });
        const live = cpu.memoryStats().liveStorages;
        const got = run([q, k, v, mask], attrs);
        expect(cpu.memoryStats().liveStorages - live).toBe(1); // every intermediate released
        expect([got.shape, got.dtype]).toEqual([want.shape, want.dtype]);
        expectClose(values(got), values(want), tol, tol);
      }
    }
  });
});

describe('the engine attention ops agree with scaled_dot_product_attention', () => {
  it('paged_decode_attention = sdpa over the gathered cache (GQA, sliding window)', () => {
    const rng = new Rng(7);
    const [B, nQ, nKv, head, blockSize, numBlocks] = [2, 4, 2, 8, 3, 6];
    const q = randn(rng, [B, nQ, head]);
    const kc = randn(rng, [numBlocks, blockSize, nKv, head]);
    const vc = randn(rng, [numBlocks, blockSize, nKv, head]);
    const tables = [[4, 1, 0], [2, 5, 3]];
    const lens = [7, 5];
    for (const window of [0, 4]) {
      const y = F.pagedDecodeAttention(q, kc, vc, tensor(tables.flat(), [B, 3], 'i32'), tensor(lens, [B], 'i32'), { scale: 0.3, sliding_window: window });
      for (let b = 0; b < B; b++) {
        const rows = Array.from({ length: lens[b]! }, (_, t) => [tables[b]![Math.floor(t / blockSize)]!, t % blockSize] as const);
        const gatherKv = (c: Tensor) => tensor(rows.flatMap(([blk, off]) => values(c.select(0, blk).select(0, off))), [rows.length, nKv, head]).permute(1, 0, 2).unsqueeze(0);
        const L = lens[b]!;
        const mask = tensor(Array.from({ length: L }, (_, t) => (window === 0 || t >= L - window ? 1 : 0)), [1, L], 'bool');
        const want = F.scaledDotProductAttention(q.narrow(0, b, 1).unsqueeze(2), gatherKv(kc), gatherKv(vc), { scale: 0.3, enable_gqa: true, attn_mask: mask });
        expectClose(values(y.narrow(0, b, 1)), values(want), 1e-6, 1e-6);
      }
    }
  });

  it("paged_decode_attention's v_head_dim over a latent cache (one tensor as both caches): the first dims of the whole row's result", () => {
    // MLA's absorbed decode in small: one kv head of 20 (latent 16 + rope 4), the values the first 16 dims of each row
    const rng = new Rng(12);
    const [B, nQ, head, dv, blockSize, numBlocks] = [3, 4, 20, 16, 4, 9];
    const q = randn(rng, [B, nQ, head], 'f64');
    const cache = randn(rng, [numBlocks, blockSize, 1, head], 'f64');
    const bt = tensor([6, 2, 0, 1, 8, 3, 5, 4, 7], [B, 3], 'i32');
    const lens = tensor([9, 0, 12], [B], 'i32');
    const full = F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.2 });
    const narrow = F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.2, v_head_dim: dv });
    expect(narrow.shape).toEqual([B, nQ, dv]);
    expect(values(narrow)).toEqual(values(full.narrow(2, 0, dv).contiguous())); // the same float64 sums
    expect(values(F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.2, v_head_dim: head }))).toEqual(values(full));
    // with sinks (the kernel route only) and a window: still the first dims of the whole-row call
    const sinks = randn(rng, [nQ], 'f32');
    const fullS = F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.2, sliding_window: 5, sinks });
    const narrowS = F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.2, sliding_window: 5, sinks, v_head_dim: dv });
    expect(values(narrowS)).toEqual(values(fullS.narrow(2, 0, dv).contiguous()));
  });

  it('paged_decode_attention v_head_dim: the Ops route (a backend without the kernel) narrows the whole-row result; bad widths say why', () => {
    const rng = new Rng(13);
    const q = randn(rng, [2, 2, 6], 'f32');
    const cache = randn(rng, [3, 2, 1, 6], 'f32');
    const bt = tensor([2, 0, 1, 0], [2, 2], 'i32');
    const lens = tensor([3, 2], [2], 'i32');
    const inputs = [q, cache, cache, bt, lens, null];
    const spec = getOp('paged_decode_attention');
    const inferred = inferOp('paged_decode_attention', inputs, { scale: 0.5, v_head_dim: 4 });
    expect(inferred.outputs[0]!.shape).toEqual([2, 2, 4]);
    const call = { op: spec, backend: cpu, inputs, attrs: inferred.attrs as Record<string, unknown>, outputs: inferred.outputs } as OpCall;
    const [viaOps] = spec.viaOps!(cpu.ops, call)!;
    expect(viaOps!.shape).toEqual([2, 2, 4]);
    expect(viaOps!.isContiguous()).toBe(true);
    expect(values(viaOps!)).toEqual(values(F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.5, v_head_dim: 4 })));
    expect(() => F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.5, v_head_dim: 7 })).toThrow(/paged_decode_attention: v_head_dim 7 must be in 1\.\.6/);
    expect(() => F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.5, v_head_dim: 0 })).toThrow(OpError);
    expect(() => F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.5, v_head_dim: 1.5 })).toThrow(/bad arguments: v_head_dim/);
  });

  it('varlen_prefill_attention = per-sequence sdpa with a bottom-right causal mask', () => {
    const rng = new Rng(8);
    const [nQ, nKv, head] = [4, 1, 8];
    const lq = [3, 2];
    const lk = [3, 5];
    const q = randn(rng, [5, nQ, head]);
    const k = randn(rng, [8, nKv, head]);
    const v = randn(rng, [8, nKv, head]);
    const y = F.varlenPrefillAttention(q, k, v, tensor([0, 3, 5], [3], 'i32'), tensor([0, 3, 8], [3], 'i32'), { scale: 0.25, causal: true });
    let q0 = 0;
    let k0 = 0;
    for (let b = 0; b < 2; b++) {
      const [Lq, Lk] = [lq[b]!, lk[b]!];
      const mask = tensor(Array.from({ length: Lq * Lk }, (_, i) => (i % Lk <= Math.floor(i / Lk) + Lk - Lq ? 1 : 0)), [Lq, Lk], 'bool');
      const sel = (t: Tensor, s: number, n: number) => t.narrow(0, s, n).permute(1, 0, 2).unsqueeze(0);
      const want = F.scaledDotProductAttention(sel(q, q0, Lq), sel(k, k0, Lk), sel(v, k0, Lk), { scale: 0.25, enable_gqa: true, attn_mask: mask });
      expectClose(values(y.narrow(0, q0, Lq)), values(want.select(0, 0).permute(1, 0, 2)), 1e-6, 1e-6);
      q0 += Lq;
      k0 += Lk;
    }
    expect(() => F.varlenPrefillAttention(q, k, v, tensor([0, 5], [2], 'i32'), tensor([0, 3, 8], [3], 'i32'), { scale: 1 })).toThrow(/must both be \[B \+ 1\]/);
  });
});

describe('quant group via the registry', () => {
  it('fp8 quantise, dequantise and per-token-group', () => {
    const [q, s] = F.scaledFp8Quant(tensor([1, -2, 500, 1000], [4]), tensor([2], [1]));
    expect(q.dtype).toBe('fp8e4m3');
    expect(values(q)).toEqual([0.5, -1, 256, 448]);
    expect(values(F.fp8Dequant(q, s, { output_dtype: 'f32' }))).toEqual([1, -2, 512, 896]);
    const [gq, gs] = F.perTokenGroupQuantFp8(tensor([448, -224, 0, 0], [1, 4]), 2);
    expect(gs.shape).toEqual([1, 2]);
    expect(values(gq)).toEqual([448, -224, 0, 0]);
    expect(() => F.perTokenGroupQuantFp8(tensor([1, 2, 3], [3]), 2)).toThrow(/per_token_group_quant_fp8: the last dim of x \[3\] must be divisible by group_size 2/);
  });

  it('per_token_group_quant_fp8 decomposition (the CUDA route) = the kernel, UE8M0 scales included, exact at powers of two', () => {
    const rng = new Rng(5);
    const run = (x: Tensor, attrs: Record<string, unknown>) => {
      const { spec, attrs: parsed, outputs } = inferOp('per_token_group_quant_fp8', [x], attrs);
      return spec.decompose!({ op: spec, backend: cpu, inputs: [x], attrs: parsed as Record<string, unknown>, outputs }) as Tensor[];
    };
    // random groups, and groups whose scale is an exact power of two (amax 448 * 2^k) or a hair either side of one
    // (2^29 and 2^-57: log(s) / ln 2 reads 29.000000000000004 in float64 and -56.999996 in float32, so a plain ceil is off)
    const edge = [448, 448 * 2 ** -6, 448 * 2 ** 5, 448 * 2 ** 29, 448 * 2 ** -57, Math.fround(448 * 2 ** -3 * (1 + 2 ** -20)), Math.fround(448 * 2 ** 4 * (1 - 2 ** -20)), 1e-12];
    const x = tensor([...values(randn(rng, [4, 64], 'f32', 3)), ...edge.flatMap((a) => [a, -a / 3, a / 2, -a / 4])], [4 * 64 / 4 + edge.length, 4], 'f32');
    for (const scale_ue8m0 of [false, true]) {
      // eps far below the smallest scale, so every edge group's own amax sets it
      const attrs = { group_size: 4, scale_ue8m0, eps: 1e-30 };
      const [kq, ks] = F.perTokenGroupQuantFp8(x, 4, { scale_ue8m0, eps: 1e-30 });
      const [dq, ds] = run(x, attrs);
      expect(values(ds)).toEqual(values(ks));
      expect(values(dq)).toEqual(values(kq));
    }
    const [, s] = run(x, { group_size: 4, scale_ue8m0: true, eps: 1e-30 });
    const tail = values(s).slice(-edge.length);
    expect(tail.slice(0, 5)).toEqual([1, 2 ** -6, 2 ** 5, 2 ** 29, 2 ** -57]);
    expect(tail.slice(5, 7)).toEqual([2 ** -2, 2 ** 4]);
  });

  it('scaled_mm honours out_dtype and checks scales', () => {
    const a = tensor([1, 2, 3, 4], [2, 2], 'fp8e4m3');
    const b = tensor([1, 0, 0, 1], [2, 2], 'fp8e4m3');
    const y = F.scaledMm(a, b, tensor([0.5], [1]), tensor([4], [1]), { out_dtype: 'f32' });
    expect(y.dtype).toBe('f32');
    expect(y.toNested()).toEqual([[2, 4], [6, 8]]);
    expect(F.scaledMm(a, b, tensor([1, 2], [2, 1]), tensor([1, 1], [1, 2])).dtype).toBe('bf16');
    expect(() => F.scaledMm(a, b, tensor([1, 2], [1, 2]), tensor([1], [1]))).toThrow(/scale_a \[1, 2\] must be one element \(per-tensor\) or \[2, 1\] \(per-row\)/);
    expect(() => F.scaledMm(tensor([1, 2, 3, 4], [2, 2]), b, tensor([1], [1]), tensor([1], [1]))).toThrow(/scaled_mm: a has dtype f32/);
  });

  it('mxfp4_linear: the kernel and the decomposition (dequant then linear) agree', () => {
    const rng = new Rng(2);
    const [N, G] = [5, 2];
    const blocks = tensor(Array.from({ length: N * G * 16 }, () => Math.floor(rng.uniform() * 256)), [N, G, 16], 'u8');
    const scales = tensor(Array.from({ length: N * G }, () => 124 + Math.floor(rng.uniform() * 6)), [N, G], 'u8');
    const x = randn(rng, [3, 64], 'f32');
    const bias = randn(rng, [N], 'f32');
    const viaKernel = F.mxfp4Linear(x, blocks, scales, bias);
    const { spec, attrs, outputs } = inferOp('mxfp4_linear', [x, blocks, scales, bias]);
    const call: OpCall = { op: spec, backend: cpu, inputs: [x, blocks, scales, bias], attrs: attrs as Record<string, unknown>, outputs };
    const [viaOps] = spec.decompose!(call) as Tensor[];
    expect(viaOps!.shape).toEqual([3, N]);
    expectClose(values(viaKernel), values(viaOps!), 1e-6, 1e-6);
    expect(F.mxfp4Dequant(blocks, scales).shape).toEqual([N, 64]);
    expect(() => F.mxfp4Linear(randn(rng, [3, 63]), blocks, scales)).toThrow(/mxfp4_linear: input \[3, 63\] last dim must be K = 64/);
  });

  it('mxfp4_grouped_gemm: kernel = decomposition = grouped_gemm over the dequantised experts', () => {
    const rng = new Rng(3);
    const [E, N, G, T] = [3, 4, 2, 6];
    const blocks = tensor(Array.from({ length: E * N * G * 16 }, () => Math.floor(rng.uniform() * 256)), [E, N, G, 16], 'u8');
    const scales = tensor(Array.from({ length: E * N * G }, () => 124 + Math.floor(rng.uniform() * 6)), [E, N, G], 'u8');
    const x = randn(rng, [T, 64], 'bf16');
    const bias = randn(rng, [E, N], 'bf16');
    const w = F.mxfp4Dequant(blocks, scales, { dtype: 'f64' });
    for (const routing of [{ offsets: tensor([0, 2, 2, 5], [4], 'i32') }, { expertIds: tensor([2, -1, 0, 1, 1, 2], [T], 'i64') }]) {
      const got = F.mxfp4GroupedGemm(x, blocks, scales, routing, bias);
      expect(got.shape).toEqual([T, N]);
      expect(got.dtype).toBe('bf16');
      const want = F.groupedGemm(x.to('f64'), w, routing, bias.to('f64'));
      expectClose(values(got), values(want.to('bf16')), 0, 0);
      const inputs = [x, blocks, scales, routing.offsets ?? null, routing.expertIds ?? null, bias];
      const { spec, attrs, outputs } = inferOp('mxfp4_grouped_gemm', inputs);
      const [dec] = spec.decompose!({ op: spec, backend: cpu, inputs, attrs: attrs as Record<string, unknown>, outputs }) as Tensor[];
      expectClose(values(dec!), values(got), 1.6e-2, 1.6e-2);
    }
    expect(() => F.mxfp4GroupedGemm(x, blocks, scales, {})).toThrow(/mxfp4_grouped_gemm: give exactly one of offsets/);
    expect(() => F.mxfp4GroupedGemm(randn(rng, [T, 32], 'bf16'), blocks, scales, { expertIds: tensor([0, 0, 0, 0, 0, 0], [T], 'i32') })).toThrow(/input \[6, 32\] must be \[T, 64\]/);
  });
});
