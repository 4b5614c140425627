/**
 * End-to-end evaluation of an encoder (runner 'encoder': BGE-M3, ColBERTv2): the baseline registry's model and a
 * candidate registry's (its kernels overriding tasks) embed the same seeded documents through the encoder runner's
 * production path (packed varlen batches under the token budget, every pooling the model has), one model in memory at
 * a time. Correctness: per document, the cosine of the candidate's dense embedding against the baseline's, and of its
 * sparse weights (as vectors over token ids) and multi-vectors (each row, the least counts) where the model has them,
 * each at least a threshold. Speed: sequences/s and tokens/s of each timed pass over the documents (the outputs of
 * timedPoolingsOf), with 95% intervals, and the candidate's speedup with a bootstrap interval. The encoder runner never captures CUDA graphs (each batch's
 * packed shape differs), so no candidate needs them turned off.
 */
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';
import type { EmbedResult, Pooling } from './encoder-runner.js';
import { loadEncoder } from './encoder-documents.js';
import { estimate, ratioEstimate, type Estimate } from './pipeline-e2e.js';

export interface EncoderE2eOptions {
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  /** Seed of the random weights when the folder has no safetensors (the same on both sides). */
  readonly initSeed?: number;
  readonly documents: readonly (readonly number[])[];
  /** Tokens per packed forward (default: the runner's, 16384). */
  readonly maxNumBatchedTokens?: number;
  /** Untimed passes over the documents before the timed ones (default 1; the first is the compared one). */
  readonly warmups?: number;
  /** Timed passes over the documents (default 3). */
  readonly repeats?: number;
  /** The outputs the warm-up and timed passes ask for (default: timedPoolingsOf the model's; all are compared). */
  readonly timedPoolings?: readonly Pooling[];
  /** Least cosine of an output against the baseline's (default: defaultMinCosine of the models' dtype). */
  readonly minCosine?: number;
  readonly log?: (line: string) => void;
}

/**
 * The default least cosine (1 - cos is about half the squared relative error of the vector): f32 sides differ only by
 * summation order, and 0.99999 fails errors above ~0.5% (1e-2 added to a layer norm's unit-scale output gives
 * ~0.99995); bf16 / f16 keep 8 / 11 mantissa bits per activation, so a different but correct kernel rounds
 * differently in every layer (errors of ~1%): 0.999 passes that and fails errors above ~4%.
 */
export function defaultMinCosine(dtype: DType | undefined): number {
  return (dtype ?? 'f32') === 'f32' ? 0.99999 : 0.999;
}

/**
 * What the timed passes ask for: every output of the model, less BGE-M3's multi-vectors: reading [T, 1024] rows back
 * into JS arrays costs the host more than the forward costs an H100 (70k tokens: ~70M numbers against ~0.2 s of
 * matmuls), which would hide the kernels' speedup. ColBERTv2's vectors (its only output, [T, 128]) stay timed.
 */
export function timedPoolingsOf(poolings: readonly Pooling[]): Pooling[] {
  return poolings.includes('dense') ? poolings.filter((p) => p !== 'multi-vector') : [...poolings];
}

export interface EncoderSideResult {
  /** One value per timed pass: documents / the pass's wall seconds. */
  readonly sequencesPerS: Estimate;
  /** One value per timed pass: tokens / the pass's wall seconds. */
  readonly tokensPerS: Estimate;
  /** Packed forwards per pass. */
  readonly batches: number;
}

export interface EncoderCorrectness {
  /** Per document: the dense (or CLS) embedding's cosine against the baseline's. */
  readonly dense: readonly number[];
  /** Per document: the sparse weights' cosine (BGE-M3). */
  readonly sparse?: readonly number[];
  /** Per document: the least cosine of a multi-vector row (BGE-M3's ColBERT head, ColBERTv2). */
  readonly multiVector?: readonly number[];
  readonly minCosine: number;
  /** Documents whose every output equals the baseline's bit for bit (a self-test gives all). */
  readonly identical: number;
  /** The least cosine over every document and output. */
  readonly worst: number;
  readonly passed: boolean;
  /** Why it failed (the first document and output under the threshold). */
  readonly reason?: string;
}

export interface EncoderE2eResult {
  readonly documents: number;
  readonly tokens: number;
  readonly poolings: readonly string[];
  /** The outputs the timed passes asked for. */
  readonly timedPoolings: readonly string[];
  /** The models' dtype (the config's unless asked). */
  readonly dtype: DType;
  readonly baseline: EncoderSideResult;
  readonly candidate: EncoderSideResult;
  /** candidate / baseline throughput (sequences/s and tokens/s alike: every pass embeds the same documents). */
  readonly speedup: Estimate;
  readonly correctness: EncoderCorrectness;
}

interface SideRun {
  readonly results: EmbedResult[];
  readonly passSeconds: number[];
  readonly batches: number;
  readonly poolings: readonly string[];
  readonly timedPoolings: readonly string[];
  readonly dtype: DType;
}

/** Cosine of two vectors; 1 where both are zero, 0 where one is, NaN-safe (a NaN gives -Infinity: always a failure). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return 0;
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  if (Number.isNaN(ab + aa + bb)) return -Infinity;
  if (aa === 0 && bb === 0) return 1;
  return aa === 0 || bb === 0 ? 0 : ab / Math.sqrt(aa * bb);
}

/** Cosine of two sparse weight maps as vectors over the union of their token ids. */
export function sparseCosine(a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): number {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
  return cosine(keys.map((k) => a[k] ?? 0), keys.map((k) => b[k] ?? 0));
}

/** The least row cosine of two multi-vector sets (0 where the row counts differ: a token kept on one side only). */
export function multiVectorCosine(a: readonly (readonly number[])[], b: readonly (readonly number[])[]): number {
  if (a.length !== b.length) return 0;
  return a.reduce((m, row, i) => Math.min(m, cosine(row, b[i]!)), 1);
}

/** One load of a side: the compared first pass and, when `timed`, the other warm-ups and the timed passes. */
function runSide(registry: ModuleRegistry, o: EncoderE2eOptions, timed: boolean): SideRun {
  const enc = loadEncoder(o.dir, { backend: o.backend, registry, ...(o.dtype ? { dtype: o.dtype } : {}), ...(o.initSeed !== undefined ? { initSeed: o.initSeed } : {}), ...(o.maxNumBatchedTokens !== undefined ? { maxNumBatchedTokens: o.maxNumBatchedTokens } : {}) });
  try {
    const results = enc.runner.embed(o.documents, enc.poolings);
    const batches = enc.runner.stats.batches;
    const passSeconds: number[] = [];
    const timedPoolings = o.timedPoolings ? [...o.timedPoolings] : timedPoolingsOf(enc.poolings);
    if (timed) {
      for (let w = 1; w < (o.warmups ?? 1); w++) enc.runner.embed(o.documents, timedPoolings);
      for (let k = 0; k < (o.repeats ?? 3); k++) {
        const t0 = performance.now();
        // embed reads every result back to the host, so the pass's work is done when it returns
        enc.runner.embed(o.documents, timedPoolings);
        o.backend.synchronize(enc.loaded.ctx.device);
        passSeconds.push((performance.now() - t0) / 1000);
      }
    }
    return { results, passSeconds, batches, poolings: enc.poolings, timedPoolings, dtype: enc.loaded.ctx.dtype };
  } finally {
    enc.loaded.model.dispose();
  }
}

function compare(base: readonly EmbedResult[], cand: readonly EmbedResult[], minCosine: number): EncoderCorrectness {
  let reason: string | undefined;
  const check = (what: string, values: number[]) => {
    values.forEach((c, d) => {
      if (!(c >= minCosine)) reason ??= `document ${d} (${base[d]!.tokens} tokens): ${what} cosine ${c.toFixed(6)} < ${minCosine}`;
    });
    return values;
  };
  const dense = check('dense embedding', base.map((b, d) => cosine(b.embedding ?? [], cand[d]!.embedding ?? [])));
  const sparse = base[0]?.sparse ? check('sparse weights', base.map((b, d) => sparseCosine(b.sparse!, cand[d]!.sparse ?? {}))) : undefined;
  const multiVector = base[0]?.multiVector ? check('multi-vector', base.map((b, d) => multiVectorCosine(b.multiVector!, cand[d]!.multiVector ?? []))) : undefined;
  const worst = Math.min(...dense, ...(sparse ?? []), ...(multiVector ?? []));
  const identical = base.filter((b, d) => JSON.stringify(b) === JSON.stringify(cand[d])).length;
  return { dense, ...(sparse ? { sparse } : {}), ...(multiVector ? { multiVector } : {}), minCosine, identical, worst, passed: reason === undefined, ...(reason ? { reason } : {}) };
}

export function encoderE2e(baseline: ModuleRegistry, candidate: ModuleRegistry, o: EncoderE2eOptions): EncoderE2eResult {
  if (!o.documents.length) throw new RangeError('encoderE2e: no documents');
  const log = o.log ?? (() => {});
  const tokens = o.documents.reduce((a, d) => a + d.length, 0);
  // baseline, candidate, baseline again (as pipelineE2e): the timed baseline is a later load, so neither timed side is
  // the process's first model (JIT, allocator and kernel-cache warm-up would count against whichever came first)
  log(`baseline (embeddings): ${o.documents.length} documents, ${tokens} tokens`);
  const traced = runSide(baseline, o, false);
  log(`candidate: ${o.warmups ?? 1} warm-up and ${o.repeats ?? 3} timed passes`);
  const cand = runSide(candidate, o, true);
  log('baseline (timed)');
  const base = runSide(baseline, o, true);
  const side = (s: SideRun): EncoderSideResult => ({
    sequencesPerS: estimate(s.passSeconds.map((t) => o.documents.length / t)),
    tokensPerS: estimate(s.passSeconds.map((t) => tokens / t)),
    batches: s.batches,
  });
  return {
    documents: o.documents.length,
    tokens,
    poolings: traced.poolings,
    timedPoolings: base.timedPoolings,
    dtype: traced.dtype,
    baseline: side(base),
    candidate: side(cand),
    speedup: ratioEstimate(cand.passSeconds.map((t) => 1 / t), base.passSeconds.map((t) => 1 / t)),
    correctness: compare(traced.results, cand.results, o.minCosine ?? defaultMinCosine(traced.dtype)),
  };
}
