import type { BlockManager } from './block-manager.js';
import type { Sequence } from './sequence.js';
import type { StateSlotManager } from './state-slots.js';

/** Scheduler limits (vLLM's SchedulerConfig / nano-vllm's Config, the subset this engine uses). */
export interface SchedulerConfig {
  /** Tokens run through the model in one step, prefill chunks and decodes together. */
  readonly maxNumBatchedTokens: number;
  /** Sequences in one step (and running at once). */
  readonly maxNumSeqs: number;
  /** Split a prompt over several steps when it does not fit the step's token budget (default true). */
  readonly chunkedPrefill?: boolean;
}

/** A prefill chunk of one sequence: tokens [start, start + numTokens) of its token ids. */
export interface PrefillChunk {
  readonly seq: Sequence;
  readonly start: number;
  readonly numTokens: number;
  /** The chunk ends the sequence's uncomputed tokens: the step samples its next token. */
  readonly samples: boolean;
}

/** One step: prefill chunks first, then one token per decoding sequence (the forward context's layout). */
export interface ScheduledBatch {
  readonly prefills: readonly PrefillChunk[];
  readonly decodes: readonly Sequence[];
  readonly numTokens: number;
  /** Sequences preempted while scheduling this step (their blocks were freed; they wait for recompute). */
  readonly preempted: readonly Sequence[];
}

/**
 * Continuous batching with chunked prefill and recompute preemption (vLLM V1's unified scheduler over
 * nano-vllm's structures: a waiting deque and a running list).
 *
 * Each step has a budget of maxNumBatchedTokens tokens and maxNumSeqs sequences:
 * 1. Running sequences first, oldest first: a decode takes 1 token; a sequence still in its prompt takes the
 *    next chunk (as much of the budget as is left). Each needs cache blocks for its new tokens; when the free
 *    list runs dry the newest running sequence is preempted (blocks freed, tokens kept, moved to the front of
 *    the waiting queue to be recomputed from position 0), and so on until the sequence fits or is itself
 *    the newest (then it is preempted).
 * 2. Then, unless something was preempted this step, waiting sequences are admitted in order while the
 *    budget, the sequence cap and the free blocks allow; the last one admitted may get only a chunk of its
 *    prompt (chunkedPrefill) — the rest follows in later steps as a running prefill.
 * A step may mix prefill chunks and decodes. A chunk that reaches the end of the sequence's tokens samples.
 * Models with recurrent layers also give each running sequence a state slot (admission waits for one; finishing,
 * preemption and removal return it), so a chunked prefill carries its state from chunk to chunk in its slot.
 */
export class Scheduler {
  readonly waiting: Sequence[] = [];
  readonly running: Sequence[] = [];
  private readonly chunked: boolean;

  constructor(
    readonly config: SchedulerConfig,
    readonly blockManager: BlockManager,
    /** The recurrent-state slots, for models with recurrent layers. */
    readonly stateSlots: StateSlotManager | null = null,
  ) {
    if (!(config.maxNumBatchedTokens >= 1) || !(config.maxNumSeqs >= 1)) throw new RangeError('Scheduler: maxNumBatchedTokens and maxNumSeqs must be >= 1');
    this.chunked = config.chunkedPrefill ?? true;
  }

  add(seq: Sequence): void {
    const blocks = this.blockManager.blocksFor(seq.numPromptTokens + seq.params.maxTokens);
    if (blocks > this.blockManager.numBlocks) {
      throw new RangeError(`sequence ${seq.seqId} needs ${blocks} cache blocks at its longest, the cache has ${this.blockManager.numBlocks}`);
    }
    if (!this.chunked && seq.numTokens > this.config.maxNumBatchedTokens) {
      throw new RangeError(`sequence ${seq.seqId}: ${seq.numTokens} prompt tokens exceed maxNumBatchedTokens ${this.config.maxNumBatchedTokens} without chunked prefill`);
    }
    seq.status = 'waiting';
    this.waiting.push(seq);
  }

  get hasUnfinished(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  schedule(): ScheduledBatch {
    const bm = this.blockManager;
    let budget = this.config.maxNumBatchedTokens;
    const prefills: PrefillChunk[] = [];
    const decodes: Sequence[] = [];
    const preempted: Sequence[] = [];
    const scheduled = new Set<Sequence>();

    // 1. running sequences, oldest first
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const seq = this.running[i]!;
      const n = Math.min(seq.numUncomputedTokens, budget);
      if (n <= 0) continue;
      let fits = true;
      while (!bm.canEnsure(seq, seq.numComputedTokens + n)) {
        const victim = this.running[this.running.length - 1]!;
        if (scheduled.has(victim)) throw new Error('Scheduler: a scheduled sequence was chosen for preemption (the newest is never scheduled before the current one)');
        this.preempt(victim);
        preempted.push(victim);
        if (victim === seq) {
          fits = false;
          break;
        }
      }
      if (!fits) break;
      bm.ensure(seq, seq.numComputedTokens + n);
      scheduled.add(seq);
      budget -= n;
      if (seq.numUncomputedTokens === 1) decodes.push(seq);
      else prefills.push({ seq, start: seq.numComputedTokens, numTokens: n, samples: n === seq.numUncomputedTokens });
    }

    // 2. admissions
    if (!preempted.length) {
      while (this.waiting.length && budget > 0 && this.running.length < this.config.maxNumSeqs) {
        const seq = this.waiting[0]!;
        const rest = seq.numUncomputedTokens;
        const n = Math.min(rest, budget);
        if (n < rest && !this.chunked) break;
        if (!bm.canEnsure(seq, seq.numComputedTokens + n)) break;
        if (this.stateSlots && !this.stateSlots.numFreeSlots) break;
        bm.ensure(seq, seq.numComputedTokens + n);
        this.stateSlots?.allocate(seq);
        this.waiting.shift();
        seq.status = 'running';
        this.running.push(seq);
        scheduled.add(seq);
        budget -= n;
        if (rest === 1) decodes.push(seq);
        else prefills.push({ seq, start: seq.numComputedTokens, numTokens: n, samples: n === rest });
      }
    }
    return { prefills, decodes, numTokens: this.config.maxNumBatchedTokens - budget, preempted };
  }

  /**
   * After the step ran: advance each scheduled sequence's computed tokens, append the sampled tokens (one per
   * sampling sequence, in the batch's order: sampling prefills, then decodes), finish and free what stopped.
   * Returns the sequences that finished.
   */
  postprocess(batch: ScheduledBatch, tokens: ArrayLike<number>, eosTokenId: number | readonly number[] = -1): Sequence[] {
    const finished: Sequence[] = [];
    let t = 0;
    const sampled = (seq: Sequence) => {
      if (seq.appendToken(tokens[t++]!, eosTokenId)) {
        this.release(seq);
        finished.push(seq);
      }
    };
    for (const p of batch.prefills) {
      p.seq.numComputedTokens += p.numTokens;
      if (p.samples) sampled(p.seq);
    }
    for (const seq of batch.decodes) {
      seq.numComputedTokens += 1;
      sampled(seq);
    }
    if (t !== tokens.length) throw new Error(`Scheduler.postprocess: ${tokens.length} sampled tokens for ${t} sampling sequences`);
    if (finished.length) {
      const done = new Set(finished);
      for (let i = this.running.length - 1; i >= 0; i--) if (done.has(this.running[i]!)) this.running.splice(i, 1);
    }
    return finished;
  }

  /** Give back a sequence's cache blocks and state slot. */
  private release(seq: Sequence): void {
    this.blockManager.deallocate(seq);
    this.stateSlots?.deallocate(seq);
  }

  /** Free a running sequence's blocks (and state slot) and queue it for recompute (front of the waiting queue). */
  private preempt(seq: Sequence): void {
    const i = this.running.lastIndexOf(seq);
    if (i >= 0) this.running.splice(i, 1);
    this.release(seq);
    seq.numComputedTokens = 0;
    seq.numPreemptions++;
    seq.status = 'waiting';
    this.waiting.unshift(seq);
  }

  /** Drop one sequence wherever it is (a cancelled request): free its blocks. Returns whether it was queued. */
  remove(seq: Sequence): boolean {
    for (const q of [this.waiting, this.running]) {
      const i = q.indexOf(seq);
      if (i >= 0) {
        q.splice(i, 1);
        this.release(seq);
        seq.status = 'finished';
        return true;
      }
    }
    return false;
  }

  /** Drop every sequence (after an error): free their blocks. */
  abortAll(): Sequence[] {
    const all = [...this.running, ...this.waiting];
    for (const s of all) {
      this.release(s);
      s.status = 'finished';
    }
    this.running.length = 0;
    this.waiting.length = 0;
    return all;
  }
}

/** Sequences of a batch that sample a token this step, in the order of the sampled tokens. */
export function samplingSequences(batch: ScheduledBatch): Sequence[] {
  const out: Sequence[] = [];
  for (const p of batch.prefills) if (p.samples) out.push(p.seq);
  for (const s of batch.decodes) out.push(s);
  return out;
}
