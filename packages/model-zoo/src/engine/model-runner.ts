import { Tensor, currentTensorParallelGroup, fmix32, withContext, type ExecutionContext, type Module, type TensorParallelGroup } from '@fastkernels/core';
import { fromInts } from '../common/inputs.js';
import type { Sampler } from '../tasks/L1/sampling/sampler.js';
import type { BlockManager } from './block-manager.js';
import { disposeAttentionMetadata, withForwardContext, type AttentionMetadata } from './forward-context.js';
import type { KvCache } from './kv-cache.js';
import type { Sequence } from './sequence.js';
import type { StateCache } from './state-cache.js';

/** What the runner needs of a model (vLLM's interface of a *ForCausalLM). */
export interface CausalLM extends Module {
  forward(inputIds: Tensor, positions: Tensor): Tensor;
  computeLogits(hiddenStates: Tensor): Tensor;
}

export interface StepResult {
  /** One sampled token per sequence, prefills first, then decodes (the order given). */
  readonly tokens: number[];
  /** Float32 logits per sequence (same order) when asked for. */
  readonly logits?: Float32Array[];
}

/**
 * nano-vllm's ModelRunner: turns scheduled sequences into one step's tensors (input ids, positions,
 * slot mapping, cu_seqlens, block tables, seq lens), runs the model inside the forward context, takes the
 * hidden state of each sequence's last token (vLLM's logits_indices), computes logits and samples through
 * L1/sampler. A step may mix prefills (whole prompts, no cached context yet) and decodes (one token each).
 */
export class ModelRunner {
  private readonly sampler: Sampler;
  /** The tensor-parallel group the model was built in (world 1: none). */
  private readonly tp: TensorParallelGroup = currentTensorParallelGroup();

  constructor(
    readonly model: CausalLM,
    readonly ctx: ExecutionContext,
    readonly kvCache: KvCache,
    readonly blockManager: BlockManager,
    /** The recurrent-state pool (models with recurrent layers): each sequence's stateSlot indexes it. */
    readonly stateCache: StateCache | null = null,
  ) {
    this.sampler = ctx.registry.createIn<Sampler>(ctx, 'L1/sampler');
  }

  /** The step's inputs and attention metadata. */
  prepare(prefills: readonly Sequence[], decodes: readonly Sequence[]): { inputIds: Tensor; positions: Tensor; metadata: AttentionMetadata; logitsIndices: number[] } {
    const ids: number[] = [];
    const pos: number[] = [];
    const slots: number[] = [];
    const cu = [0];
    const logitsIndices: number[] = [];
    let maxQ = 0;
    for (const s of prefills) {
      for (let p = 0; p < s.numTokens; p++) {
        ids.push(s.tokenIds[p]!);
        pos.push(p);
        slots.push(this.blockManager.slot(s, p));
      }
      cu.push(ids.length);
      maxQ = Math.max(maxQ, s.numTokens);
      logitsIndices.push(ids.length - 1);
    }
    const maxBlocks = Math.max(1, ...decodes.map((s) => s.blockTable.length));
    const table = new Array<number>(decodes.length * maxBlocks).fill(0);
    decodes.forEach((s, d) => {
      const p = s.numTokens - 1;
      ids.push(s.lastToken);
      pos.push(p);
      slots.push(this.blockManager.slot(s, p));
      logitsIndices.push(ids.length - 1);
      s.blockTable.forEach((b, j) => (table[d * maxBlocks + j] = b));
    });
    const ctx = this.ctx;
    const T = ids.length;
    const P = prefills.length;
    const metadata: AttentionMetadata = {
      numPrefills: P,
      numPrefillTokens: cu[P]!,
      numDecodes: decodes.length,
      slotMapping: fromInts(ctx, slots, [T], 'i64'),
      cuSeqlensQ: P ? fromInts(ctx, cu, [P + 1], 'i32') : null,
      cuSeqlensK: P ? fromInts(ctx, cu, [P + 1], 'i32') : null,
      maxSeqlenQ: maxQ,
      maxSeqlenK: maxQ,
      blockTables: decodes.length ? fromInts(ctx, table, [decodes.length, maxBlocks], 'i32') : null,
      seqLens: decodes.length ? fromInts(ctx, decodes.map((s) => s.numTokens), [decodes.length], 'i32') : null,
      ...(this.stateCache ? { stateIndices: fromInts(ctx, [...prefills, ...decodes].map((s) => s.stateSlot), [P + decodes.length], 'i32') } : {}),
    };
    return { inputIds: fromInts(ctx, ids, [T], 'i64'), positions: fromInts(ctx, pos, [T], 'i64'), metadata, logitsIndices };
  }

  /** Run one step and sample one token per sequence. */
  run(prefills: readonly Sequence[], decodes: readonly Sequence[], options: { collectLogits?: boolean } = {}): StepResult {
    const seqs = [...prefills, ...decodes];
    const { inputIds, positions, metadata, logitsIndices } = this.prepare(prefills, decodes);
    const ctx = this.ctx;
    // a prefill here is a whole prompt: its sequence starts from a zero state
    if (prefills.length) this.stateCache?.reset(prefills.map((s) => s.stateSlot));
    try {
      return withContext(ctx, () => {
        const fc = { attnMetadata: metadata, kvCaches: this.kvCache.layers, ...(this.stateCache ? { stateCaches: this.stateCache.layers } : {}) };
        const hidden = withForwardContext(fc, () => this.model.forward(inputIds, positions));
        // hidden[logitsIndices]: a row gather (the embedding op gathers rows of any [N, H] table).
        const idx = fromInts(ctx, logitsIndices, [logitsIndices.length], 'i64');
        const last = ctx.backend.ops.embedding(idx, hidden);
        idx.dispose();
        hidden.dispose();
        const logitsAct = this.model.computeLogits(last);
        last.dispose();
        const logits = logitsAct.dtype === 'f32' ? logitsAct : logitsAct.to('f32');
        if (logits !== logitsAct) logitsAct.dispose();
        const B = seqs.length;
        const temperature = fromInts(ctx, seqs.map((s) => s.params.temperature), [B], 'f32');
        const topK = fromInts(ctx, seqs.map((s) => s.params.topK), [B], 'i32');
        const topP = fromInts(ctx, seqs.map((s) => s.params.topP), [B], 'f32');
        const seeds = fromInts(ctx, seqs.map((s) => stepSeed(s)), [B], 'i64');
        // how many rows draw, known here on the host (vLLM's SamplingMetadata all_greedy): picks the sampler's path
        const sampledRows = seqs.filter((s) => s.params.temperature > 0).length;
        const tokens = this.sampler.forward(logits, temperature, topK, topP, seeds, { sampledRows });
        // Every rank samples the same token from the same (all-gathered) logits. Wait for the step's collectives
        // with the communicator's deadline before the host read, so a dead peer is an error, not a hang.
        this.tp.synchronize();
        const out: StepResult = { tokens: [...tokens.toFloat64Array()] };
        if (options.collectLogits) {
          const all = logits.toFloat64Array();
          const V = logits.shape[1]!;
          (out as { logits?: Float32Array[] }).logits = seqs.map((_, b) => Float32Array.from(all.subarray(b * V, (b + 1) * V)));
        }
        for (const t of [logits, temperature, topK, topP, seeds, tokens]) t.dispose();
        return out;
      });
    } finally {
      inputIds.dispose();
      positions.dispose();
      disposeAttentionMetadata(metadata);
    }
  }

  dispose(): void {
    this.sampler.dispose();
  }
}

/**
 * The seed of a sequence's next draw: a hash of the request seed, the sequence and how many tokens it has
 * generated, so a request's draws do not depend on which other requests share its batch's seeds.
 */
export function stepSeed(s: Sequence): number {
  let h = fmix32((s.params.seed >>> 0) ^ 0x5bd1e995);
  h = fmix32((h ^ Math.floor(s.params.seed / 4294967296)) >>> 0);
  h = fmix32((h ^ s.seqId) >>> 0);
  h = fmix32((h ^ s.numCompletionTokens) >>> 0);
  return h;
}
