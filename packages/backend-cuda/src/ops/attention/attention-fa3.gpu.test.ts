/**
 * The FA3 prefill route (prefill-fa3.ts, kernels/attention_fa3.cu) on an sm_90a GPU: varlen_prefill_attention through the
 * op registry on CUDA, checked against the float64 CPU backend and against the route before it (attention.prefillFa3
 * off: the wgmma kernel at head dim 128, mma.sync at 64) on the lab's small case, odd-length batches, head dims 64 and
 * 128, causal and not, GQA, bf16 and f16, sliding windows, chunked prefill, fused-qkv views, attention sinks (gpt-oss:
 * the FK_SINKS=1 build, vs the float64 kernel with sinks and the wgmma / mma.sync sinks kernels), and a CUDA graph's
 * replay against the eager call. Dense SDPA on it in place ([B, H, S, D] read through maps of their own strides, the
 * output written through its [H, L, D] strides): bit for bit the varlen op on packed copies, and in a graph. Each case first asserts the route takes the FA3 kernel (a decline names its reason), so a
 * silent fallback cannot pass as FA3.
 */
import { callOp1, Rng, Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { varlenOffsets } from '../../../test/varlen-batch.js';
import { G, cpu, expectClose, gpu, poison, randCpu, toGpu, tolOf, withTuning } from '../../../test/spine-helpers.js';
import type { Tuning } from '../../tuning/schema.js';
import { fileKernel } from '../launch/common.js';
import { prefillFa3Route, spineOf } from './attention.js';
import { fa3Defines } from './prefill-fa3.js';

const withAttention = <R>(patch: Partial<Tuning['attention']>, fn: () => R): R => withTuning('attention', patch, fn);
const OFF = { prefillFa3: false };

interface Fa3Case {
  nQ: number;
  nKv: number;
  D: 64 | 128;
  dtype: DType;
  qLens: number[];
  kLens?: number[];
  causal?: boolean;
  window?: number;
  /** q / k / v as slices of one fused [T, nQ + 2 nKv, D] tensor (strided views the tensor maps read in place). */
  fused?: boolean;
  /** nQ fp32 sink logits (gpt-oss): moderate ones, and (nQ > 2) one far above the scores and one far below. */
  sinks?: boolean;
}

function sinksCpu(nQ: number, seed: number): Tensor {
  const rng = new Rng(seed);
  const v = Array.from({ length: nQ }, () => rng.uniform() * 4 - 1);
  if (nQ > 2) {
    v[1] = 40; // 2^(40 log2(e) - m) overflows fp32 unless the max takes the sink
    v[2] = -60;
  }
  return Tensor.fromArray(cpu(), v, [nQ], 'f32');
}

function inputs(c: Fa3Case, seed: number) {
  const { cq, ck, Tq, Tk } = varlenOffsets(c.qLens, c.kLens);
  let cpuQkv: Tensor[];
  let gpuQkv: Tensor[];
  if (c.fused) {
    const f = randCpu([Tq, c.nQ + 2 * c.nKv, c.D], c.dtype, seed);
    const g = toGpu(f);
    const split = (t: Tensor) => [t.narrow(1, 0, c.nQ), t.narrow(1, c.nQ, c.nKv), t.narrow(1, c.nQ + c.nKv, c.nKv)];
    cpuQkv = split(f);
    gpuQkv = split(g);
  } else {
    cpuQkv = [randCpu([Tq, c.nQ, c.D], c.dtype, seed), randCpu([Tk, c.nKv, c.D], c.dtype, seed + 1), randCpu([Tk, c.nKv, c.D], c.dtype, seed + 2)];
    gpuQkv = cpuQkv.map(toGpu);
  }
  const sinks = c.sinks ? sinksCpu(c.nQ, seed + 7) : null;
  return { cpuIn: [...cpuQkv, cq, ck, sinks], gpuIn: [...gpuQkv, toGpu(cq), toGpu(ck), sinks && toGpu(sinks)], Tq, numSeqs: c.qLens.length };
}

const label = (c: Fa3Case) => JSON.stringify({ ...c, qLens: c.qLens.length > 8 ? `${c.qLens.length} seqs` : c.qLens });

function check(c: Fa3Case, seed = 3): void {
  const { cpuIn, gpuIn, Tq, numSeqs } = inputs(c, seed);
  const [q, k, v] = gpuIn as Tensor[];
  const route = prefillFa3Route(spineOf('fa3 test', gpu()), q!, k!, v!, Tq, numSeqs);
  expect(route.take ? 'fa3' : route.reason, `route of ${label(c)}`).toBe('fa3');
  const attrs = { scale: 1 / Math.sqrt(c.D), causal: c.causal ?? true, sliding_window: c.window ?? 0 };
  const expected = callOp1('varlen_prefill_attention', cpuIn, attrs);
  const n = expected.numel;
  poison(n, n * 4);
  const fa3 = callOp1('varlen_prefill_attention', gpuIn, attrs);
  expectClose(fa3, expected, tolOf(c.dtype), `FA3 vs float64 ${label(c)}`);
  poison(n, n * 4);
  const before = withAttention(OFF, () => callOp1('varlen_prefill_attention', gpuIn, attrs));
  expectClose(before, expected, tolOf(c.dtype), `the route before FA3 vs float64 ${label(c)}`);
  expectClose(fa3, before, tolOf(c.dtype), `FA3 vs the route before it ${label(c)}`);
  if (c.sinks) {
    // the sinks matter here (else the comparisons above would pass with them ignored)
    const without = callOp1('varlen_prefill_attention', [...cpuIn.slice(0, 5), null], attrs);
    const e = expected.toFloat64Array();
    const w = without.toFloat64Array();
    expect(e.some((x, i) => Math.abs(x - w[i]!) > 0.05 * (Math.abs(w[i]!) + 0.05)), `sinks change ${label(c)}`).toBe(true);
    without.dispose();
  }
  for (const t of [fa3, before, expected, ...gpuIn, ...cpuIn]) t?.dispose();
}

describe('varlen prefill on the FA3 kernel (sm_90a) vs float64 and vs the wgmma / mma.sync route', () => {
  it("the lab's small case: 2 sequences (300, 77), 4 / 2 heads, causal, bf16, head dim 128 and 64", G, () => {
    check({ nQ: 4, nKv: 2, D: 128, dtype: 'bf16', qLens: [300, 77] });
    check({ nQ: 4, nKv: 2, D: 64, dtype: 'bf16', qLens: [300, 77] });
  });
  for (const dtype of ['bf16', 'f16'] as DType[]) {
    for (const D of [64, 128] as const) {
      for (const causal of [true, false]) {
        it(`${dtype} D=${D} ${causal ? 'causal' : 'not causal'}: odd lengths, GQA 4 and 1`, G, () => {
          check({ nQ: 8, nKv: 2, D, dtype, qLens: [1, 15, 127, 129, 255, 333], causal });
          check({ nQ: 3, nKv: 3, D, dtype, qLens: [17, 200], causal });
        });
      }
    }
  }
  for (const window of [1, 64, 100, 300]) {
    it(`sliding window ${window}: bf16 D 128 causal, f16 D 64 not causal`, G, () => {
      check({ nQ: 4, nKv: 1, D: 128, dtype: 'bf16', qLens: [500, 17, 130], window });
      check({ nQ: 4, nKv: 2, D: 64, dtype: 'f16', qLens: [260, 30], causal: false, window });
    });
  }
  it('chunked prefill (more keys than queries) and rows that see no key (q longer than k, causal: zeros)', G, () => {
    check({ nQ: 8, nKv: 2, D: 128, dtype: 'bf16', qLens: [16, 100, 1, 65], kLens: [500, 100, 1000, 130] });
    check({ nQ: 4, nKv: 2, D: 64, dtype: 'f16', qLens: [100, 20, 3], kLens: [30, 0, 1] });
  });
  it('empty sequences in the batch; more than 32 sequences (the tile search over several warps of cu_seqlens)', G, () => {
    check({ nQ: 4, nKv: 2, D: 128, dtype: 'bf16', qLens: [0, 33, 0, 130, 0] });
    const lens = Array.from({ length: 45 }, (_, i) => (i * 37) % 41);
    check({ nQ: 4, nKv: 4, D: 64, dtype: 'bf16', qLens: lens, kLens: lens.map((l, i) => l + (i % 3)) });
  });
  it('q / k / v as views of one fused qkv tensor (the tensor maps take their strides), Llama-3-8B heads', G, () => {
    check({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', qLens: [300, 77], fused: true });
    check({ nQ: 8, nKv: 2, D: 64, dtype: 'f16', qLens: [140, 9], fused: true, window: 16 });
  });
});

describe('varlen prefill with attention sinks (gpt-oss) on the FA3 kernel vs float64 and vs the wgmma / mma.sync sinks kernels', () => {
  for (const dtype of ['bf16', 'f16'] as DType[]) {
    for (const D of [64, 128] as const) {
      it(`${dtype} D=${D}: causal and not, GQA 4 and 1, odd lengths; rows that see no key stay zeros`, G, () => {
        check({ nQ: 8, nKv: 2, D, dtype, qLens: [1, 15, 127, 129, 333], sinks: true });
        check({ nQ: 3, nKv: 3, D, dtype, qLens: [17, 200], causal: false, sinks: true });
        check({ nQ: 4, nKv: 2, D, dtype, qLens: [100, 20, 3], kLens: [30, 0, 1], sinks: true });
      });
    }
  }
  for (const window of [1, 128]) {
    it(`sliding window ${window} (gpt-oss's 128): bf16 D 64 causal, f16 D 128 not causal, chunked`, G, () => {
      check({ nQ: 8, nKv: 1, D: 64, dtype: 'bf16', qLens: [500, 17, 130], window, sinks: true });
      check({ nQ: 4, nKv: 2, D: 128, dtype: 'f16', qLens: [150, 30], kLens: [300, 30], causal: false, window, sinks: true });
    });
  }
  it('gpt-oss-20b heads (64 q / 8 kv, D 64, window 128) on a fused qkv, 1000 + 129 tokens', G, () => {
    check({ nQ: 64, nKv: 8, D: 64, dtype: 'bf16', qLens: [1000, 129], window: 128, fused: true, sinks: true });
  });
});

describe('the FA3 kernel as NVRTC builds it, and the routes through it', () => {
  it('NVRTC compiles the body for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL: an empty body would use a few registers), no local memory', G, () => {
    const ctx = spineOf('fa3 build test', gpu());
    expect(ctx.runtime.properties().arch).toBe('sm_90a');
    for (const dtype of ['bf16', 'f16'] as const) {
      for (const D of [64, 128]) {
        for (const sinks of [false, true]) {
          const name = fa3Defines(dtype, D, sinks).join(' ');
          const a = fileKernel(ctx, 'attention_fa3.cu', 'fk_varlen_prefill_fa3', fa3Defines(dtype, D, sinks)).attributes();
          expect(a.numRegs, `${name}: registers`).toBeGreaterThanOrEqual(128);
          expect(a.localBytes, `${name}: local memory (spills)`).toBe(0);
        }
      }
    }
  });

  it('scaled_dot_product_attention on the flash prefill route takes it too (causal L = S, GQA): vs float64 and the route before', G, () => {
    const [qc, kc, vc] = [randCpu([2, 8, 300, 128], 'bf16', 21), randCpu([2, 2, 300, 128], 'bf16', 22), randCpu([2, 2, 300, 128], 'bf16', 23)];
    const [q, k, v] = [qc, kc, vc].map(toGpu) as [Tensor, Tensor, Tensor];
    // the views the SDPA route hands the prefill op ([rows, heads, D] of a batch entry: head stride > row stride)
    const [qv, kv] = [q.select(0, 1).transpose(0, 1), k.select(0, 1).transpose(0, 1)];
    const route = prefillFa3Route(spineOf('fa3 sdpa test', gpu()), qv, kv, kv, 300, 1);
    expect(route.take ? 'fa3' : route.reason, 'route of the SDPA views').toBe('fa3');
    for (const t of [qv, kv]) t.dispose();
    const attrs = { is_causal: true, enable_gqa: true };
    const want = callOp1('scaled_dot_product_attention', [qc, kc, vc, null], attrs);
    const fa3 = callOp1('scaled_dot_product_attention', [q, k, v, null], attrs);
    const before = withAttention(OFF, () => callOp1('scaled_dot_product_attention', [q, k, v, null], attrs));
    expectClose(fa3, want, tolOf('bf16'), 'SDPA via prefill (FA3) vs float64');
    expectClose(fa3, before, tolOf('bf16'), 'SDPA via prefill: FA3 vs the route before');
    for (const t of [qc, kc, vc, q, k, v, want, fa3, before]) t.dispose();
  });

  it('SDPA on the FA3 kernel in place (no copy) is bit for bit the varlen op on packed copies of each batch entry, B 1 and 2, hd 64 and 128', G, () => {
    const sdpa = gpu().generatedOps.sdpa;
    const cases = [
      { q: [1, 8, 700, 128], kv: [1, 2, 700, 128], causal: true },
      { q: [2, 8, 300, 128], kv: [2, 2, 300, 128], causal: true }, // the batch folded into the heads: one launch
      { q: [2, 4, 257, 64], kv: [2, 4, 400, 64], causal: false },
    ];
    cases.forEach((c, i) => {
      const [q, k, v] = [randCpu(c.q, 'bf16', 40 + i), randCpu(c.kv, 'bf16', 50 + i), randCpu(c.kv, 'bf16', 60 + i)].map(toGpu) as [Tensor, Tensor, Tensor];
      const [B, H, L, D] = c.q as [number, number, number, number];
      const S = c.kv[2]!;
      poison(q.numel / 2, q.numel);
      const out = callOp1('scaled_dot_product_attention', [q, k, v, null], { is_causal: c.causal, enable_gqa: c.kv[1] !== H });
      expect(sdpa.lastPath, `${c.q.join('x')}: ${sdpa.lastFa3Decline}`).toBe('fa3');
      const cu = (n: number) => toGpu(Tensor.fromArray(cpu(), [0, n], [2], 'i32'));
      const [cq, ck] = [cu(L), cu(S)];
      for (let b = 0; b < B; b++) {
        // [rows, heads, D] packed copies of entry b: the varlen op's own layout
        const packed = (t: Tensor) => t.select(0, b).transpose(0, 1).contiguous();
        const [qp, kp, vp] = [packed(q), packed(k), packed(v)];
        const ref = callOp1('varlen_prefill_attention', [qp, kp, vp, cq, ck, null], { scale: 1 / Math.sqrt(D), causal: c.causal, sliding_window: 0 });
        const got = out.select(0, b).transpose(0, 1).contiguous();
        expect(Array.from(got.toFloat64Array()), `${c.q.join('x')} entry ${b}`).toEqual(Array.from(ref.toFloat64Array()));
        for (const t of [qp, kp, vp, ref, got]) t.dispose();
      }
      for (const t of [q, k, v, out, cq, ck]) t.dispose();
    });
  });

  it('SDPA on the FA3 kernel in place in a CUDA graph: the replay equals the eager call (the cu_seqlens fills captured)', G, () => {
    const b = gpu();
    const [q, k] = [toGpu(randCpu([2, 8, 300, 128], 'bf16', 71)), toGpu(randCpu([2, 2, 300, 128], 'bf16', 72))];
    const attrs = { is_causal: true, enable_gqa: true };
    const eager = callOp1('scaled_dot_product_attention', [q, k, k, null], attrs);
    expect(b.generatedOps.sdpa.lastPath).toBe('fa3');
    b.synchronize();
    let captured: Tensor | undefined;
    const g = b.runtime.capture(() => {
      captured = callOp1('scaled_dot_product_attention', [q, k, k, null], attrs);
    }, { poolBytes: 64 << 20 });
    try {
      captured!.fill_(0);
      g.replay();
      expect(Array.from(captured!.toFloat64Array())).toEqual(Array.from(eager.toFloat64Array()));
    } finally {
      g.destroy();
    }
    for (const t of [q, k, eager]) t.dispose();
  });
});

describe('the FA3 route in a CUDA graph', () => {
  it('a captured prefill replays to the eager result (maps baked in as by-value parameters); new inputs copied in', G, () => {
    const b = gpu();
    const c: Fa3Case = { nQ: 8, nKv: 2, D: 128, dtype: 'bf16', qLens: [257, 31, 700] };
    const { gpuIn, cpuIn, Tq, numSeqs } = inputs(c, 11);
    const [q, k, v] = gpuIn as Tensor[];
    expect(prefillFa3Route(spineOf('fa3 graph test', b), q!, k!, v!, Tq, numSeqs)).toMatchObject({ take: true });
    const attrs = { scale: 1 / Math.sqrt(c.D), causal: true, sliding_window: 0 };
    const eager = callOp1('varlen_prefill_attention', gpuIn, attrs);
    b.synchronize();
    let captured: Tensor | undefined;
    const g = b.runtime.capture(() => {
      captured = callOp1('varlen_prefill_attention', gpuIn, attrs);
    }, { poolBytes: 64 << 20 });
    try {
      captured!.fill_(0);
      g.replay();
      expect(Array.from(captured!.toFloat64Array())).toEqual(Array.from(eager.toFloat64Array()));
      // new values in the same buffers: the replay reads them (the maps hold addresses, not data)
      const q2 = randCpu(q!.shape, c.dtype, 99);
      const q2Gpu = toGpu(q2);
      q!.copy_(q2Gpu);
      const eager2 = callOp1('varlen_prefill_attention', gpuIn, attrs);
      g.replay();
      expect(Array.from(captured!.toFloat64Array())).toEqual(Array.from(eager2.toFloat64Array()));
      expect(Array.from(eager2.toFloat64Array())).not.toEqual(Array.from(eager.toFloat64Array()));
      for (const t of [eager2, q2, q2Gpu]) t.dispose();
    } finally {
      g.destroy();
    }
    for (const t of [eager, ...gpuIn, ...cpuIn]) t?.dispose();
  });
});
