/** Sampling settings of one request (vLLM's SamplingParams, the subset this engine implements). */
export interface SamplingParams {
  /** 0 = greedy. */
  readonly temperature: number;
  /** <= 0 = off. */
  readonly topK: number;
  /** 1 = off. */
  readonly topP: number;
  /** Tokens to generate (the only stop condition for now). */
  readonly maxTokens: number;
  /** Seed of the request's draws (with temperature > 0). */
  readonly seed: number;
  /** Keep generating past the model's EOS token (benchmarks); default false. */
  readonly ignoreEos?: boolean;
  /** Further token ids that end the request (the token is kept, as vLLM's stop_token_ids). */
  readonly stopTokenIds?: readonly number[];
  /**
   * Return each sampled token's log-probability and this many most likely alternatives (OpenAI's logprobs /
   * top_logprobs; 0 = the sampled token's only). The steps that sample such a request run eagerly and read the logits
   * back, so it costs time: unset by default.
   */
  readonly logprobs?: number;
}

export const DEFAULT_SAMPLING: SamplingParams = { temperature: 0, topK: 0, topP: 1, maxTokens: 16, seed: 0 };

export type SequenceStatus = 'waiting' | 'running' | 'finished';
export type FinishReason = 'length' | 'eos' | 'stop';

/** A request's token state (nano-vllm's engine/sequence.py): prompt + generated tokens and its cache blocks. */
export class Sequence {
  readonly tokenIds: number[];
  readonly numPromptTokens: number;
  /** Cache block ids, one per blockSize tokens (the block manager fills it). */
  blockTable: number[] = [];
  status: SequenceStatus = 'waiting';
  /** Its row in the recurrent-state pool while running (StateSlotManager), -1 when it holds none. */
  stateSlot = -1;
  /**
   * Tokens whose keys and values are in the cache (chunked prefill advances it chunk by chunk; a decode by one;
   * preemption resets it to 0, so the whole prompt + generated tokens are recomputed on readmission).
   */
  numComputedTokens = 0;
  /** Times the scheduler preempted this sequence. */
  numPreemptions = 0;
  finishReason: FinishReason | null = null;

  constructor(
    /** Position of the request in the caller's list (also keys its sampling seed). */
    readonly seqId: number,
    promptIds: readonly number[],
    readonly params: SamplingParams,
  ) {
    if (promptIds.length === 0) throw new RangeError(`sequence ${seqId}: empty prompt`);
    this.tokenIds = [...promptIds];
    this.numPromptTokens = promptIds.length;
  }

  get numTokens(): number {
    return this.tokenIds.length;
  }
  get numCompletionTokens(): number {
    return this.tokenIds.length - this.numPromptTokens;
  }
  get lastToken(): number {
    return this.tokenIds[this.tokenIds.length - 1]!;
  }
  get completionTokenIds(): number[] {
    return this.tokenIds.slice(this.numPromptTokens);
  }
  get isFinished(): boolean {
    return this.status === 'finished';
  }

  /** Tokens still to run through the model before the next sample (1 for a decode, the rest of the prompt for a prefill). */
  get numUncomputedTokens(): number {
    return this.tokenIds.length - this.numComputedTokens;
  }

  /**
   * Append a sampled token and apply the stop rules: max tokens, the EOS id (unless ignoreEos; eosTokenId < 0 = none)
   * and stop ids. Returns whether the sequence finished.
   */
  appendToken(id: number, eosTokenId: number | readonly number[] = -1): boolean {
    this.tokenIds.push(id);
    if (!this.params.ignoreEos && (typeof eosTokenId === 'number' ? id === eosTokenId : eosTokenId.includes(id))) this.finish('eos');
    else if (this.params.stopTokenIds?.includes(id)) this.finish('stop');
    else if (this.numCompletionTokens >= this.params.maxTokens) this.finish('length');
    return this.status === 'finished';
  }

  private finish(reason: FinishReason): void {
    this.status = 'finished';
    this.finishReason = reason;
  }
}
