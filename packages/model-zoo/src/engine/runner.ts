import { DTYPE_INFO, Tensor, currentTensorParallelGroup, fmix32, withContext, type DType, type ExecutionContext, type SampleHint, type TensorParallelGroup } from '@fastkernels/core';
import type { Sampler } from '../tasks/L1/sampling/sampler.js';
import type { BlockManager } from './block-manager.js';
import { withForwardContext, type AttentionMetadata, type ForwardContext } from './forward-context.js';
import type { LayerCacheSpec } from './cache-spec.js';
import type { KvCache } from './kv-cache.js';
import type { StateCache } from './state-cache.js';
import type { CausalLM } from './model-runner.js';
import type { ScheduledBatch } from './scheduler.js';
import type { Sequence } from './sequence.js';
import { stepIoFor, type CapturedGraph, type GraphRuntime, type StepIo } from './device-io.js';

/** Headroom on the graph pool estimate (estimateGraphPoolBytes): run 11 saw a capture use 1.09x the sum. */
export const GRAPH_POOL_MARGIN = 1.15;

/** The per-row staging fields a graph decode step uploads (block tables go separately: maxBlocksPerSeq per row). */
const DECODE_FIELDS: readonly FieldName[] = ['inputIds', 'positions', 'slotMapping', 'seqLens', 'temperature', 'topK', 'topP', 'seeds'];
/** With recurrent layers, also each row's state-pool slot. */
const STATE_DECODE_FIELDS: readonly FieldName[] = [...DECODE_FIELDS, 'stateIndices'];

let captureDepth = 0;
const CAPTURE_PHASE = Symbol.for('fastkernels.capturePhase');

/** Whether a decode graph is being captured now (candidates that cannot be captured may check; tests use it). */
export function isGraphCapturing(): boolean {
  return captureDepth > 0;
}

/** Whether an error was thrown while capturing the decode graphs (e2e's `compile` drop category). */
export function isCaptureError(e: unknown): boolean {
  return typeof e === 'object' && e !== null && CAPTURE_PHASE in e;
}

/** CUDA-graph batch sizes: 1, 2, 4, 8, then every 16 up to the cap (nano-vllm's list, capped at 256 by default). */
export function graphBucketSizes(maxBatch: number, cap = 256): number[] {
  const top = Math.min(maxBatch, cap);
  const out: number[] = [];
  for (const b of [1, 2, 4, 8]) if (b <= top) out.push(b);
  for (let b = 16; b <= top; b += 16) out.push(b);
  if (top >= 1 && out[out.length - 1] !== top) out.push(top);
  return out;
}

export interface RunnerConfig {
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  /** Longest sequence (prompt + output); sets the block-table width. */
  readonly maxModelLen: number;
  /**
   * CUDA-graph decode: true = when the backend has graphs; false = eager always; a GraphRuntime = use that one
   * (tests pass EmulatedGraphRuntime to run the bucketed path on the CPU).
   */
  readonly graphs?: boolean | GraphRuntime;
  /** Largest graph batch (default min(maxNumSeqs, 256)); bigger decode batches run eagerly. */
  readonly maxGraphBatch?: number;
  /** Graph pool size; default estimated from the model geometry (doubled and retried when a capture runs out). */
  readonly graphPoolBytes?: number;
  /**
   * The recurrent-state pool of a model with recurrent layers: each step then carries every sequence's slot
   * (AttentionMetadata.stateIndices) and zeroes the slots of sequences that start from position 0.
   */
  readonly stateCache?: StateCache | null;
}

/** What the runner needs of the model's shape, for estimates. */
export interface RunnerGeometry {
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  /** Per-layer cache kinds (cache-spec.ts: attention or recurrent state); absent: every layer attends. */
  readonly layerCaches?: readonly LayerCacheSpec[];
}

/** One staging layout (host) mirrored by the device buffers: field -> element offset and capacity. */
interface Field {
  readonly dtype: DType;
  readonly byteOffset: number;
  readonly capacity: number;
}

type FieldName = 'inputIds' | 'positions' | 'slotMapping' | 'cuQ' | 'cuK' | 'blockTables' | 'seqLens' | 'logitsIdx' | 'temperature' | 'topK' | 'topP' | 'seeds' | 'stateIndices';

/** Host staging: one buffer, typed views per field (i64 fields written as two i32 words). */
class Staging {
  readonly bytes: Uint8Array;
  readonly i32: Int32Array;
  readonly f32: Float32Array;
  /** Elements written per field this step. */
  readonly used = new Map<FieldName, number>();
  constructor(io: StepIo, readonly fields: ReadonlyMap<FieldName, Field>, totalBytes: number) {
    this.bytes = io.hostBuffer(totalBytes);
    this.i32 = new Int32Array(this.bytes.buffer, this.bytes.byteOffset, Math.floor(this.bytes.byteLength / 4));
    this.f32 = new Float32Array(this.bytes.buffer, this.bytes.byteOffset, Math.floor(this.bytes.byteLength / 4));
  }
  /** Word index (i32 units) of element i of a field. */
  word(name: FieldName, i: number): number {
    const f = this.fields.get(name)!;
    return f.byteOffset / 4 + i * (DTYPE_INFO[f.dtype].itemsize / 4);
  }
  setI64(name: FieldName, i: number, v: number): void {
    const w = this.word(name, i);
    this.i32[w] = v | 0;
    this.i32[w + 1] = v < 0 ? -1 : Math.floor(v / 4294967296);
  }
  setI32(name: FieldName, i: number, v: number): void {
    this.i32[this.word(name, i)] = v;
  }
  setF32(name: FieldName, i: number, v: number): void {
    this.f32[this.word(name, i)] = v;
  }
}

/**
 * The seed of a request's next draw: a hash of its seed and how many tokens it has generated (not of its id or
 * batch slot), so one request with one seed draws the same tokens whichever requests run beside it (the sampler
 * draws its noise as counterUniform(seed, 0, col): the row index is not mixed in).
 */
export function requestStepSeed(s: Sequence, ahead = 0): number {
  let h = fmix32((s.params.seed >>> 0) ^ 0x9e3779b9);
  h = fmix32((h ^ Math.floor(s.params.seed / 4294967296)) >>> 0);
  return fmix32((h ^ (s.numCompletionTokens + ahead)) >>> 0);
}

/** A launched step: how many tokens to read, and the logits kept for collectLogits. */
export interface PendingStep {
  readonly nSample: number;
  /** Replayed from a CUDA graph (else run eagerly). */
  readonly graph: boolean;
  readonly logits: Tensor | null;
  readonly t0: number;
  /**
   * Graph steps: the step's tokens are downloaded in stream order into `host` (8 bytes each); `ready()` returns once
   * they are there, without waiting for a step launched after this one (launchChained).
   */
  readonly host?: Uint8Array;
  readonly ready?: () => void;
}

/** Release a step's tensors after an error (fixed arity: no array on the step path; released ones are skipped). */
function disposeHeld(a: Tensor | null, b: Tensor | null, c: Tensor | null, d: Tensor | null, e: Tensor | null, f: Tensor | null): void {
  a?.dispose();
  b?.dispose();
  c?.dispose();
  d?.dispose();
  e?.dispose();
  f?.dispose();
}

/** n little-endian int64 token ids (each below 2^53). */
function parseTokens(bytes: Uint8Array, n: number): number[] {
  const tokens = new Array<number>(n);
  const w = new Int32Array(bytes.buffer, bytes.byteOffset, n * 2);
  for (let i = 0; i < n; i++) tokens[i] = w[2 * i]! + w[2 * i + 1]! * 4294967296;
  return tokens;
}

export function sameSeqs(a: readonly Sequence[], b: readonly Sequence[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export interface RunnerStats {
  steps: number;
  graphSteps: number;
  eagerSteps: number;
  /** Graph steps whose metadata was written during the previous step. */
  prestagedSteps: number;
  /** Graph steps launched before the previous step's tokens were read, their input ids copied on the device. */
  chainedSteps: number;
  /** Host milliseconds spent preparing and launching (before the wait for tokens), summed. */
  launchMs: number;
  /** Host milliseconds blocked on the step's tokens, summed. */
  waitMs: number;
}

/**
 * The model runner of the engine (nano-vllm's ModelRunner with vLLM V1's mixed batches): a scheduled batch
 * (prefill chunks first, then decodes) becomes one forward over persistent device buffers — input ids,
 * positions, slot mapping, cu_seqlens, block tables, seq lens, logits indices and sampling parameters live in
 * one device allocation written from host staging each step (asynchronously from page-locked memory on CUDA;
 * two staging buffers alternate, so the next step can be written while the GPU runs this one). Nothing is
 * allocated per step except the model's own activations on the eager path.
 *
 * Decode-only batches up to the largest bucket replay a CUDA graph captured for the smallest bucket that
 * holds them (1, 2, 4, 8, 16, 32 … 256), padded: padding rows write no cache slot (-1), attend to one key and
 * sample greedily; their tokens are dropped. A graph covers forward + LM head + sampler and copies the tokens
 * into a static buffer, so a decode step is one upload, one replay and one small download. Where the backend's
 * sampler has several launch paths for a bucket (Ops.samplePath: the CUDA sampler splits rows over CTAs when many
 * rows draw), the bucket gets one graph per path, and a step replays the one its count of drawing rows picks.
 */
export class EngineRunner {
  readonly stats: RunnerStats = { steps: 0, graphSteps: 0, eagerSteps: 0, prestagedSteps: 0, chainedSteps: 0, launchMs: 0, waitMs: 0 };
  private prestaged: { staging: Staging; seqs: Sequence[]; bucket: number } | null = null;
  readonly io: StepIo;
  readonly maxBlocksPerSeq: number;
  private readonly sampler: Sampler;
  private readonly fields = new Map<FieldName, Field>();
  private readonly meta: Tensor;
  private readonly views = new Map<FieldName, Tensor>();
  private readonly staging: [Staging, Staging];
  private flip = 0;
  private kvSlotsDev: Tensor | null = null;
  private kvSlotsHost: Staging | null = null;
  private kvSlotsCap = 0;
  private readonly tokensOut: Tensor;
  /**
   * Set by the engine when it chains decode steps (launchChained): graph steps then download their tokens behind a
   * fence at launch; otherwise collect reads them with one synchronous copy (the H200-verified path).
   */
  chainsDecode = false;
  /** Host copies of graph steps' tokens; two alternate, as two steps can be in flight (launchChained). Made on first use. */
  private tokensHost: [Uint8Array, Uint8Array] | null = null;
  private tokensFlip = 0;
  private readonly graphRt: GraphRuntime | null;
  /** bucket -> one graph per sampler path (the key '' when the backend has one path) */
  private readonly graphs = new Map<number, Map<string, CapturedGraph>>();
  private buckets: number[] = [];
  private vocabSize = 0;
  private pool: unknown = null;
  private poolStats: { estimateBytes: number; attempts: number; peakBytes?: number } | null = null;
  /** The tensor-parallel group the model was built in (world 1: none). */
  private readonly tp: TensorParallelGroup = currentTensorParallelGroup();
  private readonly stateCache: StateCache | null;
  /** What a graph decode step uploads; a chained one, the same but the input ids (copied on the device from the step before). */
  private readonly decodeFields: readonly FieldName[];
  private readonly chainedFields: readonly FieldName[];

  constructor(
    readonly model: CausalLM,
    readonly ctx: ExecutionContext,
    readonly kvCache: KvCache,
    readonly blockManager: BlockManager,
    readonly config: RunnerConfig,
    io?: StepIo,
  ) {
    this.io = io ?? stepIoFor(ctx.backend);
    this.graphRt = config.graphs === false ? null : typeof config.graphs === 'object' ? config.graphs : this.io.graphs;
    this.maxBlocksPerSeq = Math.ceil(config.maxModelLen / blockManager.blockSize);
    this.sampler = ctx.registry.createIn<Sampler>(ctx, 'L1/sampler');
    this.stateCache = config.stateCache ?? null;
    this.decodeFields = this.stateCache ? STATE_DECODE_FIELDS : DECODE_FIELDS;
    this.chainedFields = this.decodeFields.filter((f) => f !== 'inputIds');
    const T = config.maxNumBatchedTokens + config.maxNumSeqs;
    const S = config.maxNumSeqs;
    const layout: [FieldName, DType, number][] = [
      ['inputIds', 'i64', T], ['positions', 'i64', T], ['slotMapping', 'i64', T], ['logitsIdx', 'i64', S], ['seeds', 'i64', S],
      ['cuQ', 'i32', S + 1], ['cuK', 'i32', S + 1], ['seqLens', 'i32', S], ['topK', 'i32', S], ['temperature', 'f32', S], ['topP', 'f32', S],
      ['blockTables', 'i32', S * this.maxBlocksPerSeq],
      ...(this.stateCache ? [['stateIndices', 'i32', S] as [FieldName, DType, number]] : []),
    ];
    let off = 0;
    for (const [name, dtype, cap] of layout) {
      this.fields.set(name, { dtype, byteOffset: off, capacity: cap });
      off = Math.ceil((off + cap * DTYPE_INFO[dtype].itemsize) / 256) * 256;
    }
    this.meta = Tensor.zeros(ctx.backend, [off], 'u8', { device: ctx.device });
    for (const [name, f] of this.fields) {
      this.views.set(name, new Tensor({ storage: this.meta.storage, dtype: f.dtype, shape: [f.capacity], offset: f.byteOffset / DTYPE_INFO[f.dtype].itemsize }));
    }
    this.staging = [new Staging(this.io, this.fields, off), new Staging(this.io, this.fields, off)];
    this.tokensOut = Tensor.zeros(ctx.backend, [S], 'i64', { device: ctx.device });
  }

  get graphBuckets(): readonly number[] {
    return this.buckets;
  }

  get usesGraphs(): boolean {
    return this.graphs.size > 0;
  }

  /** Captured graphs, counting every sampler-path variant of a bucket. */
  get graphCount(): number {
    let n = 0;
    for (const v of this.graphs.values()) n += v.size;
    return n;
  }

  // ---------------------------------------------------------------------------------------- staging

  private stage(): Staging {
    this.flip ^= 1;
    const s = this.staging[this.flip]!;
    s.used.clear();
    return s;
  }

  private upload(s: Staging, name: FieldName, count: number): void {
    s.used.set(name, count);
    const f = this.fields.get(name)!;
    const bytes = count * DTYPE_INFO[f.dtype].itemsize;
    if (bytes === 0) return;
    const dst = this.views.get(name)!;
    this.io.upload(dst, s.bytes.subarray(f.byteOffset, f.byteOffset + bytes), bytes);
  }

  private view(name: FieldName, ...shape: number[]): Tensor {
    const base = this.views.get(name)!;
    const n = shape.reduce((a, b) => a * b, 1);
    const flat = base.narrow(0, 0, n);
    if (shape.length === 1) return flat;
    const v = flat.view(...shape);
    flat.dispose();
    return v;
  }

  /** Sampling parameters of row r, for the token `ahead` tokens after seq's next one (prestaging: 1). */
  private stageSampling(s: Staging, r: number, seq: Sequence | null, ahead = 0): void {
    s.setF32('temperature', r, seq ? seq.params.temperature : 0);
    s.setI32('topK', r, seq ? seq.params.topK : 0);
    s.setF32('topP', r, seq ? seq.params.topP : 1);
    s.setI64('seeds', r, seq ? requestStepSeed(seq, ahead) : 0);
  }

  /** Decode row d (token row tokenRow, state row stateRow): its token, block table, length and state slot. */
  private stageDecodeRow(s: Staging, tokenRow: number, d: number, seq: Sequence | null, ahead: number, stateRow = d): void {
    const W = this.maxBlocksPerSeq;
    if (seq) {
      const p = seq.numTokens - 1 + ahead;
      if (!ahead) s.setI64('inputIds', tokenRow, seq.tokenIds[p]!);
      s.setI64('positions', tokenRow, p);
      s.setI64('slotMapping', tokenRow, this.blockManager.slot(seq, p));
      s.setI32('seqLens', d, p + 1);
      const bt = seq.blockTable;
      const w0 = s.word('blockTables', d * W);
      for (let j = 0; j < bt.length; j++) s.i32[w0 + j] = bt[j]!;
      if (this.stateCache) s.setI32('stateIndices', stateRow, seq.stateSlot);
    } else {
      s.setI64('inputIds', tokenRow, 0);
      s.setI64('positions', tokenRow, 0);
      s.setI64('slotMapping', tokenRow, -1);
      s.setI32('seqLens', d, 1);
      s.setI32('blockTables', d * W, 0);
      if (this.stateCache) s.setI32('stateIndices', stateRow, -1); // PAD_SLOT_ID: the recurrent ops skip the row
    }
  }

  // ---------------------------------------------------------------------------------------- steps

  /**
   * Run one scheduled step; returns the sampled token of each sampling sequence (sampling prefills, then
   * decodes). `collectLogits` (eager only) also returns their float32 logits.
   */
  execute(batch: ScheduledBatch, options: { collectLogits?: boolean } = {}): { tokens: number[]; logits?: Float32Array[] } {
    return this.collect(this.launch(batch, options));
  }

  /**
   * Stage, upload and enqueue a step (graph replay or eager forward + sampler); returns before the tokens are
   * read, so the caller can prepare the next step while the device runs this one (prestageDecode).
   */
  launch(batch: ScheduledBatch, options: { collectLogits?: boolean } = {}): PendingStep {
    const t0 = performance.now();
    const B = batch.decodes.length;
    let pending: PendingStep;
    if (!batch.prefills.length && B > 0 && !options.collectLogits && this.graphs.size && B <= this.buckets[this.buckets.length - 1]!) {
      let bucket = this.buckets[0]!;
      for (const b of this.buckets) if (b >= B) { bucket = b; break; }
      const pre = this.prestaged;
      this.prestaged = null;
      let s: Staging;
      if (pre && pre.bucket === bucket && sameSeqs(pre.seqs, batch.decodes)) {
        // positions, slots, lengths, block tables and sampling settings (seeds included: prestaged one token ahead)
        // were written during the previous step
        s = pre.staging;
        this.flip = this.staging.indexOf(s);
        for (let d = 0; d < B; d++) {
          const seq = batch.decodes[d]!;
          s.setI64('inputIds', d, seq.tokenIds[seq.numTokens - 1]!);
        }
        this.stats.prestagedSteps++;
      } else {
        s = this.stage();
        for (let d = 0; d < bucket; d++) {
          const seq = d < B ? batch.decodes[d]! : null;
          this.stageDecodeRow(s, d, d, seq, 0);
          this.stageSampling(s, d, seq);
        }
      }
      for (const f of this.decodeFields) this.upload(s, f, bucket);
      this.upload(s, 'blockTables', bucket * this.maxBlocksPerSeq);
      this.graphFor(bucket, batch.decodes).replay();
      this.stats.graphSteps++;
      // with chained decode the next step may be launched before these tokens are read: download them now
      pending = this.chainsDecode ? { nSample: B, graph: true, logits: null, t0, ...this.downloadTokens(B) } : { nSample: B, graph: true, logits: null, t0 };
    } else {
      this.prestaged = null;
      pending = this.launchEager(batch, options.collectLogits ?? false, t0);
      this.stats.eagerSteps++;
    }
    this.stats.steps++;
    this.stats.launchMs += performance.now() - t0;
    return pending;
  }

  /** Wait for a launched step's tokens (and logits). */
  collect(p: PendingStep): { tokens: number[]; logits?: Float32Array[] } {
    const t1 = performance.now();
    this.tp.synchronize(); // a dead tensor-parallel peer: the communicator's error within its deadline, not a hang
    let tokens: number[];
    if (p.host && p.ready) {
      p.ready();
      tokens = parseTokens(p.host, p.nSample);
    } else tokens = this.readTokens(p.nSample);
    const out: { tokens: number[]; logits?: Float32Array[] } = { tokens };
    if (p.nSample === 0) this.ctx.backend.synchronize(this.ctx.device); // staging buffers are reused two steps on
    if (p.logits) {
      const all = p.logits.toFloat64Array();
      const V = p.logits.shape[1]!;
      out.logits = Array.from({ length: p.nSample }, (_, b) => Float32Array.from(all.subarray(b * V, (b + 1) * V)));
      p.logits.dispose();
    }
    this.stats.waitMs += performance.now() - t1;
    return out;
  }

  /**
   * Write the staging of the next decode step for `seqs`, each one token further than now (their blocks must
   * already cover it), into the staging buffer the current step does not use. launch() uses it when the next
   * batch is exactly these decodes; otherwise it is dropped. Only for graph decode (the eager path restages).
   */
  prestageDecode(seqs: readonly Sequence[]): boolean {
    this.prestaged = null;
    const B = seqs.length;
    if (!this.graphs.size || B === 0 || B > this.buckets[this.buckets.length - 1]!) return false;
    let bucket = this.buckets[0]!;
    for (const b of this.buckets) if (b >= B) { bucket = b; break; }
    const s = this.staging[this.flip ^ 1]!;
    s.used.clear();
    for (let d = 0; d < bucket; d++) {
      const seq = d < B ? seqs[d]! : null;
      this.stageDecodeRow(s, d, d, seq, 1);
      this.stageSampling(s, d, seq, 1);
    }
    this.prestaged = { staging: s, seqs: [...seqs], bucket };
    return true;
  }

  private readTokens(n: number): number[] {
    if (n === 0) return [];
    return parseTokens(this.ctx.backend.read(this.tokensOut.storage, this.tokensOut.offset * 8, n * 8), n);
  }

  /** Enqueue the download of a graph step's n tokens into the next host buffer. */
  private downloadTokens(n: number): { host: Uint8Array; ready: () => void } {
    const n8 = this.tokensOut.numel * 8;
    this.tokensHost ??= [this.io.hostBuffer(n8), this.io.hostBuffer(n8)];
    this.tokensFlip ^= 1;
    const host = this.tokensHost[this.tokensFlip]!;
    return { host, ready: this.io.download(this.tokensOut, host, n * 8) };
  }

  /**
   * Launch the decode step after the one in flight before reading its tokens (vLLM's async scheduling, one step deep):
   * the sequences prestageDecode staged, each continuing with the token the step in flight (whose decode rows were
   * `prev`; the prestaged ones keep their order, minus those that stop there) samples for it. The input ids are copied
   * on the device from that step's token rows, a copy per run of consecutive rows; positions, slots, lengths, block
   * tables and sampling settings (seeds of the next token) come from the prestaged staging. The caller keeps the
   * result only if the scheduler then schedules exactly these sequences (else it waits for it and drops it: a cache
   * slot it wrote is rewritten by the step that replaces it, or belongs to a finished sequence). null: nothing staged.
   */
  launchChained(prev: readonly Sequence[]): PendingStep | null {
    const pre = this.prestaged;
    this.prestaged = null;
    if (!pre) return null;
    const seqs = pre.seqs;
    const t0 = performance.now();
    const B = seqs.length;
    const s = pre.staging;
    this.flip = this.staging.indexOf(s);
    for (const f of this.chainedFields) this.upload(s, f, pre.bucket);
    this.upload(s, 'blockTables', pre.bucket * this.maxBlocksPerSeq);
    // row d takes the token of seqs[d]'s row in the step before (padding rows keep an earlier, valid id)
    const ids = this.views.get('inputIds')!;
    const copy = (dst: number, src: number, n: number) =>
      this.ctx.backend.copyBytes(ids.storage, (ids.offset + dst) * 8, this.tokensOut.storage, (this.tokensOut.offset + src) * 8, n * 8);
    let runDst = 0;
    let runSrc = -1;
    let src = 0;
    for (let d = 0; d < B; d++) {
      while (src < prev.length && prev[src] !== seqs[d]) src++;
      if (src === prev.length) throw new Error(`launchChained: sequence ${seqs[d]!.seqId} was not in the step before`);
      if (runSrc < 0) [runDst, runSrc] = [d, src];
      else if (src !== runSrc + (d - runDst)) {
        copy(runDst, runSrc, d - runDst);
        [runDst, runSrc] = [d, src];
      }
      src++;
    }
    if (runSrc >= 0) copy(runDst, runSrc, B - runDst);
    this.graphFor(pre.bucket, seqs).replay();
    this.stats.graphSteps++;
    this.stats.chainedSteps++;
    this.stats.steps++;
    this.stats.launchMs += performance.now() - t0;
    return { nSample: B, graph: true, logits: null, t0, ...this.downloadTokens(B) };
  }

  private ensureKvSlots(n: number): void {
    if (n <= this.kvSlotsCap) return;
    const cap = Math.max(n, this.kvSlotsCap * 2, 1024);
    this.kvSlotsDev?.dispose();
    this.kvSlotsDev = Tensor.zeros(this.ctx.backend, [cap], 'i64', { device: this.ctx.device });
    this.kvSlotsHost = new Staging(this.io, new Map([['inputIds', { dtype: 'i64', byteOffset: 0, capacity: cap }]]), cap * 8);
    this.kvSlotsCap = cap;
  }

  private launchEager(batch: ScheduledBatch, collectLogits: boolean, t0: number): PendingStep {
    const s = this.stage();
    const bm = this.blockManager;
    let T = 0;
    let nSample = 0;
    let sampledRows = 0; // sampling rows with temperature > 0 (the sampler's SampleHint)
    let maxQ = 0;
    let maxK = 0;
    let hasContext = false;
    let kvTotal = 0;
    const P = batch.prefills.length;
    const fresh: number[] = []; // state slots of sequences starting at position 0
    s.setI32('cuQ', 0, 0);
    s.setI32('cuK', 0, 0);
    for (let i = 0; i < P; i++) {
      const c = batch.prefills[i]!;
      if (this.stateCache) {
        s.setI32('stateIndices', i, c.seq.stateSlot);
        if (c.start === 0) fresh.push(c.seq.stateSlot);
      }
      for (let p = c.start; p < c.start + c.numTokens; p++) {
        s.setI64('inputIds', T, c.seq.tokenIds[p]!);
        s.setI64('positions', T, p);
        s.setI64('slotMapping', T, bm.slot(c.seq, p));
        T++;
      }
      const lk = c.start + c.numTokens;
      if (c.start > 0) hasContext = true;
      kvTotal += lk;
      s.setI32('cuQ', i + 1, T);
      s.setI32('cuK', i + 1, kvTotal);
      maxQ = Math.max(maxQ, c.numTokens);
      maxK = Math.max(maxK, lk);
      if (c.samples) {
        s.setI64('logitsIdx', nSample, T - 1);
        this.stageSampling(s, nSample, c.seq);
        if (c.seq.params.temperature > 0) sampledRows++;
        nSample++;
      }
    }
    const Tp = T;
    const B = batch.decodes.length;
    for (let d = 0; d < B; d++) {
      const seq = batch.decodes[d]!;
      this.stageDecodeRow(s, T, d, seq, 0, P + d);
      s.setI64('logitsIdx', nSample, T);
      this.stageSampling(s, nSample, seq);
      if (seq.params.temperature > 0) sampledRows++;
      nSample++;
      T++;
    }
    for (const f of ['inputIds', 'positions', 'slotMapping'] as const) this.upload(s, f, T);
    if (P) {
      this.upload(s, 'cuQ', P + 1);
      this.upload(s, 'cuK', P + 1);
    }
    if (B) {
      this.upload(s, 'seqLens', B);
      this.upload(s, 'blockTables', B * this.maxBlocksPerSeq);
    }
    for (const f of ['logitsIdx', 'temperature', 'topK', 'topP', 'seeds'] as const) this.upload(s, f, nSample);
    if (this.stateCache) {
      this.upload(s, 'stateIndices', P + B);
      if (fresh.length) this.stateCache.reset(fresh);
    }
    let kvSlots: Tensor | null = null;
    if (hasContext) {
      this.ensureKvSlots(kvTotal);
      const h = this.kvSlotsHost!;
      let k = 0;
      for (const c of batch.prefills) for (let p = 0; p < c.start + c.numTokens; p++) h.setI64('inputIds', k++, bm.slot(c.seq, p));
      this.io.upload(this.kvSlotsDev!, h.bytes, kvTotal * 8);
      kvSlots = this.kvSlotsDev!.narrow(0, 0, kvTotal);
    }

    const temps: Tensor[] = [];
    const v = (name: FieldName, ...shape: number[]) => {
      const t = this.view(name, ...shape);
      temps.push(t);
      return t;
    };
    const metadata: AttentionMetadata = {
      numPrefills: P,
      numPrefillTokens: Tp,
      numDecodes: B,
      slotMapping: v('slotMapping', T),
      cuSeqlensQ: P ? v('cuQ', P + 1) : null,
      cuSeqlensK: P ? v('cuK', P + 1) : null,
      maxSeqlenQ: maxQ,
      maxSeqlenK: maxK,
      blockTables: B ? v('blockTables', B, this.maxBlocksPerSeq) : null,
      seqLens: B ? v('seqLens', B) : null,
      prefillKvSlots: kvSlots,
      ...(this.stateCache ? { stateIndices: v('stateIndices', P + B) } : {}),
    };
    if (kvSlots) temps.push(kvSlots);
    const ctx = this.ctx;
    // The step's tensors, each released as soon as it is used up; when an op throws midway, the finally releases
    // what is still held (dispose() of a released tensor does nothing).
    let hidden: Tensor | null = null;
    let last: Tensor | null = null;
    let logitsAct: Tensor | null = null;
    let logits: Tensor | null = null;
    let tokens: Tensor | null = null;
    let dst: Tensor | null = null;
    let done = false;
    try {
      const pending = withContext(ctx, (): PendingStep => {
        hidden = withForwardContext(this.forwardContext(metadata), () => this.model.forward(v('inputIds', T), v('positions', T)));
        if (nSample === 0) {
          hidden.dispose();
          return { nSample: 0, graph: false, logits: null, t0 };
        }
        last = nSample === T ? hidden : ctx.backend.ops.embedding(v('logitsIdx', nSample), hidden);
        if (last !== hidden) hidden.dispose();
        logitsAct = this.model.computeLogits(last);
        last.dispose();
        logits = logitsAct.dtype === 'f32' ? logitsAct : logitsAct.to('f32');
        if (logits !== logitsAct) logitsAct.dispose();
        tokens = this.sampler.forward(logits, v('temperature', nSample), v('topK', nSample), v('topP', nSample), v('seeds', nSample), { sampledRows });
        dst = this.tokensOut.narrow(0, 0, nSample);
        dst.copy_(tokens);
        dst.dispose();
        tokens.dispose();
        if (!collectLogits) logits.dispose();
        return { nSample, graph: false, logits: collectLogits ? logits : null, t0 };
      });
      done = true;
      return pending;
    } finally {
      for (const t of temps) t.dispose();
      if (!done) disposeHeld(hidden, last, logitsAct, logits, tokens, dst);
    }
  }

  // ---------------------------------------------------------------------------------------- graphs

  /**
   * The sampler's launch paths for a bs-row decode, each with a hint that selects it (the fewest drawing rows that do):
   * one entry with no hint when the backend has a single path (no Ops.samplePath).
   */
  private sampleVariants(bs: number): { path: string; hint?: SampleHint }[] {
    const ops = this.ctx.backend.ops;
    if (!ops.samplePath) return [{ path: '' }];
    const out: { path: string; hint: SampleHint }[] = [];
    for (let r = 0; r <= bs; r++) {
      const path = ops.samplePath(bs, this.vocabSize, { sampledRows: r });
      if (!out.some((v) => v.path === path)) out.push({ path, hint: { sampledRows: r } });
    }
    return out;
  }

  /** The graph of this bucket whose sampler path fits the step's drawing rows (temperature > 0). */
  private graphFor(bucket: number, decodes: readonly Sequence[]): CapturedGraph {
    const variants = this.graphs.get(bucket)!;
    const ops = this.ctx.backend.ops;
    if (variants.size === 1 || !ops.samplePath) return variants.values().next().value!;
    let drawing = 0;
    for (const seq of decodes) if (seq.params.temperature > 0) drawing++;
    return variants.get(ops.samplePath(bucket, this.vocabSize, { sampledRows: drawing })) ?? variants.values().next().value!;
  }

  /** The forward + LM head + sampler of a bs-row decode over the static buffers; tokens into tokensOut. */
  private decodeBody(bs: number, hint?: SampleHint): void {
    const temps: Tensor[] = [];
    const v = (name: FieldName, ...shape: number[]) => {
      const t = this.view(name, ...shape);
      temps.push(t);
      return t;
    };
    // as in launchEager: released as soon as used up, and by the finally when an op throws midway (a capture that
    // runs out of its graph pool throws from an allocation here, and is retried with a bigger pool)
    let hidden: Tensor | null = null;
    let logitsAct: Tensor | null = null;
    let logits: Tensor | null = null;
    let tokens: Tensor | null = null;
    let dst: Tensor | null = null;
    try {
      const metadata: AttentionMetadata = {
        numPrefills: 0, numPrefillTokens: 0, numDecodes: bs,
        slotMapping: v('slotMapping', bs), cuSeqlensQ: null, cuSeqlensK: null, maxSeqlenQ: 1, maxSeqlenK: this.config.maxModelLen,
        blockTables: v('blockTables', bs, this.maxBlocksPerSeq), seqLens: v('seqLens', bs),
        ...(this.stateCache ? { stateIndices: v('stateIndices', bs) } : {}),
      };
      withContext(this.ctx, () => {
        hidden = withForwardContext(this.forwardContext(metadata), () => this.model.forward(v('inputIds', bs), v('positions', bs)));
        logitsAct = this.model.computeLogits(hidden);
        hidden.dispose();
        logits = logitsAct.dtype === 'f32' ? logitsAct : logitsAct.to('f32');
        if (logits !== logitsAct) logitsAct.dispose();
        // the hint picks the sampler's launch path for this graph variant (sampleVariants); the tokens never depend on it
        tokens = this.sampler.forward(logits, v('temperature', bs), v('topK', bs), v('topP', bs), v('seeds', bs), hint);
        logits.dispose();
        dst = this.tokensOut.narrow(0, 0, bs);
        dst.copy_(tokens);
        dst.dispose();
        tokens.dispose();
      });
    } finally {
      for (const t of temps) t.dispose();
      disposeHeld(hidden, null, logitsAct, logits, tokens, dst);
    }
  }

  /** Stage padding rows (valid, harmless values) for bs rows and upload them. */
  private stagePadding(bs: number): void {
    const s = this.stage();
    for (let d = 0; d < bs; d++) {
      this.stageDecodeRow(s, d, d, null, 0);
      this.stageSampling(s, d, null);
    }
    for (const f of this.decodeFields) this.upload(s, f, bs);
    this.upload(s, 'blockTables', bs * this.maxBlocksPerSeq);
  }

  private forwardContext(metadata: AttentionMetadata): ForwardContext {
    return this.stateCache ? { attnMetadata: metadata, kvCaches: this.kvCache.layers, stateCaches: this.stateCache.layers } : { attnMetadata: metadata, kvCaches: this.kvCache.layers };
  }

  /**
   * Pool bytes a bs-row decode allocates (every activation of every layer: a graph pool does not reuse), with a
   * margin: the sum below came to 1.59 GiB for the Llama-3-8B shape at bs 256 where one capture used 1.73 GiB (run 11,
   * serve-full-run11.log), and an estimate that is short costs a failed capture at start-up.
   */
  static estimateGraphPoolBytes(g: RunnerGeometry, bs: number, dtype: DType): number {
    const it = DTYPE_INFO[dtype].itemsize;
    const qkv = (g.numAttentionHeads + 2 * g.numKeyValueHeads) * g.headDim;
    const q = g.numAttentionHeads * g.headDim;
    const kv = g.numKeyValueHeads * g.headDim;
    const perLayer = bs * it * (qkv + q + kv + q + 4 * g.hiddenSize + 3 * g.intermediateSize) + 4 * 1024 * 1024 + 64 * 256;
    const sum = g.numHiddenLayers * perLayer + bs * g.vocabSize * (it + 8) + bs * 64 + 16 * 1024 * 1024;
    return Math.ceil(sum * GRAPH_POOL_MARGIN);
  }

  /**
   * Warm up (one eager decode per bucket, so kernels are compiled before capture) and
   * capture one graph per bucket, largest first, all sharing one pool (graphs replay one at a time and their
   * outputs are copied into static buffers, so their activations may overlap). Returns the pool bytes, 0 without graphs.
   */
  captureGraphs(geometry: RunnerGeometry): number {
    if (!this.graphRt) return 0;
    const maxB = Math.min(this.config.maxGraphBatch ?? 256, this.config.maxNumSeqs);
    this.buckets = graphBucketSizes(maxB, maxB);
    if (!this.buckets.length) return 0;
    // every bucket once eagerly: kernels specialised per shape are compiled and lazy module state is created
    // outside capture (a module load or an allocation during capture would fail or land in the shared pool)
    this.vocabSize = geometry.vocabSize;
    for (const bs of this.buckets) {
      for (const v of this.sampleVariants(bs)) {
        this.stagePadding(bs);
        this.decodeBody(bs, v.hint);
      }
    }
    this.ctx.backend.synchronize(this.ctx.device);
    let bytes = this.config.graphPoolBytes ?? EngineRunner.estimateGraphPoolBytes(geometry, this.buckets[this.buckets.length - 1]!, this.ctx.dtype);
    const estimate = bytes;
    for (let attempt = 0; ; attempt++) {
      this.poolStats = { estimateBytes: estimate, attempts: attempt + 1 };
      this.pool = this.graphRt.createPool(bytes);
      try {
        for (const bs of [...this.buckets].reverse()) {
          const variants = new Map<string, CapturedGraph>();
          this.graphs.set(bs, variants);
          for (const v of this.sampleVariants(bs)) {
            this.stagePadding(bs);
            captureDepth++;
            try {
              variants.set(v.path, this.graphRt.capture(() => this.decodeBody(bs, v.hint), this.pool));
            } finally {
              captureDepth--;
            }
          }
        }
        break;
      } catch (e) {
        this.destroyGraphs();
        if (attempt < 3 && /graph pool exhausted/.test(String((e as Error).message))) {
          bytes *= 2;
          continue;
        }
        if (typeof e === 'object' && e !== null) {
          try {
            Object.defineProperty(e, CAPTURE_PHASE, { value: true });
          } catch {
            // a frozen error stays unmarked
          }
        }
        throw e;
      }
    }
    this.ctx.backend.synchronize(this.ctx.device);
    const peak = this.graphRt.poolPeakBytes?.(this.pool);
    if (peak !== undefined) this.poolStats = { ...this.poolStats!, peakBytes: peak };
    return this.graphRt.poolBytes(this.pool);
  }

  /**
   * The graph pool's sizing at the last captureGraphs: the estimate, the attempts it took (each failed one doubled the
   * pool), and the most one capture used where the runtime tracks it — what the estimate should have been.
   */
  get graphPoolStats(): { estimateBytes: number; attempts: number; peakBytes?: number } | null {
    return this.poolStats;
  }

  private destroyGraphs(): void {
    for (const variants of this.graphs.values()) for (const g of variants.values()) g.destroy();
    this.graphs.clear();
    if (this.pool !== null) this.graphRt?.destroyPool(this.pool);
    this.pool = null;
  }

  dispose(): void {
    this.destroyGraphs();
    this.sampler.dispose();
    for (const t of this.views.values()) t.dispose();
    this.meta.dispose();
    this.tokensOut.dispose();
    this.kvSlotsDev?.dispose();
  }
}
