/**
 * Attention sinks (gpt-oss's per-head logits in every softmax denominator) on CUDA vs the float64 CPU kernels, through
 * the op registry (paged_decode_attention / varlen_prefill_attention with their sinks input): decode on the mma and the
 * register kernel with one split (the kernel that writes adds the sink) and several (the combine adds it), prefill on
 * the FA3 (sm_90a, D 64 / 128; attention-fa3.gpu.test.ts has more of it), wgmma (sm_90a, D 128), mma.sync and simple
 * kernels; GQA, sliding windows, empty sequences (zeros, as the CPU
 * kernel), bf16 / f16 / f32, and sinks far above and below the scores (the overflow-safe form). Outputs are poisoned
 * first (an unwritten element shows as NaN).
 */
import { callOp1, Rng, Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { shuffledBlockTable } from '../../../test/paged-block-table.js';
import { varlenOffsets } from '../../../test/varlen-batch.js';
import { G, cpu, expectClose, gpu, poison, randCpu, toGpu, tolOf, withTuning } from '../../../test/spine-helpers.js';
import type { Tuning } from '../../tuning/schema.js';

const withAttention = <R>(patch: Partial<Tuning['attention']>, fn: () => R): R => withTuning('attention', patch, fn);

/** nQ sink logits: moderate ones (comparable to the scores), and one far above (dominant) and one far below. */
function sinksCpu(nQ: number, seed: number, dtype: DType = 'f32'): Tensor {
  const rng = new Rng(seed);
  const v = Array.from({ length: nQ }, () => rng.uniform() * 4 - 1);
  if (nQ > 2) {
    v[1] = 40; // exp(40 - max score) overflows fp32 without the max over the sink
    v[2] = -60;
  }
  return Tensor.fromArray(cpu(), v, [nQ], dtype);
}

// ------------------------------------------------------------------------------------------------ decode

interface DecodeCase {
  nQ: number;
  nKv: number;
  D: number;
  dtype: DType;
  lens: number[];
  window?: number;
  sinkDType?: DType;
}

function decodeInputs(c: DecodeCase, seed: number) {
  const B = c.lens.length;
  const bs = 16;
  const { bt, numBlocks: NB } = shuffledBlockTable(c.lens, bs, seed);
  const q = randCpu([B, c.nQ, c.D], c.dtype, seed + 1);
  const kc = randCpu([NB, bs, c.nKv, c.D], c.dtype, seed + 2);
  const vc = randCpu([NB, bs, c.nKv, c.D], c.dtype, seed + 3);
  const lens = Tensor.fromArray(cpu(), c.lens, [B], 'i32');
  const sinks = sinksCpu(c.nQ, seed + 4, c.sinkDType);
  const cpuIn = [q, kc, vc, bt, lens, sinks];
  return { cpuIn, gpuIn: cpuIn.map(toGpu) };
}

function checkDecode(c: DecodeCase, seed = 11): void {
  const { cpuIn, gpuIn } = decodeInputs(c, seed);
  const attrs = { scale: 1 / Math.sqrt(c.D), sliding_window: c.window ?? 0 };
  const expected = callOp1('paged_decode_attention', cpuIn, attrs);
  const without = callOp1('paged_decode_attention', [...cpuIn.slice(0, 5), null], attrs);
  const n = expected.numel;
  for (const [name, tuning] of [
    ['one split', { decodeSplitTokens: 1 << 20 }],
    ['split 64', { decodeSplitTokens: 64 }],
    ['auto', {}],
    ['register kernel, one split', { decodeMma: false, decodeSplitTokens: 1 << 20 }],
    ['register kernel, split 64', { decodeMma: false, decodeSplitTokens: 64 }],
    ['register kernel, auto', { decodeMma: false }],
    ['combine in loops, split 32', { decodeCombineUnroll: 0, decodeSplitTokens: 32 }],
  ] as const) {
    poison(n, n * 4);
    const out = withAttention(tuning, () => callOp1('paged_decode_attention', gpuIn, attrs));
    expectClose(out, expected, tolOf(c.dtype), `decode with sinks ${JSON.stringify(c)} [${name}]`);
    out.dispose();
  }
  // the sinks matter here (else the comparison above would pass with them ignored)
  const e = expected.toFloat64Array();
  const w = without.toFloat64Array();
  expect(e.some((x, i) => Math.abs(x - w[i]!) > 0.05 * (Math.abs(w[i]!) + 0.05))).toBe(true);
  for (const t of [...gpuIn, ...cpuIn, expected, without]) t.dispose();
}

describe('paged decode attention with sinks vs the float64 CPU kernel', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const D of [64, 128]) {
      it(`${dtype} D=${D} GQA 16/2, lens 1..700 and an empty sequence`, G, () => checkDecode({ nQ: 16, nKv: 2, D, dtype, lens: [1, 0, 17, 100, 700] }));
    }
  }
  it('MHA and MQA, bf16 sinks (converted to f32)', G, () => {
    checkDecode({ nQ: 8, nKv: 8, D: 128, dtype: 'bf16', lens: [33, 300], sinkDType: 'bf16' });
    checkDecode({ nQ: 8, nKv: 1, D: 64, dtype: 'f16', lens: [500, 3] });
  });
  for (const window of [1, 16, 128]) {
    it(`sliding window ${window} (gpt-oss's 128)`, G, () => checkDecode({ nQ: 8, nKv: 2, D: 64, dtype: 'bf16', lens: [1, 40, 129, 1000, 0], window }));
  }
  it('gpt-oss-20b heads (64 q / 8 kv, D 64), batch 1 x 3000 (many splits)', G, () => {
    checkDecode({ nQ: 64, nKv: 8, D: 64, dtype: 'bf16', lens: [3000] });
  });
  it("tiny-gpt-oss's head widths on the register kernel (D 24 f32, D 16 bf16; window 8)", G, () => {
    checkDecode({ nQ: 4, nKv: 2, D: 24, dtype: 'f32', lens: [12, 3, 40], window: 8 });
    checkDecode({ nQ: 4, nKv: 1, D: 16, dtype: 'bf16', lens: [13, 1, 200] });
  });
});

// ------------------------------------------------------------------------------------------------ prefill

interface PrefillCase {
  nQ: number;
  nKv: number;
  D: number;
  dtype: DType;
  qLens: number[];
  kLens?: number[];
  causal?: boolean;
  window?: number;
}

function checkPrefill(c: PrefillCase, seed = 13): void {
  const { cq, ck, Tq, Tk } = varlenOffsets(c.qLens, c.kLens);
  const q = randCpu([Tq, c.nQ, c.D], c.dtype, seed);
  const k = randCpu([Tk, c.nKv, c.D], c.dtype, seed + 1);
  const v = randCpu([Tk, c.nKv, c.D], c.dtype, seed + 2);
  const cpuIn = [q, k, v, cq, ck, sinksCpu(c.nQ, seed + 3)];
  const gpuIn = cpuIn.map(toGpu);
  const attrs = { scale: 1 / Math.sqrt(c.D), causal: c.causal ?? true, sliding_window: c.window ?? 0 };
  const expected = callOp1('varlen_prefill_attention', cpuIn, attrs);
  const n = expected.numel;
  const half = c.dtype !== 'f32' && (c.D === 64 || c.D === 128);
  const paths: [string, Partial<Tuning['attention']>][] = half
    ? [
        ['default (FA3 on sm_90a)', {}],
        ['FA3 off (wgmma on sm_90a at D 128)', { prefillFa3: false }],
        ['mma 4 warps', { prefillFa3: false, prefillWgmma: false, prefillWarps: 4 }],
        ['mma 8 warps, always rescale', { prefillFa3: false, prefillWgmma: false, prefillWarps: 8, prefillSkipRescale: false }],
        ['simple', { prefillMma: false }],
      ]
    : [['simple', {}]];
  for (const [name, tuning] of paths) {
    poison(n, n * 4);
    const out = withAttention(tuning, () => callOp1('varlen_prefill_attention', gpuIn, attrs));
    expectClose(out, expected, tolOf(c.dtype), `prefill with sinks ${JSON.stringify(c)} [${name}]`);
    out.dispose();
  }
  for (const t of [...gpuIn, ...cpuIn, expected]) t.dispose();
}

describe('varlen prefill attention with sinks vs the float64 CPU kernel', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const D of [64, 128]) {
      it(`${dtype} D=${D} GQA 8/2 causal, lens 1..300`, G, () => checkPrefill({ nQ: 8, nKv: 2, D, dtype, qLens: [1, 17, 64, 300] }));
    }
  }
  for (const window of [1, 64, 128]) {
    it(`sliding window ${window}, causal and not`, G, () => {
      checkPrefill({ nQ: 8, nKv: 1, D: 128, dtype: 'bf16', qLens: [200, 17], window });
      checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'f16', qLens: [150, 30], kLens: [300, 30], window, causal: false });
    });
  }
  it('chunked prefill (k longer than q) and rows that see no key (zeros)', G, () => {
    checkPrefill({ nQ: 8, nKv: 2, D: 128, dtype: 'bf16', qLens: [16, 100, 65], kLens: [500, 100, 130] });
    checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'bf16', qLens: [100, 20, 3], kLens: [30, 0, 1] });
    checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'f32', qLens: [100, 20, 3], kLens: [30, 0, 1] });
  });
  it('gpt-oss-20b heads (64 q / 8 kv, D 64), other head dims on the simple kernel (80, 256)', G, () => {
    checkPrefill({ nQ: 64, nKv: 8, D: 64, dtype: 'bf16', qLens: [129, 7], window: 128 });
    checkPrefill({ nQ: 4, nKv: 2, D: 80, dtype: 'bf16', qLens: [33], kLens: [40] });
    checkPrefill({ nQ: 2, nKv: 2, D: 256, dtype: 'f32', qLens: [17, 9], window: 5 });
    checkPrefill({ nQ: 4, nKv: 2, D: 24, dtype: 'f32', qLens: [12, 3], kLens: [19, 7], window: 8 }); // tiny-gpt-oss widths
    checkPrefill({ nQ: 4, nKv: 1, D: 16, dtype: 'bf16', qLens: [7], kLens: [13] });
  });
});
