import { KV_BLOCK_SIZE } from '../tasks/L1/kvcache/store_kvcache.js';
import type { Sequence } from './sequence.js';

/**
 * Paged KV-cache block allocator (nano-vllm's engine/block_manager.py without the prefix cache): a free
 * list of block ids; a sequence holds ceil(numTokens / blockSize) blocks in its block table. The scheduler
 * asks canAllocate / canAppend before admitting or extending a sequence (preemption comes with it).
 */
export class BlockManager {
  private readonly free: number[];
  private readonly used = new Set<number>();

  constructor(
    readonly numBlocks: number,
    readonly blockSize: number = KV_BLOCK_SIZE,
  ) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new RangeError(`BlockManager: numBlocks must be a positive integer, got ${numBlocks}`);
    // Pop from the end: lowest ids first.
    this.free = Array.from({ length: numBlocks }, (_, i) => numBlocks - 1 - i);
  }

  get numFreeBlocks(): number {
    return this.free.length;
  }

  blocksFor(numTokens: number): number {
    return Math.ceil(numTokens / this.blockSize);
  }

  canAllocate(seq: Sequence): boolean {
    return this.free.length >= this.blocksFor(seq.numTokens);
  }

  /** Blocks for every token the sequence has (its prompt, at admission). */
  allocate(seq: Sequence): void {
    if (seq.blockTable.length) throw new Error(`sequence ${seq.seqId} already holds blocks`);
    const need = this.blocksFor(seq.numTokens);
    if (need > this.free.length) throw new Error(`BlockManager: sequence ${seq.seqId} needs ${need} blocks, ${this.free.length} free`);
    for (let i = 0; i < need; i++) seq.blockTable.push(this.take());
  }

  /** Whether the sequence's newest token has a slot (or a free block can give it one). */
  canAppend(seq: Sequence): boolean {
    return seq.blockTable.length * this.blockSize >= seq.numTokens || this.free.length > 0;
  }

  /** Give the newest token a slot: a new block when it starts one. */
  mayAppend(seq: Sequence): void {
    while (seq.blockTable.length * this.blockSize < seq.numTokens) {
      if (!this.free.length) throw new Error(`BlockManager: no free block for sequence ${seq.seqId}`);
      seq.blockTable.push(this.take());
    }
  }

  /** Blocks the sequence still needs so its table covers numTokens tokens. */
  blocksNeeded(seq: Sequence, numTokens: number): number {
    return Math.max(0, this.blocksFor(numTokens) - seq.blockTable.length);
  }

  /** Whether the table can grow to cover numTokens tokens. */
  canEnsure(seq: Sequence, numTokens: number): boolean {
    return this.blocksNeeded(seq, numTokens) <= this.free.length;
  }

  /** Grow the sequence's table to cover numTokens tokens (chunked prefill: one chunk at a time). */
  ensure(seq: Sequence, numTokens: number): void {
    const need = this.blocksNeeded(seq, numTokens);
    if (need > this.free.length) throw new Error(`BlockManager: sequence ${seq.seqId} needs ${need} more blocks, ${this.free.length} free`);
    for (let i = 0; i < need; i++) seq.blockTable.push(this.take());
  }

  get numUsedBlocks(): number {
    return this.used.size;
  }

  deallocate(seq: Sequence): void {
    for (let i = seq.blockTable.length - 1; i >= 0; i--) {
      const b = seq.blockTable[i]!;
      this.used.delete(b);
      this.free.push(b);
    }
    seq.blockTable = [];
  }

  /** Cache slot of a token position of a sequence. */
  slot(seq: Sequence, pos: number): number {
    const block = seq.blockTable[Math.floor(pos / this.blockSize)];
    if (block === undefined) throw new Error(`sequence ${seq.seqId}: position ${pos} has no block (table of ${seq.blockTable.length})`);
    return block * this.blockSize + (pos % this.blockSize);
  }

  private take(): number {
    const b = this.free.pop()!;
    this.used.add(b);
    return b;
  }
}
