/**
 * Paged decode with the split combine inside the decode kernel (ATTENTION_TUNING.decodeFusedCombine): the last CTA of
 * each (sequence, head group) to finish merges the splits. Its outputs must be the bits of the two-kernel path (switch
 * off) for every kernel and shape that splits: bf16/f16 (mma kernel), f32 and bf16 with decodeMma off (register kernel),
 * head dim 64 and 128, GQA 32/8 and 8/8, batch 1, 3 and 64, lengths around one tile and one chunk, tables far longer than
 * the longest sequence (most splits empty), empty sequences and a sliding window; and within tolerance of the float64 CPU
 * backend. The split-arrival counters live in the kernel module and reset themselves: calls in a row (a different query
 * each, so a stale output cannot pass) and a CUDA graph of three "layers" replayed three times (outputs poisoned before
 * each replay) check that every launch finds them at zero. The last describe prints the bs-1 time per layer inside a
 * graph, both ways (no asserts: the decode A/B bench's `comb` setting owns the decision).
 */
import { Rng, Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, cpu, expectClose, gpu, graphMs, poison, printedAfterAll, randCpu, toGpu, tolOf, withTuning } from '../../test/spine-helpers.js';
import { ATTENTION_TUNING, planDecode } from './attention-plan.js';

type Tuning = Partial<typeof ATTENTION_TUNING>;

const BLOCK = 16;

interface FusedCase {
  nQ: number;
  nKv: number;
  D: number;
  dtype: DType;
  lens: number[];
  /** Block-table width (pages per sequence); default: just enough for the longest sequence, plus one. */
  maxBlocks?: number;
  window?: number;
}

interface FusedInputs {
  /** One query per call (a different one each time). */
  queries: Tensor[];
  kCache: Tensor;
  vCache: Tensor;
  blockTables: Tensor;
  seqLens: Tensor;
  cpuCaches: readonly [Tensor, Tensor, Tensor, Tensor];
  cpuQueries: Tensor[];
  maxBlocks: number;
}

/** Random caches with each sequence's pages scattered over the pool, and `calls` random queries. */
function fusedInputs(c: FusedCase, calls: number, seed: number): FusedInputs {
  const B = c.lens.length;
  const maxBlocks = c.maxBlocks ?? Math.max(1, ...c.lens.map((L) => Math.ceil(L / BLOCK))) + 1;
  const pages = c.lens.reduce((a, L) => a + Math.ceil(L / BLOCK), 0) + 3;
  const pool = new Rng(seed).permutation(pages);
  const table = new Array<number>(B * maxBlocks).fill(0);
  let next = 0;
  c.lens.forEach((L, b) => {
    for (let i = 0; i < Math.ceil(L / BLOCK); i++) table[b * maxBlocks + i] = pool[next++]!;
  });
  const kc = randCpu([pages, BLOCK, c.nKv, c.D], c.dtype, seed + 1);
  const vc = randCpu([pages, BLOCK, c.nKv, c.D], c.dtype, seed + 2);
  const bt = Tensor.fromArray(cpu(), table, [B, maxBlocks], 'i32');
  const lens = Tensor.fromArray(cpu(), c.lens, [B], 'i32');
  const cpuQueries = Array.from({ length: calls }, (_, i) => randCpu([B, c.nQ, c.D], c.dtype, seed + 10 + i));
  return {
    queries: cpuQueries.map(toGpu),
    kCache: toGpu(kc),
    vCache: toGpu(vc),
    blockTables: toGpu(bt),
    seqLens: toGpu(lens),
    cpuCaches: [kc, vc, bt, lens],
    cpuQueries,
    maxBlocks,
  };
}

function disposeInputs(x: FusedInputs): void {
  for (const t of [...x.queries, x.kCache, x.vCache, x.blockTables, x.seqLens, ...x.cpuCaches, ...x.cpuQueries]) t.dispose();
}

/** Whether the op takes the fused path for this case under `tuning` (contiguous inputs: 16-byte vectors). */
function takesFusedPath(c: FusedCase, maxBlocks: number, tuning: Tuning): boolean {
  const itemsize = c.dtype === 'f32' ? 4 : 2;
  const plan = planDecode(
    {
      batch: c.lens.length, qHeads: c.nQ, kvHeads: c.nKv, headDim: c.D, itemsize, vecBytes: 16, blockSize: BLOCK, maxBlocks,
      slidingWindow: c.window ?? 0, multiprocessors: gpu().runtime.properties().multiprocessors, dtype: c.dtype, cacheVecBytes: 16,
    },
    { ...ATTENTION_TUNING, ...tuning, decodeFusedCombine: true },
  );
  return plan.fusedCombine;
}

/** Element-for-element identical values (NaN, an unwritten poisoned element, never matches). */
function expectSameBits(actual: Tensor, expected: Tensor, label: string): void {
  const a = actual.toFloat64Array();
  const e = expected.toFloat64Array();
  if (a.length !== e.length) throw new Error(`${label}: ${a.length} elements vs ${e.length}`);
  const bad: string[] = [];
  for (let i = 0; i < a.length; i++) if (Number.isNaN(a[i]!) || !Object.is(a[i], e[i])) bad.push(`[${i}] ${a[i]} vs ${e[i]}`);
  if (bad.length) throw new Error(`${label}: ${bad.length} of ${a.length} differ: ${bad.slice(0, 8).join(', ')}`);
}

/** The kernel paths of a dtype, as tuning patches (the fused switch is set per call). */
function pathsOf(dtype: DType): [string, Tuning][] {
  const common: [string, Tuning][] = [
    ['auto', {}],
    ['split 64', { decodeSplitTokens: 64 }],
  ];
  if (dtype === 'f32') return [...common, ['split 16', { decodeSplitTokens: 16 }]];
  return [
    ...common,
    ['mma 1 warp, split 16', { decodeMmaWarps: 1, decodeSplitTokens: 16 }],
    ['register kernel, auto', { decodeMma: false }],
    ['register kernel, split 32', { decodeMma: false, decodeSplitTokens: 32 }],
  ];
}

const CALLS = 3;

/**
 * For every path of the case's dtype: CALLS calls with the switch off and on (poisoned outputs), bit-identical, and
 * the fused output within tolerance of the float64 CPU backend. At least one path must really take the fused path.
 */
function checkFused(c: FusedCase, seed = 21): void {
  const x = fusedInputs(c, CALLS, seed);
  const scale = 1 / Math.sqrt(c.D);
  const window = c.window ?? 0;
  const expected = x.cpuQueries.map((q) => cpu().ops.pagedDecodeAttention(q, ...x.cpuCaches, scale, window));
  const n = expected[0]!.numel;
  const show = JSON.stringify({ ...c, lens: c.lens.length > 8 ? `${c.lens.length} lens` : c.lens });
  const decode = (q: Tensor, tuning: Tuning, fused: boolean) => {
    poison(n, n * 4);
    return withTuning(ATTENTION_TUNING, { ...tuning, decodeFusedCombine: fused }, () =>
      gpu().ops.pagedDecodeAttention(q, x.kCache, x.vCache, x.blockTables, x.seqLens, scale, window),
    );
  };
  let fusedPaths = 0;
  for (const [name, tuning] of pathsOf(c.dtype)) {
    if (takesFusedPath(c, x.maxBlocks, tuning)) fusedPaths++;
    for (let i = 0; i < CALLS; i++) {
      const label = `decode ${show} [${name}] call ${i}`;
      const plain = decode(x.queries[i]!, tuning, false);
      const fused = decode(x.queries[i]!, tuning, true);
      expectSameBits(fused, plain, `${label}: fused vs two kernels`);
      expectClose(fused, expected[i]!, tolOf(c.dtype), `${label}: fused vs the CPU backend`);
      plain.dispose();
      fused.dispose();
    }
  }
  if (fusedPaths === 0) throw new Error(`decode ${show}: no path split the sequences (the fused combine was never exercised)`);
  for (const t of expected) t.dispose();
  disposeInputs(x);
}

const AROUND_A_TILE = [1, 15, 16, 17];

describe('paged decode, combine fused into the decode kernel: the bits of the two-kernel path', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const D of [64, 128]) {
      for (const [nQ, nKv] of [[32, 8], [8, 8]] as const) {
        it(`${dtype} D=${D} heads ${nQ}/${nKv}: batch 1 at 1, 17, 64 (one chunk), 1000; a table 8k tokens long`, G, () => {
          for (const L of [1, 17, 64, 1000]) checkFused({ nQ, nKv, D, dtype, lens: [L], maxBlocks: 512 });
        });
        it(`${dtype} D=${D} heads ${nQ}/${nKv}: batch 3 around a tile, with an empty sequence and many chunks`, G, () => {
          checkFused({ nQ, nKv, D, dtype, lens: [15, 16, 17] });
          checkFused({ nQ, nKv, D, dtype, lens: [0, 64, 1000] });
          checkFused({ nQ, nKv, D, dtype, lens: [1, 15, 300], maxBlocks: 200 });
        });
      }
    }
  }
  it('batch 64, Llama-3-8B heads (bf16 D 128 32/8), lengths 0..700 over a table of 1024 tokens', G, () => {
    const lens = Array.from({ length: 64 }, (_, i) => (i % 9 === 0 ? (i * 11) % 700 : (i * 37) % 260));
    checkFused({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens, maxBlocks: 64 });
  });
  it('batch 64, f32 and f16 at head dim 64, heads 8/8', G, () => {
    const lens = Array.from({ length: 64 }, (_, i) => (i * 29) % 200);
    checkFused({ nQ: 8, nKv: 8, D: 64, dtype: 'f32', lens });
    checkFused({ nQ: 8, nKv: 8, D: 64, dtype: 'f16', lens, maxBlocks: 40 });
  });
  for (const window of [16, 100]) {
    it(`sliding window ${window}: bf16 32/8 D 128 and f32 8/8 D 64`, G, () => {
      checkFused({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens: [...AROUND_A_TILE, 100, 1000, 0], window, maxBlocks: 80 });
      checkFused({ nQ: 8, nKv: 8, D: 64, dtype: 'f32', lens: [...AROUND_A_TILE, 100, 1000, 0], window });
    });
  }
});

describe('paged decode, combine fused: the counters reset inside a CUDA graph', () => {
  /**
   * Three decode "layers" (a different query each) captured into one graph with the switch on, replayed three times;
   * before each replay the outputs are poisoned (NaN), so a launch that found its counters off zero (no CTA merges, or
   * one merges too early) shows. Each replay must give the bits of the eager two-kernel path.
   */
  function checkGraph(c: FusedCase, tuning: Tuning): void {
    const b = gpu();
    const layers = 3;
    const x = fusedInputs(c, layers, 31);
    const scale = 1 / Math.sqrt(c.D);
    const window = c.window ?? 0;
    const show = `${JSON.stringify({ ...c, lens: c.lens.length > 8 ? `${c.lens.length} lens` : c.lens })} ${JSON.stringify(tuning)}`;
    if (!takesFusedPath(c, x.maxBlocks, tuning)) throw new Error(`graph ${show}: not on the fused path`);
    const decodeAll = () => x.queries.map((q) => b.ops.pagedDecodeAttention(q, x.kCache, x.vCache, x.blockTables, x.seqLens, scale, window));
    const plain = withTuning(ATTENTION_TUNING, { ...tuning, decodeFusedCombine: false }, decodeAll);
    let outs: Tensor[] = [];
    const g = withTuning(ATTENTION_TUNING, { ...tuning, decodeFusedCombine: true }, () => {
      for (const t of decodeAll()) t.dispose(); // compile (and queue the capture build) outside the capture
      b.synchronize();
      return b.runtime.capture(() => {
        outs = decodeAll();
      }, { poolBytes: 64 << 20 });
    });
    try {
      for (let r = 0; r < 3; r++) {
        for (const o of outs) o.fill_(NaN);
        g.replay();
        outs.forEach((o, i) => expectSameBits(o, plain[i]!, `graph ${show} replay ${r} layer ${i}`));
      }
    } finally {
      for (const t of [...outs, ...plain]) t.dispose();
      g.destroy();
      disposeInputs(x);
    }
  }

  it('bf16 Llama-3-8B heads at batch 1 over an 8k table (mma kernel, 64 splits)', G, () => {
    checkGraph({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens: [1000], maxBlocks: 512 }, {});
  });
  it('f16 D 64 at batch 3 with a sliding window; f32 (register kernel) at batch 3', G, () => {
    checkGraph({ nQ: 8, nKv: 8, D: 64, dtype: 'f16', lens: [17, 0, 900], window: 100, maxBlocks: 64 }, { decodeSplitTokens: 64 });
    checkGraph({ nQ: 32, nKv: 8, D: 128, dtype: 'f32', lens: [1, 300, 64], maxBlocks: 128 }, { decodeSplitTokens: 64 });
  });
  it('bf16 register kernel at batch 64', G, () => {
    const lens = Array.from({ length: 64 }, (_, i) => (i * 37) % 300);
    checkGraph({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens }, { decodeMma: false, decodeSplitTokens: 64 });
  });
});

describe('decode attention per layer at bs 1 inside a CUDA graph: two kernels vs fused (printed, not asserted)', () => {
  const lines = printedAfterAll();
  it('Llama-3-8B heads, bf16, contexts 300, 1000 and 4000 in an 8k-token table, 32 layers per graph', G, () => {
    for (const L of [300, 1000, 4000]) {
      const x = fusedInputs({ nQ: 32, nKv: 8, D: 128, dtype: 'bf16', lens: [L], maxBlocks: 512 }, 1, 41);
      const scale = 1 / Math.sqrt(128);
      const usPerLayer = (fused: boolean) =>
        withTuning(ATTENTION_TUNING, { decodeFusedCombine: fused }, () =>
          graphMs(() => gpu().ops.pagedDecodeAttention(x.queries[0]!, x.kCache, x.vCache, x.blockTables, x.seqLens, scale, 0).dispose(), 32),
        ) * 1e3;
      const plain = usPerLayer(false);
      const fused = usPerLayer(true);
      lines.push(`attention-speed: decode bs1 ctx ${L} (8k table) per layer in a graph: two kernels ${plain.toFixed(2)} us, fused combine ${fused.toFixed(2)} us`);
      disposeInputs(x);
    }
  });
});
