import { DTYPE_INFO, Tensor, UserError, currentTensorParallelGroup, errorMessage, withContext, type Backend, type ExecutionContext, type TensorParallelGroup } from '@fastkernels/core';
import { KV_BLOCK_SIZE } from '../tasks/L1/kvcache/store_kvcache.js';
import { BlockManager } from './block-manager.js';
import { stateSlotBytes } from './cache-spec.js';
import type { GraphRuntime } from './device-io.js';
import { stepIoFor } from './device-io.js';
import { disposeAttentionMetadata, withForwardContext, type AttentionMetadata } from './forward-context.js';
import { KvCache, kvCacheSpecFor, type KvCacheSpec } from './kv-cache.js';
import { formatBudget, formatGraphPool, planKvCache, withKvBlocks, type MemoryBudget } from './memory.js';
import type { CausalLM } from './model-runner.js';
import { EngineRunner, isCaptureError, sameSeqs, type PendingStep, type RunnerGeometry } from './runner.js';
import { Scheduler } from './scheduler.js';
import { StateCache } from './state-cache.js';
import { StateSlotManager } from './state-slots.js';
import { DEFAULT_SAMPLING, Sequence, type FinishReason, type SamplingParams } from './sequence.js';
import { tokenLogprob, type TokenLogprob } from './logprobs.js';

/** The model facts the engine needs (LlamaConfig has them all). */
export interface EngineGeometry extends RunnerGeometry {
  readonly maxPositionEmbeddings: number;
}

export interface EngineOptions {
  /** Tokens per step, prefill chunks and decodes together (vLLM/nano-vllm default 16384 on a large GPU). */
  readonly maxNumBatchedTokens?: number;
  /** Sequences per step (default 256). */
  readonly maxNumSeqs?: number;
  /** Longest prompt + output (default min(max_position_embeddings, 4096)). */
  readonly maxModelLen?: number;
  readonly chunkedPrefill?: boolean;
  /** Fraction of device memory the engine may use (default 0.9). */
  readonly gpuMemoryUtilization?: number;
  /** Use exactly this many KV blocks (tests, or to bypass profiling). */
  readonly numKvBlocks?: number;
  /** CUDA-graph decode (default: when the backend has graphs); a GraphRuntime to use that one. */
  readonly graphs?: boolean | GraphRuntime;
  readonly maxGraphBatch?: number;
  /** EOS id(s) of the model; a request stops there unless it sets ignoreEos. */
  readonly eosTokenId?: number | readonly number[];
  /** Write the next decode step's metadata while the device runs this one (default true). */
  readonly overlap?: boolean;
  /**
   * Also launch that next decode step before this one's tokens are read, its input ids copied on the device (vLLM's
   * async scheduling, one step deep): the host's scheduling and postprocessing then run while the device works.
   * Graph decode at world size 1 only. Default: chainDecodeDefault (the CUDA backend's tuning, engine.chainDecode: on;
   * it takes the host's scheduling off the bs-1 step's critical path).
   */
  readonly chainDecode?: boolean;
  /** Where the memory budget and start-up lines go. */
  readonly log?: (line: string) => void;
}

/**
 * EngineOptions.chainDecode when not given: what the backend's tuning says (the CUDA backend's `engineTuning`, its
 * tuning file's engine section), else (no backend given, or one without tuning) on. Duck-typed: the engine does not
 * depend on backend-cuda.
 */
export function chainDecodeDefault(backend?: Backend): boolean {
  const t = (backend as { readonly engineTuning?: { readonly chainDecode?: unknown } } | undefined)?.engineTuning;
  return typeof t?.chainDecode === 'boolean' ? t.chainDecode : true;
}

export interface RequestOutput {
  readonly requestId: number;
  readonly promptIds: number[];
  readonly tokenIds: number[];
  readonly finishReason: FinishReason;
  readonly numPreemptions: number;
}

/** Host and device timing of one step. */
export interface StepRecord {
  readonly kind: 'prefill' | 'decode' | 'mixed';
  readonly numTokens: number;
  readonly numSeqs: number;
  readonly graph: boolean;
  /** Host time on the critical path: scheduling + staging + launch, then postprocessing after the tokens arrived. */
  readonly hostMs: number;
  /** Host work done while the device ran the step (the next step's metadata). */
  readonly overlapMs: number;
  /** Wall time of the whole step. */
  readonly stepMs: number;
}

export interface StepOutput {
  /** New token per request this step. */
  readonly tokens: readonly (readonly [requestId: number, token: number])[];
  readonly finished: readonly RequestOutput[];
  readonly record: StepRecord;
  /** The new tokens' log-probabilities, for the requests that asked (SamplingParams.logprobs). */
  readonly logprobs?: readonly (readonly [requestId: number, logprob: TokenLogprob])[];
}

/** Thrown when a run passes its deadline (checked between steps). */
export class EngineTimeoutError extends Error {
  override readonly name = 'EngineTimeoutError';
}

/** Under tensor parallelism the ranks agree on the deadline every this many steps (one tiny all-reduce each time). */
export const DEADLINE_AGREE_EVERY = 16;

/** Why decode runs eagerly although graphs were asked for (tensor parallelism: a capture failed on some rank). */
export interface GraphFallback {
  readonly reason: string;
  /** This rank's capture error (null when the capture failed on another rank only). */
  readonly error: unknown;
}

/**
 * The offline engine (nano-vllm's LLMEngine over vLLM V1's scheduling): add requests, step, collect outputs.
 * Start-up profiles memory (weights, the activation peak of a maxNumBatchedTokens forward, the graph pool),
 * sizes the paged KV cache from gpuMemoryUtilization, prints the budget, and captures the decode graphs.
 *
 * Tensor parallelism (a group of world > 1 current when the engine is built; the model built in the same group) is
 * SPMD: every rank runs this same engine over the same requests, and the engine is deterministic given its inputs
 * (scheduling reads only host state: the queues, token counts and block counts), so every rank makes the same
 * scheduling decisions with no broadcast from rank 0, provided the ranks see the same tokens — they do: the LM head's
 * logits are all-gathered, so every rank samples from identical logits with the same seeds (assumed: the sampler is
 * deterministic given its inputs, as every baseline sampler is). The few inputs that are not the same on every rank are
 * agreed on through the group: the KV block count (each rank sizes it from its own free memory: all take the smallest),
 * whether every rank captured its decode graphs (if one failed, every rank decodes eagerly, with the reason logged,
 * instead of raising a capture error), and whether a run passed its deadline (wall clocks differ: checked together
 * every DEADLINE_AGREE_EVERY steps).
 *
 * Models whose layers keep a recurrent state (geometry.layerCaches: GLA, the linear layers of hybrid stacks) also get a
 * state pool beside the paged KV cache, one slot per running sequence, planned from the same budget (docs/recurrent-state.md).
 * Their decode steps are not chained (chainDecode): a step launched ahead and then dropped would already have advanced
 * the states in place.
 */
export class LLMEngine {
  readonly scheduler: Scheduler;
  readonly blockManager: BlockManager;
  readonly kvCache: KvCache;
  /** The recurrent-state pool and its slots (null for models without recurrent layers). */
  readonly stateCache: StateCache | null = null;
  readonly stateSlots: StateSlotManager | null = null;
  readonly runner: EngineRunner;
  readonly budget: MemoryBudget;
  readonly maxModelLen: number;
  readonly records: StepRecord[] = [];
  /** Keep step records (default true; long benchmarks may turn it off). */
  keepRecords = true;
  private readonly eos: number | readonly number[];
  private readonly overlap: boolean;
  /** The decode step launched ahead (chainDecode): its sequences and its pending tokens. */
  private inflight: { seqs: Sequence[]; pending: PendingStep } | null = null;
  /** Steps launched ahead that were used, and those dropped because the next step was scheduled otherwise. */
  readonly chainStats = { used: 0, dropped: 0 };
  private nextId = 0;
  private readonly seqs = new Map<number, Sequence>();
  /** Wall-clock limit (performance.now() ms), checked between steps; the same on every tensor-parallel rank. */
  deadline = Infinity;
  private deadlineTicks = 0;
  /** The tensor-parallel group the engine was built in (world 1: none). */
  readonly tp: TensorParallelGroup = currentTensorParallelGroup();
  /** Set when graphs were asked for but decode runs eagerly because a capture failed under tensor parallelism. */
  readonly graphFallback: GraphFallback | null = null;

  constructor(
    readonly model: CausalLM,
    readonly ctx: ExecutionContext,
    readonly geometry: EngineGeometry,
    readonly options: EngineOptions = {},
  ) {
    const maxModelLen = options.maxModelLen ?? Math.min(geometry.maxPositionEmbeddings, 4096);
    if (maxModelLen > geometry.maxPositionEmbeddings) throw new UserError(`max-model-len ${maxModelLen} exceeds max_position_embeddings ${geometry.maxPositionEmbeddings}`, { field: '--max-model-len' });
    this.maxModelLen = maxModelLen;
    const maxNumSeqs = options.maxNumSeqs ?? 256;
    const maxNumBatchedTokens = Math.max(options.maxNumBatchedTokens ?? 16384, 1);
    const chunkedPrefill = options.chunkedPrefill ?? true;
    if (!chunkedPrefill && maxNumBatchedTokens < maxModelLen) throw new UserError(`without chunked prefill max-num-batched-tokens (${maxNumBatchedTokens}) must be >= max-model-len (${maxModelLen})`, { field: '--max-num-batched-tokens' });
    this.eos = options.eosTokenId ?? -1;
    this.overlap = options.overlap ?? true;
    const log = options.log ?? (() => {});
    const io = stepIoFor(ctx.backend);
    const wantGraphs = options.graphs ?? true;
    const graphRt = wantGraphs === false ? null : typeof wantGraphs === 'object' ? wantGraphs : io.graphs;

    const spec: KvCacheSpec = kvCacheSpecFor(geometry, ctx.dtype);
    const slotBytes = stateSlotBytes(geometry);
    const weightsBytes = model.namedParameters().reduce((a, [, t]) => a + t.numel * t.itemsize, 0);
    const profiled = this.profileActivations(maxNumBatchedTokens, Math.min(maxNumSeqs, maxNumBatchedTokens), spec, io.memoryInfo());
    const maxGraphBatch = Math.min(options.maxGraphBatch ?? 256, maxNumSeqs);
    const graphEstimate = graphRt ? EngineRunner.estimateGraphPoolBytes(geometry, maxGraphBatch, ctx.dtype) : 0;
    const maxBlocksPerSeq = Math.ceil(maxModelLen / KV_BLOCK_SIZE);
    const runnerBytes = (maxNumBatchedTokens + maxNumSeqs) * 24 + maxNumSeqs * (maxBlocksPerSeq * 4 + 64) + (1 << 20);
    const total = io.memoryInfo()?.totalBytes ?? ctx.backend.devices()[ctx.device]?.totalMemory ?? 0;
    let plan = planKvCache({
      totalBytes: total, utilization: options.gpuMemoryUtilization ?? 0.9, weightsBytes, activationPeakBytes: profiled.bytes,
      activationMeasured: profiled.measured, graphPoolBytes: graphEstimate, runnerBytes, spec, maxModelLen, maxNumSeqs,
      ...(options.numKvBlocks !== undefined ? { explicitBlocks: options.numKvBlocks } : {}),
      stateSlotBytes: slotBytes,
    });
    // every rank must hold the same block count (the scheduler's preemptions depend on it): the smallest one
    if (this.tp.world > 1) plan = withKvBlocks(plan, this.tp.agree([plan.numKvBlocks], 'min', ctx)[0]!);
    // and the same state slots (they bound the running sequences)
    if (this.tp.world > 1 && plan.numStateSlots) {
      const slots = this.tp.agree([plan.numStateSlots], 'min', ctx)[0]!;
      plan = { ...plan, numStateSlots: slots, stateBytes: slots * plan.stateSlotBytes };
    }
    this.kvCache = new KvCache(ctx.backend, ctx.device, spec, plan.numKvBlocks);
    this.blockManager = new BlockManager(plan.numKvBlocks, KV_BLOCK_SIZE);
    if (plan.numStateSlots) {
      this.stateCache = new StateCache(ctx.backend, ctx.device, geometry, plan.numStateSlots);
      this.stateSlots = new StateSlotManager(plan.numStateSlots);
    }
    // with a state pool, as many sequences run at once as it has slots
    this.scheduler = new Scheduler({ maxNumBatchedTokens, maxNumSeqs: Math.min(maxNumSeqs, plan.numStateSlots || maxNumSeqs), chunkedPrefill }, this.blockManager, this.stateSlots);
    const runnerConfig = { maxNumBatchedTokens, maxNumSeqs, maxModelLen, maxGraphBatch, stateCache: this.stateCache };
    this.runner = new EngineRunner(model, ctx, this.kvCache, this.blockManager, { ...runnerConfig, graphs: graphRt ?? false }, io);
    const chain = options.chainDecode ?? chainDecodeDefault(ctx.backend);
    this.runner.chainsDecode = chain && this.tp.world === 1 && !this.stateCache;
    try {
      const t0 = performance.now();
      let poolBytes = 0;
      let captureError: unknown = null;
      try {
        poolBytes = this.runner.captureGraphs(geometry);
      } catch (e) {
        // World 1: a capture error is the caller's (e2e drops the candidate, category compile). Under tensor
        // parallelism the ranks first agree below: NCCL inside a capture is the likelier culprit, and every rank must
        // take the same path (a rank replaying graphs beside one decoding eagerly would still pair its collectives,
        // but a rank that throws here would leave the others waiting in theirs).
        if (this.tp.world === 1 || !isCaptureError(e)) throw e;
        captureError = e;
      }
      if (this.tp.world > 1 && graphRt && !this.tp.agree([captureError ? 0 : 1], 'min', ctx)[0]) {
        const reason = captureError ? `the decode-graph capture failed on this rank: ${errorMessage(captureError).split('\n')[0]}` : 'the decode-graph capture failed on another tensor-parallel rank';
        this.graphFallback = { reason, error: captureError };
        this.runner.dispose(); // its graphs (none, or this rank's good ones) go; a runner without graphs replaces it
        this.runner = new EngineRunner(model, ctx, this.kvCache, this.blockManager, { ...runnerConfig, graphs: false }, io);
        poolBytes = 0;
      }
      this.budget = { ...plan, graphPoolBytes: graphRt ? poolBytes : 0 };
      log(formatBudget(this.budget, KV_BLOCK_SIZE));
      if (this.runner.usesGraphs) {
        const variants = this.runner.graphCount > this.runner.graphBuckets.length ? `, ${this.runner.graphCount} graphs with the sampler's launch paths` : '';
        log(`CUDA graphs: decode batch sizes ${this.runner.graphBuckets.join(', ')} captured in ${((performance.now() - t0) / 1000).toFixed(1)} s${variants}${formatGraphPool(this.runner.graphPoolStats)}${this.tp.world > 1 ? ` (with the collectives of ${this.tp.world} tensor-parallel ranks)` : ''}`);
      }
      else if (this.graphFallback) log(`CUDA graphs: off under tensor parallelism (${this.graphFallback.reason}); decode runs eagerly on every rank`);
      else log(`CUDA graphs: off (${graphRt ? 'no buckets' : ctx.backend.capabilities.graphs ? 'disabled' : `the ${ctx.backend.name} backend has none`}); decode runs eagerly`);
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /**
   * Activation peak of one maxNumBatchedTokens-token prefill + LM head over maxNumSeqs rows, measured with the
   * device allocator's peak when the backend reports it; otherwise estimated from the geometry (no forward).
   */
  private profileActivations(tokens: number, rows: number, spec: KvCacheSpec, mem: ReturnType<ReturnType<typeof stepIoFor>['memoryInfo']>): { bytes: number; measured: boolean } {
    const g = this.geometry;
    const it = DTYPE_INFO[this.ctx.dtype].itemsize;
    if (!mem) {
      const qkv = (g.numAttentionHeads + 2 * g.numKeyValueHeads) * g.headDim;
      const perToken = it * (qkv + 2 * g.numAttentionHeads * g.headDim + 4 * g.hiddenSize + 3 * g.intermediateSize);
      return { bytes: tokens * perToken + rows * g.vocabSize * (it + 4), measured: false };
    }
    const ctx = this.ctx;
    const cache = new KvCache(ctx.backend, ctx.device, spec, 1);
    const states = stateSlotBytes(this.geometry) ? new StateCache(ctx.backend, ctx.device, this.geometry, 1) : null;
    const fromInts = (v: number[], dtype: 'i32' | 'i64') => Tensor.fromArray(ctx.backend, v, [v.length], dtype, { device: ctx.device });
    const ids = fromInts(new Array(tokens).fill(0), 'i64');
    const pos = fromInts(Array.from({ length: tokens }, (_, i) => i % this.maxModelLen), 'i64');
    const md: AttentionMetadata = {
      numPrefills: 1, numPrefillTokens: tokens, numDecodes: 0, slotMapping: fromInts(new Array(tokens).fill(-1), 'i64'),
      cuSeqlensQ: fromInts([0, tokens], 'i32'), cuSeqlensK: fromInts([0, tokens], 'i32'), maxSeqlenQ: tokens, maxSeqlenK: tokens, blockTables: null, seqLens: null,
      ...(states ? { stateIndices: fromInts([0], 'i32') } : {}),
    };
    const rowIds = fromInts(Array.from({ length: rows }, (_, i) => tokens - 1 - i), 'i64');
    ctx.backend.synchronize(ctx.device);
    const before = mem.allocatedBytes;
    mem.resetPeak();
    try {
      withContext(ctx, () => {
        const hidden = withForwardContext({ attnMetadata: md, kvCaches: cache.layers, ...(states ? { stateCaches: states.layers } : {}) }, () => this.model.forward(ids, pos));
        const last = ctx.backend.ops.embedding(rowIds, hidden);
        hidden.dispose();
        const logits = this.model.computeLogits(last);
        last.dispose();
        const f = logits.to('f32');
        logits.dispose();
        f.dispose();
      });
      ctx.backend.synchronize(ctx.device);
      return { bytes: Math.max(0, mem.peakBytes - before), measured: true };
    } finally {
      for (const t of [ids, pos, rowIds]) t.dispose();
      disposeAttentionMetadata(md);
      cache.dispose();
      states?.dispose();
    }
  }

  /** Queue a request; returns its id. Validates the prompt against the vocabulary and max-model-len. */
  addRequest(promptIds: readonly number[], params: Partial<SamplingParams> = {}): number {
    const p: SamplingParams = { ...DEFAULT_SAMPLING, ...params };
    if (!promptIds.length) throw new UserError('empty prompt');
    for (const id of promptIds) if (!Number.isInteger(id) || id < 0 || id >= this.geometry.vocabSize) throw new UserError(`token id ${id} is outside the vocabulary [0, ${this.geometry.vocabSize})`, { field: 'prompt_ids' });
    if (!Number.isInteger(p.maxTokens) || p.maxTokens < 1) throw new UserError(`max_tokens must be a positive integer, got ${p.maxTokens}`, { field: 'max_tokens' });
    if (promptIds.length + p.maxTokens > this.maxModelLen) {
      throw new UserError(`${promptIds.length} prompt + ${p.maxTokens} output tokens exceed max-model-len ${this.maxModelLen}`, { field: 'max_tokens', fix: 'shorten the request or raise --max-model-len' });
    }
    const id = this.nextId++;
    const seq = new Sequence(id, promptIds, p);
    this.scheduler.add(seq);
    this.seqs.set(id, seq);
    return id;
  }

  get hasUnfinished(): boolean {
    return this.scheduler.hasUnfinished;
  }

  /** One scheduler step: schedule, launch, (prepare the next decode step), collect tokens, postprocess. */
  step(): StepOutput {
    if (this.pastDeadline()) throw new EngineTimeoutError('the run passed its deadline');
    const t0 = performance.now();
    const sched = this.scheduler;
    const batch = sched.schedule();
    if (batch.numTokens === 0) {
      throw new Error(`scheduler made no progress (${sched.waiting.length} waiting, ${sched.running.length} running, ${this.blockManager.numFreeBlocks} free blocks)`);
    }
    let pending: PendingStep | undefined;
    // a request that wants logprobs needs this step's logits on the host: an eager step that keeps them
    const sampling = [...batch.prefills.filter((p) => p.samples).map((p) => p.seq), ...batch.decodes];
    const wantLogits = sampling.some((s) => s.params.logprobs !== undefined);
    try {
      const ahead = this.inflight;
      if (ahead && !wantLogits && !batch.prefills.length && sameSeqs(ahead.seqs, batch.decodes)) {
        this.inflight = null;
        pending = ahead.pending;
        this.chainStats.used++;
      } else this.dropInflight(); // scheduled otherwise: let it finish, drop its tokens
      pending ??= this.runner.launch(batch, wantLogits ? { collectLogits: true } : {});
    } catch (e) {
      this.abort();
      throw e;
    }
    const t1 = performance.now();
    const graphStep = pending.graph;
    if (this.overlap && !batch.prefills.length && !sched.waiting.length && this.runner.usesGraphs) {
      const next = this.prestage(batch.decodes);
      // only behind a step whose tokens are already downloading (a graph step): an eager step's tokens are read from
      // tokensOut at collect, which the chained step would overwrite first
      if (next && this.runner.chainsDecode && pending.ready) {
        try {
          const p = this.runner.launchChained(batch.decodes);
          if (p) this.inflight = { seqs: next, pending: p };
        } catch (e) {
          this.abort();
          throw e;
        }
      }
    }
    const t2 = performance.now();
    let tokens: number[];
    let logits: Float32Array[] | undefined;
    try {
      ({ tokens, logits } = this.runner.collect(pending));
    } catch (e) {
      this.abort();
      throw e;
    }
    const t3 = performance.now();
    const finished = sched.postprocess(batch, tokens, this.eos);
    const outTokens: [number, number][] = [];
    let t = 0;
    for (const p of batch.prefills) if (p.samples) outTokens.push([p.seq.seqId, tokens[t++]!]);
    for (const s of batch.decodes) outTokens.push([s.seqId, tokens[t++]!]);
    const logprobs: [number, TokenLogprob][] = [];
    if (logits) sampling.forEach((s, i) => s.params.logprobs !== undefined && logprobs.push([s.seqId, tokenLogprob(logits[i]!, tokens[i]!, s.params.logprobs)]));
    const outputs = finished.map((s) => this.output(s));
    for (const s of finished) this.seqs.delete(s.seqId);
    // a step launched ahead for a sequence that just finished (EOS, a stop id) will not be scheduled: drop it now, so
    // nothing is left running when the last request is done
    if (this.inflight && finished.length && this.inflight.seqs.some((s) => finished.includes(s))) this.dropInflight();
    const t4 = performance.now();
    const record: StepRecord = {
      kind: batch.prefills.length ? (batch.decodes.length ? 'mixed' : 'prefill') : 'decode',
      numTokens: batch.numTokens, numSeqs: batch.prefills.length + batch.decodes.length,
      graph: graphStep,
      hostMs: t1 - t0 + (t4 - t3), overlapMs: t2 - t1, stepMs: t4 - t0,
    };
    if (this.keepRecords) this.records.push(record);
    return { tokens: outTokens, finished: outputs, record, ...(logprobs.length ? { logprobs } : {}) };
  }

  /** Whether the run passed its deadline; under tensor parallelism decided by all ranks together (see the class). */
  private pastDeadline(): boolean {
    if (this.deadline === Infinity) return false;
    if (this.tp.world === 1) return performance.now() > this.deadline;
    if (this.deadlineTicks++ % DEADLINE_AGREE_EVERY !== 0) return false;
    return this.tp.agree([performance.now() > this.deadline ? 1 : 0], 'max', this.ctx)[0] === 1;
  }

  /**
   * Blocks for one more token of each continuing decode, then its staging (see EngineRunner.prestageDecode). Returns
   * the sequences staged (those not at their token limit), or null when nothing was staged.
   */
  private prestage(decodes: readonly Sequence[]): Sequence[] | null {
    const next: Sequence[] = [];
    let need = 0;
    for (const s of decodes) {
      if (s.numCompletionTokens + 1 >= s.params.maxTokens) continue;
      next.push(s);
      need += this.blockManager.blocksNeeded(s, s.numTokens + 1);
    }
    if (!next.length || need > this.blockManager.numFreeBlocks) return null;
    for (const s of next) this.blockManager.ensure(s, s.numTokens + 1);
    return this.runner.prestageDecode(next) ? next : null;
  }

  /** Wait for the step launched ahead and forget it (its tokens are not used). */
  private dropInflight(): void {
    const f = this.inflight;
    this.inflight = null;
    if (!f) return;
    this.chainStats.dropped++;
    f.pending.ready?.();
  }

  private output(s: Sequence): RequestOutput {
    return { requestId: s.seqId, promptIds: s.tokenIds.slice(0, s.numPromptTokens), tokenIds: s.completionTokenIds, finishReason: s.finishReason ?? 'length', numPreemptions: s.numPreemptions };
  }

  /** Cancel one request (a client went away): its blocks are freed and it produces no output. */
  abortRequest(requestId: number): boolean {
    const s = this.seqs.get(requestId);
    if (!s) return false;
    this.seqs.delete(requestId);
    if (this.inflight?.seqs.includes(s)) this.dropInflight(); // it will not be scheduled again: nothing left running
    return this.scheduler.remove(s);
  }

  /** Drop every request (after an error), freeing their blocks. */
  abort(): void {
    try {
      this.dropInflight();
    } catch {
      // after a device error the wait fails too; the caller rethrows the first error
    }
    for (const s of this.scheduler.abortAll()) this.seqs.delete(s.seqId);
  }

  /** Run requests to completion; outputs in request order. */
  generate(requests: readonly { promptIds: readonly number[]; params?: Partial<SamplingParams> }[], onStep?: (o: StepOutput) => void): RequestOutput[] {
    const ids = requests.map((r) => this.addRequest(r.promptIds, r.params));
    const done = new Map<number, RequestOutput>();
    while (this.hasUnfinished) {
      const o = this.step();
      for (const f of o.finished) done.set(f.requestId, f);
      onStep?.(o);
    }
    return ids.map((id) => done.get(id)!);
  }

  dispose(): void {
    try {
      this.dropInflight();
    } catch {
      // a failed device: disposing frees what it can
    }
    this.runner?.dispose();
    this.kvCache?.dispose();
    this.stateCache?.dispose();
  }
}

/** Summaries of step records: decode host fraction and mean step time, for reports. */
export function summarizeSteps(records: readonly StepRecord[], filter: (r: StepRecord) => boolean = (r) => r.kind === 'decode'): { steps: number; meanStepMs: number; meanHostMs: number; hostFraction: number; graphFraction: number } {
  const rs = records.filter(filter);
  if (!rs.length) return { steps: 0, meanStepMs: 0, meanHostMs: 0, hostFraction: 0, graphFraction: 0 };
  const step = rs.reduce((a, r) => a + r.stepMs, 0);
  const host = rs.reduce((a, r) => a + r.hostMs, 0);
  return { steps: rs.length, meanStepMs: step / rs.length, meanHostMs: host / rs.length, hostFraction: host / step, graphFraction: rs.filter((r) => r.graph).length / rs.length };
}
