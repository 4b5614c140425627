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
}

export const DEFAULT_SAMPLING: SamplingParams = { temperature: 0, topK: 0, topP: 1, maxTokens: 16, seed: 0 };

export type SequenceStatus = 'waiting' | 'running' | 'finished';

/** A request's token state (nano-vllm's engine/sequence.py): prompt + generated tokens and its cache blocks. */
export class Sequence {
  readonly tokenIds: number[];
  readonly numPromptTokens: number;
  /** Cache block ids, one per blockSize tokens (the block manager fills it). */
  blockTable: number[] = [];
  status: SequenceStatus = 'waiting';

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

  appendToken(id: number): void {
    this.tokenIds.push(id);
    if (this.numCompletionTokens >= this.params.maxTokens) this.status = 'finished';
  }
}
