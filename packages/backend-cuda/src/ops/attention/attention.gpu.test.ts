/**
 * Attention on CUDA vs the float64 CPU backend and the model-zoo tasks' references. Inputs are built on the CPU
 * backend, copied to the GPU; outputs are poisoned first (an unwritten element shows as NaN). Both kernel paths
 * are forced where the shapes allow (decode with and without the split-K combine; prefill on the mma kernel and on
 * the simple kernel). The last describe prints achieved bandwidth / TFLOP/s of the production shapes (no asserts:
 * bench/ owns the numbers).
 */
import { ModuleRegistry, Rng, Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { shuffledBlockTable } from '../../../test/paged-block-table.js';
import { varlenOffsets } from '../../../test/varlen-batch.js';
import { G, measureCopy, medianMs, checkTaskOnCuda, cpu, expectClose, gpu, poison, randCpu, task, taskCases, toGpu, tolOf, variant, withTuning, printedAfterAll } from '../../../test/spine-helpers.js';
import type { Tuning } from '../../tuning/schema.js';
import { cudaTuning } from '../../tuning/load.js';

const withAttention = <R>(patch: Partial<Tuning['attention']>, fn: () => R): R => withTuning('attention', patch, fn);

// ------------------------------------------------------------------------------------------------ decode

interface DecodeCase {
  B?: number;
  nQ: number;
  nKv: number;
  D: number;
  dtype: DType;
  lens: number[];
  window?: number;
  scale?: number;
  /** q as a slice of a fused [B, nQ + 2 nKv, D] tensor. */
  fusedQ?: boolean;
  /** q as a slice [.., 1:D+1] of a [B, nQ, D + 1] tensor (odd head stride: narrow vectors or a copy). */
  oddQ?: boolean;
}

function decodeInputs(c: DecodeCase, seed: number) {
  const B = c.lens.length;
  const bs = 16;
  const { bt, numBlocks: NB } = shuffledBlockTable(c.lens, bs, seed);
  let q = randCpu([B, c.nQ, c.D], c.dtype, seed + 1);
  let qGpu = toGpu(q);
  if (c.fusedQ) {
    const fused = randCpu([B, c.nQ + 2 * c.nKv, c.D], c.dtype, seed + 1);
    q = fused.narrow(1, 0, c.nQ);
    qGpu = toGpu(fused).narrow(1, 0, c.nQ);
  } else if (c.oddQ) {
    const wide = randCpu([B, c.nQ, c.D + 1], c.dtype, seed + 1);
    q = wide.narrow(2, 1, c.D);
    qGpu = toGpu(wide).narrow(2, 1, c.D);
  }
  const kc = randCpu([NB, bs, c.nKv, c.D], c.dtype, seed + 2);
  const vc = randCpu([NB, bs, c.nKv, c.D], c.dtype, seed + 3);
  const lens = Tensor.fromArray(cpu(), c.lens, [B], 'i32');
  return { cpuIn: [q, kc, vc, bt, lens] as const, gpuIn: [qGpu, toGpu(kc), toGpu(vc), toGpu(bt), toGpu(lens)] as const };
}

function checkDecode(c: DecodeCase, seed = 7, label = ''): void {
  const { cpuIn, gpuIn } = decodeInputs(c, seed);
  const scale = c.scale ?? 1 / Math.sqrt(c.D);
  const window = c.window ?? 0;
  const expected = cpu().ops.pagedDecodeAttention(...cpuIn, scale, window);
  const n = expected.numel;
  for (const [name, tuning] of [
    ['no split', { decodeSplitTokens: 1 << 20 }],
    ['split 64', { decodeSplitTokens: 64 }],
    ['auto', {}],
    // the register-streaming kernel (the only one for f32 / odd head dims; decodeMma off elsewhere)
    ['register kernel, auto', { decodeMma: false }],
    ['register kernel, split 64', { decodeMma: false, decodeSplitTokens: 64 }],
    // the mma kernel with other ring shapes (no-ops where it does not apply)
    ['mma 2 warps 5 stages, split 32', { decodeMmaWarps: 2, decodeMmaStages: 5, decodeSplitTokens: 32 }],
    ['mma 3 warps 2 stages, split 100', { decodeMmaWarps: 3, decodeMmaStages: 2, decodeSplitTokens: 100 }],
  ] as const) {
    poison(n, n * 4);
    const out = withAttention(tuning, () => gpu().ops.pagedDecodeAttention(...gpuIn, scale, window));
    expectClose(out, expected, tolOf(c.dtype), `decode ${label} ${JSON.stringify({ ...c, lens: c.lens.length > 8 ? `${c.lens.length} lens` : c.lens })} [${name}]`);
    out.dispose();
  }
  for (const t of [...gpuIn, ...cpuIn]) t.dispose();
}

const ODD_LENS = [1, 15, 16, 17, 100, 1000];

describe('paged decode attention vs the float64 CPU backend', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const D of [64, 128]) {
      for (const [nQ, nKv] of [[8, 8], [32, 8], [16, 2]] as const) {
        it(`${dtype} D=${D} heads ${nQ}/${nKv} lens ${ODD_LENS.join(',')}`, G, () => checkDecode({ nQ, nKv, D, dtype, lens: ODD_LENS }));
      }
    }
  }
  for (const window of [1, 16, 100, 4096]) {
    it(`bf16 sliding window ${window}`, G, () => checkDecode({ nQ: 8, nKv: 2, D: 128, dtype: 'bf16', lens: [...ODD_LENS, 0, 33], window }));
  }
  it('a sequence with no tokens gives zeros; MQA (8 q heads on 1 kv head)', G, () => {
    checkDecode({ nQ: 8, nKv: 1, D: 64, dtype: 'bf16', lens: [0, 5, 0, 300] });
  });
  it('odd head dims take narrower vectors: D 80, 96, 16, 256, 8', G, () => {
    checkDecode({ nQ: 4, nKv: 2, D: 80, dtype: 'bf16', lens: [3, 40, 130] });
    checkDecode({ nQ: 6, nKv: 3, D: 96, dtype: 'f16', lens: [17, 200] });
    checkDecode({ nQ: 4, nKv: 1, D: 16, dtype: 'f32', lens: [70, 5, 33], window: 24, scale: 0.3 });
    checkDecode({ nQ: 4, nKv: 2, D: 256, dtype: 'bf16', lens: [1, 64, 257] });
    checkDecode({ nQ: 8, nKv: 2, D: 256, dtype: 'f32', lens: [9, 100] });
    checkDecode({ nQ: 2, nKv: 2, D: 8, dtype: 'bf16', lens: [600, 1] });
  });
  it('GQA groups that are not powers of two (6, 3) and larger than the CTA cap (8, 16)', G, () => {
    checkDecode({ nQ: 12, nKv: 2, D: 64, dtype: 'bf16', lens: [31, 64, 65] });
    checkDecode({ nQ: 9, nKv: 3, D: 128, dtype: 'f16', lens: [31, 160] });
    checkDecode({ nQ: 64, nKv: 8, D: 128, dtype: 'bf16', lens: [100, 2] });
    checkDecode({ nQ: 16, nKv: 1, D: 64, dtype: 'bf16', lens: [700] });
  });
  it('non-contiguous queries: a slice of fused qkv (read in place) and an odd head stride', G, () => {
    checkDecode({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens: [5, 500, 17], fusedQ: true });
    checkDecode({ nQ: 8, nKv: 2, D: 64, dtype: 'f16', lens: [5, 50], oddQ: true });
    checkDecode({ nQ: 8, nKv: 2, D: 64, dtype: 'f32', lens: [5, 50], oddQ: true });
  });
  it('long contexts split over many CTAs: batch 1 x 5000 and batch 8 x 2048 (Llama-3-8B heads)', G, () => {
    checkDecode({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens: [5000] });
    checkDecode({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens: [2048, 1, 1024, 2047, 700, 1348, 16, 2033] });
  });
  it('the combine merges from registers (up to decodeCombineUnroll splits) or in loops (more, or unroll 0) with the same bits', G, () => {
    // 64-key splits: 1 to 12 splits hold keys, so both sides of the unroll of 8 and the skipped single split are met
    const c = { nQ: 32, nKv: 8, D: 128, dtype: 'bf16' as DType, lens: [700, 64, 65, 512, 513, 300, 1, 129] };
    const { gpuIn } = decodeInputs(c, 5);
    const run = (unroll: number, mma: boolean) =>
      withAttention({ decodeCombineUnroll: unroll, decodeSplitTokens: 64, decodeMma: mma }, () => gpu().ops.pagedDecodeAttention(...gpuIn, 0.09, 0).toFloat64Array());
    for (const mma of [true, false]) {
      const a = run(8, mma);
      const b = run(0, mma);
      for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) throw new Error(`${mma ? 'mma' : 'register'} kernel, element ${i}: ${a[i]} (unroll 8) vs ${b[i]} (loops)`);
    }
    for (const t of gpuIn) t.dispose();
  });
  it('deterministic: the same inputs give bit-identical outputs twice', G, () => {
    const c = { nQ: 32, nKv: 8, D: 128, dtype: 'bf16' as DType, lens: [3000, 40] };
    const { gpuIn } = decodeInputs(c, 3);
    const a = gpu().ops.pagedDecodeAttention(...gpuIn, 0.08, 0).toFloat64Array();
    const b = gpu().ops.pagedDecodeAttention(...gpuIn, 0.08, 0).toFloat64Array();
    for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) throw new Error(`element ${i}: ${a[i]} vs ${b[i]}`);
  });
});

describe('L1/paged_decode_attention task on CUDA vs its float64 reference', () => {
  const t = task('L1/paged_decode_attention');
  const base = t.cases.ci[0]!;
  const prod = t.cases.production.find((c) => c.name === 'llama3-8b-decode-b64-2k')!;
  const extra = [
    variant(base, 'gqa4-d128-f16', { dtype: 'f16', dims: { B: 5, NQ: 16, NKV: 4, D: 128, S: 300, MB: 19, NB: 120 }, init: [16, 128, 1 / Math.sqrt(128), 4] }),
    variant(base, 'window-bf16', { dtype: 'bf16', dims: { B: 4, NQ: 8, NKV: 1, D: 64, S: 500, MB: 32, NB: 140 }, init: [8, 64, 0.125, 1, 37] }),
    prod,
  ];
  for (const { c, seed } of taskCases(t, extra)) {
    it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
  }
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
  scale?: number;
  /** q/k/v as slices of one fused [T, nQ + 2 nKv, D] tensor (needs kLens == qLens). */
  fused?: boolean;
  /** q rows after the last sequence (not covered by cu_seqlens_q): they must be zero. */
  tailRows?: number;
  /** q as a slice [.., 1:D+1] (misaligned for 16-byte copies: copied contiguous). */
  oddQ?: boolean;
}

function prefillInputs(c: PrefillCase, seed: number) {
  const { cq, ck, Tq: covered, Tk } = varlenOffsets(c.qLens, c.kLens);
  const Tq = covered + (c.tailRows ?? 0);
  let q: Tensor, k: Tensor, v: Tensor, gq: Tensor, gk: Tensor, gv: Tensor;
  if (c.fused) {
    const f = randCpu([Tq, c.nQ + 2 * c.nKv, c.D], c.dtype, seed);
    const g = toGpu(f);
    [q, k, v] = [f.narrow(1, 0, c.nQ), f.narrow(1, c.nQ, c.nKv), f.narrow(1, c.nQ + c.nKv, c.nKv)];
    [gq, gk, gv] = [g.narrow(1, 0, c.nQ), g.narrow(1, c.nQ, c.nKv), g.narrow(1, c.nQ + c.nKv, c.nKv)];
  } else {
    if (c.oddQ) {
      const w = randCpu([Tq, c.nQ, c.D + 1], c.dtype, seed);
      q = w.narrow(2, 1, c.D);
      gq = toGpu(w).narrow(2, 1, c.D);
    } else {
      q = randCpu([Tq, c.nQ, c.D], c.dtype, seed);
      gq = toGpu(q);
    }
    k = randCpu([Tk, c.nKv, c.D], c.dtype, seed + 1);
    v = randCpu([Tk, c.nKv, c.D], c.dtype, seed + 2);
    [gk, gv] = [toGpu(k), toGpu(v)];
  }
  return { cpuIn: [q, k, v, cq, ck] as const, gpuIn: [gq, gk, gv, toGpu(cq), toGpu(ck)] as const };
}

function checkPrefill(c: PrefillCase, seed = 5): void {
  const { cpuIn, gpuIn } = prefillInputs(c, seed);
  const scale = c.scale ?? 1 / Math.sqrt(c.D);
  const causal = c.causal ?? true;
  const window = c.window ?? 0;
  const expected = cpu().ops.varlenPrefillAttention(...cpuIn, scale, causal, window);
  const n = expected.numel;
  const half = c.dtype !== 'f32' && (c.D === 64 || c.D === 128);
  const paths: [string, Partial<Tuning['attention']>][] = half
    ? [
        ['default (FA3 on sm_90a)', {}],
        ['wgmma on sm_90a at D 128', { prefillFa3: false }],
        ['wgmma, always rescale', { prefillFa3: false, prefillSkipRescale: false }],
        ['mma 4 warps', { prefillFa3: false, prefillWgmma: false, prefillWarps: 4 }],
        ['mma 8 warps', { prefillFa3: false, prefillWgmma: false, prefillWarps: 8 }],
        ['mma 8 warps, always rescale', { prefillFa3: false, prefillWgmma: false, prefillWarps: 8, prefillSkipRescale: false }],
        ['simple', { prefillMma: false }],
      ]
    : [['simple', {}]];
  for (const [name, tuning] of paths) {
    poison(n, n * 4);
    const out = withAttention(tuning, () => gpu().ops.varlenPrefillAttention(...gpuIn, scale, causal, window));
    const show = { ...c, qLens: c.qLens.length > 8 ? `${c.qLens.length} seqs` : c.qLens };
    expectClose(out, expected, tolOf(c.dtype), `prefill ${JSON.stringify(show)} [${name}]`);
    out.dispose();
  }
  for (const t of [...gpuIn, ...cpuIn]) t.dispose();
}

describe('varlen prefill attention vs the float64 CPU backend', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const D of [64, 128]) {
      // (the float64 CPU reference is the slow part: the 1000-token sequence only with 2 heads)
      for (const [nQ, nKv, longest] of [[2, 2, 1000], [8, 2, 300], [8, 1, 300]] as const) {
        const qLens = [1, 15, 16, 17, 100, longest];
        it(`${dtype} D=${D} heads ${nQ}/${nKv} lens ${qLens.join(',')} causal`, G, () => checkPrefill({ nQ, nKv, D, dtype, qLens }));
      }
    }
  }
  it('non-causal, and a custom scale', G, () => {
    checkPrefill({ nQ: 4, nKv: 2, D: 128, dtype: 'bf16', qLens: [70, 3, 129], causal: false, scale: 0.05 });
    checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'f32', qLens: [70, 3], causal: false });
  });
  for (const window of [1, 8, 64, 100]) {
    it(`sliding window ${window} (causal and not)`, G, () => {
      checkPrefill({ nQ: 4, nKv: 1, D: 128, dtype: 'bf16', qLens: [200, 17, 64], window });
      checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'f16', qLens: [150, 30], kLens: [300, 30], window, causal: window % 2 === 0 });
    });
  }
  it('chunked prefill (k longer than q) and rows that see no key (q longer than k, causal)', G, () => {
    checkPrefill({ nQ: 8, nKv: 2, D: 128, dtype: 'bf16', qLens: [16, 100, 1, 65], kLens: [500, 100, 1000, 130] });
    checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'bf16', qLens: [100, 20, 3], kLens: [30, 0, 1] });
    checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'f32', qLens: [100, 20, 3], kLens: [30, 0, 1] });
  });
  it('empty sequences in the batch and query rows past the last sequence (zeros)', G, () => {
    checkPrefill({ nQ: 4, nKv: 2, D: 128, dtype: 'bf16', qLens: [0, 33, 0, 64, 0], tailRows: 70 });
    checkPrefill({ nQ: 2, nKv: 1, D: 64, dtype: 'f32', qLens: [0, 5], tailRows: 3 });
  });
  it('q/k/v as slices of one fused qkv tensor (read in place); a misaligned q (copied)', G, () => {
    checkPrefill({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', qLens: [300, 77], fused: true });
    checkPrefill({ nQ: 8, nKv: 2, D: 64, dtype: 'f16', qLens: [40, 9], fused: true, window: 16 });
    checkPrefill({ nQ: 4, nKv: 2, D: 64, dtype: 'bf16', qLens: [40, 9], oddQ: true });
  });
  it('other head dims take the simple kernel: 32, 80, 256', G, () => {
    checkPrefill({ nQ: 4, nKv: 2, D: 32, dtype: 'bf16', qLens: [20, 50] });
    checkPrefill({ nQ: 2, nKv: 1, D: 80, dtype: 'f16', qLens: [33], kLens: [40] });
    checkPrefill({ nQ: 2, nKv: 2, D: 256, dtype: 'f32', qLens: [17, 9], window: 5 });
  });
  it('many short sequences (more than one warp of cu_seqlens)', G, () => {
    const lens = Array.from({ length: 75 }, (_, i) => (i * 37) % 23);
    checkPrefill({ nQ: 4, nKv: 4, D: 64, dtype: 'bf16', qLens: lens, kLens: lens.map((l, i) => l + (i % 5)) });
  });
});

describe('L1/varlen_prefill_attention task on CUDA vs its float64 reference', () => {
  const t = task('L1/varlen_prefill_attention');
  const base = t.cases.ci[1]!;
  const mk = (name: string, dtype: DType, [NQ, NKV, D]: number[], qLens: number[], kLens = qLens, init?: unknown[]) =>
    variant(base, name, {
      dtype,
      dims: { TQ: qLens.reduce((a, b) => a + b, 0), TK: kLens.reduce((a, b) => a + b, 0), B: qLens.length, 'B+1': qLens.length + 1, NQ: NQ!, NKV: NKV!, D: D! },
      init: init ?? [NQ, D, 1 / Math.sqrt(D!), NKV],
      options: { qLens, kLens },
    });
  const extra = [
    mk('gqa4-d128-bf16', 'bf16', [8, 2, 128], [130, 64, 1]),
    mk('chunked-d128-f16', 'f16', [4, 1, 128], [20, 64], [300, 64]),
    mk('window-d64-bf16', 'bf16', [4, 2, 64], [90, 40], [90, 40], [4, 64, 0.125, 2, true, 20]),
  ];
  for (const { c, seed } of taskCases(t, extra)) {
    it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
  }
});

describe('prefill at production size: the tensor-core kernels vs the simple fp32-accumulating kernel on the GPU', () => {
  it('Llama-3-8B heads, sequences 2600 + 1100 + 396, and chunked 2048 over 8192', G, () => {
    for (const c of [
      { nQ: 32, nKv: 8, D: 128, dtype: 'bf16' as DType, qLens: [2600, 1100, 396] },
      { nQ: 32, nKv: 8, D: 128, dtype: 'bf16' as DType, qLens: [2048, 2048], kLens: [8192, 2048] },
    ]) {
      const { gpuIn, cpuIn } = prefillInputs(c, 9);
      const scale = 1 / Math.sqrt(128);
      const slow = withAttention({ prefillMma: false }, () => gpu().ops.varlenPrefillAttention(...gpuIn, scale, true, 0));
      for (const [name, tuning] of [['default (FA3 on sm_90a)', {}], ['wgmma', { prefillFa3: false }], ['mma', { prefillFa3: false, prefillWgmma: false }]] as const) {
        const fast = withAttention(tuning, () => gpu().ops.varlenPrefillAttention(...gpuIn, scale, true, 0));
        expectClose(fast, slow, tolOf('bf16'), `prefill production ${JSON.stringify(c.qLens)} [${name}]`);
        fast.dispose();
      }
      for (const t of [slow, ...gpuIn, ...cpuIn]) t.dispose();
    }
  });
});

// ------------------------------------------------------------------------------------------------ speed (printed)

describe('attention speed at the issue targets (printed, not asserted; bench/ owns the numbers)', () => {
  const lines = printedAfterAll();


  it('copy bandwidth, decode B=64 x 2048 (Llama-3-8B), prefill 4096 causal (Llama-3-8B)', G, () => {
    const b = gpu();
    // copy: 1 GiB device to device
    const n = 256 * 1024 * 1024;
    const { ms: copyMs, gbs: copyGBs } = measureCopy(n);
    lines.push(`attention-speed: copy ${copyMs.toFixed(3)} ms = ${copyGBs.toFixed(0)} GB/s`);

    // decode (the task's production case: lengths L and 2049 - L in pairs)
    const td = task('L1/paged_decode_attention');
    const cd = td.cases.production.find((c) => c.name === 'llama3-8b-decode-b64-2k')!;
    const ctx = { backend: b, device: 0, dtype: cd.dtype, registry: new ModuleRegistry() };
    const inD = td.makeInputs(cd, ctx, new Rng(1)) as Tensor[];
    const scale = 1 / Math.sqrt(128);
    const wd = td.work(cd);
    for (const [label, tuning] of [
      ['', {}],
      [' [register kernel]', { decodeMma: false }],
      [' [mma chunk 512]', { decodeMmaCtasPerSm: 16 }],
      [' [mma chunk 128]', { decodeMmaCtasPerSm: 64 }],
      [' [mma 2 warps 4 stages]', { decodeMmaWarps: 2, decodeMmaStages: 4 }],
      [' [mma 4 warps 4 stages]', { decodeMmaStages: 4 }],
      [' [mma 8 warps 2 stages]', { decodeMmaWarps: 8, decodeMmaStages: 2 }],
    ] as const) {
      const decMs = withAttention(tuning, () => medianMs(() => b.ops.pagedDecodeAttention(inD[0]!, inD[1]!, inD[2]!, inD[3]!, inD[4]!, scale, 0).dispose(), 30));
      lines.push(`attention-speed: decode b64x2k${label} ${(decMs * 1e3).toFixed(1)} us = ${(wd.bytes / decMs / 1e6).toFixed(0)} GB/s (${((wd.bytes / decMs / 1e6 / copyGBs) * 100).toFixed(0)}% of copy)`);
    }
    for (const t of inD) t?.dispose();

    // prefill
    const tp = task('L1/varlen_prefill_attention');
    for (const name of ['llama3-8b-prefill-4096x1', 'llama3-8b-prefill-1024x4', 'llama3-8b-chunked-prefill-2048x2']) {
      const cp = tp.cases.production.find((c) => c.name === name)!;
      const inP = tp.makeInputs(cp, { ...ctx, dtype: cp.dtype }, new Rng(2)) as Tensor[];
      for (const [label, tuning] of [
        ['default (FA3 on sm_90a)', {}],
        ['wgmma / 4 warps', { prefillFa3: false, prefillWarps: 4 }],
        ['wgmma / 8 warps', { prefillFa3: false, prefillWarps: 8 }],
        ['wgmma / 8 warps always rescale', { prefillFa3: false, prefillWarps: 8, prefillSkipRescale: false }],
      ] as const) {
        const ms = withAttention(tuning, () => medianMs(() => b.ops.varlenPrefillAttention(inP[0]!, inP[1]!, inP[2]!, inP[3]!, inP[4]!, scale, true, 0).dispose(), 20));
        const wp = tp.work(cp);
        lines.push(`attention-speed: prefill ${name} [${label}] ${(ms * 1e3).toFixed(1)} us = ${(wp.flops / ms / 1e9).toFixed(0)} TFLOP/s`);
      }
      for (const t of inP) t?.dispose();
    }
  });
});
