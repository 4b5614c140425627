import { UserError } from '@fastkernels/core';
import { kvBlockBytes, type KvCacheSpec } from './kv-cache.js';

/** The device memory plan printed at engine start (vLLM's "KV cache memory" line, itemised). */
export interface MemoryBudget {
  readonly totalBytes: number;
  readonly utilization: number;
  readonly weightsBytes: number;
  /** Activation peak of the profile forward (maxNumBatchedTokens tokens). */
  readonly activationPeakBytes: number;
  /** Whether the peak was measured (device allocator stats) or estimated from the geometry. */
  readonly activationMeasured: boolean;
  readonly graphPoolBytes: number;
  /** Persistent step buffers, sampler and other runner state. */
  readonly runnerBytes: number;
  readonly kvBlockBytes: number;
  readonly numKvBlocks: number;
  readonly kvBytes: number;
  /** Bytes of one sequence's recurrent states over all recurrent layers (0: no recurrent layers). */
  readonly stateSlotBytes: number;
  /** Slots of the state pool: sequences that can run at once (max-num-seqs unless memory allows fewer). */
  readonly numStateSlots: number;
  readonly stateBytes: number;
  /**
   * What limited the block count: the memory left, the cap (requests can use no more), an explicit --num-kv-blocks, or
   * (tensor parallelism) another rank, which had room for fewer blocks: every rank uses the smallest count.
   */
  readonly limitedBy: 'memory' | 'cap' | 'explicit' | 'ranks';
}

const GiB = 1024 ** 3;
const fmt = (b: number) => (b >= GiB ? `${(b / GiB).toFixed(2)} GiB` : `${(b / 1024 ** 2).toFixed(1)} MiB`);

/**
 * KV blocks = (total × utilization − weights − activation peak − graph pool − runner buffers − state pool) ÷ block
 * bytes, capped at what maxNumSeqs sequences of maxModelLen tokens can use. Throws a UserError naming the numbers
 * when not even one maximum-length sequence fits. Models with recurrent layers first take a state slot for each of
 * maxNumSeqs sequences (fewer when memory is short — the engine then runs fewer sequences at once — but never so many
 * that one maximum-length sequence's KV blocks no longer fit); a model without
 * attention layers has blocks of 0 bytes (they only track token positions) and gets the cap.
 */
export function planKvCache(args: {
  totalBytes: number;
  utilization: number;
  weightsBytes: number;
  activationPeakBytes: number;
  activationMeasured: boolean;
  graphPoolBytes: number;
  runnerBytes: number;
  spec: KvCacheSpec;
  maxModelLen: number;
  maxNumSeqs: number;
  explicitBlocks?: number;
  /** Bytes of one sequence's recurrent states (stateSlotBytes of cache-spec.ts); 0 or absent: none. */
  stateSlotBytes?: number;
}): MemoryBudget {
  const blockBytes = kvBlockBytes(args.spec);
  const perSeq = Math.ceil(args.maxModelLen / args.spec.blockSize);
  const cap = perSeq * args.maxNumSeqs;
  let avail = args.totalBytes * args.utilization - args.weightsBytes - args.activationPeakBytes - args.graphPoolBytes - args.runnerBytes;
  const slotBytes = args.stateSlotBytes ?? 0;
  let numStateSlots = 0;
  if (slotBytes > 0) {
    // what is left must still hold one maximum-length sequence's KV blocks (hybrid stacks)
    const kvFloor = (args.explicitBlocks ?? perSeq) * blockBytes;
    numStateSlots = Math.min(args.maxNumSeqs, Math.floor(Math.max(0, avail - kvFloor) / slotBytes));
    if (numStateSlots < 1) {
      throw new UserError(
        `the model does not fit: ${fmt(args.totalBytes)} × ${args.utilization} leaves ${fmt(Math.max(0, avail))} after weights ${fmt(args.weightsBytes)}, activations ${fmt(args.activationPeakBytes)} and CUDA graphs ${fmt(args.graphPoolBytes)}; one sequence's recurrent state needs ${fmt(slotBytes)}`,
        { field: '--gpu-memory-utilization', fix: 'raise --gpu-memory-utilization, lower --max-num-batched-tokens, or use a smaller model' },
      );
    }
    avail -= numStateSlots * slotBytes;
  }
  let numKvBlocks: number;
  let limitedBy: MemoryBudget['limitedBy'];
  if (args.explicitBlocks !== undefined) {
    numKvBlocks = args.explicitBlocks;
    limitedBy = 'explicit';
  } else if (blockBytes === 0) {
    numKvBlocks = cap;
    limitedBy = 'cap';
  } else {
    const fit = Math.floor(Math.max(0, avail) / blockBytes);
    numKvBlocks = Math.min(fit, cap);
    limitedBy = fit > cap ? 'cap' : 'memory';
  }
  if (numKvBlocks < perSeq) {
    throw new UserError(
      `the model does not fit: ${fmt(args.totalBytes)} × ${args.utilization} = ${fmt(args.totalBytes * args.utilization)} leaves ${fmt(Math.max(0, avail))} for the KV cache after weights ${fmt(args.weightsBytes)}, ` +
        `activations ${fmt(args.activationPeakBytes)} and CUDA graphs ${fmt(args.graphPoolBytes)}; one ${args.maxModelLen}-token sequence needs ${perSeq} blocks of ${fmt(blockBytes)} (${fmt(perSeq * blockBytes)}), ${numKvBlocks} fit`,
      { field: '--gpu-memory-utilization', fix: 'raise --gpu-memory-utilization, lower --max-model-len or --max-num-batched-tokens, or use a smaller model' },
    );
  }
  return {
    totalBytes: args.totalBytes, utilization: args.utilization, weightsBytes: args.weightsBytes,
    activationPeakBytes: args.activationPeakBytes, activationMeasured: args.activationMeasured, graphPoolBytes: args.graphPoolBytes,
    runnerBytes: args.runnerBytes, kvBlockBytes: blockBytes, numKvBlocks, kvBytes: numKvBlocks * blockBytes, limitedBy,
    stateSlotBytes: slotBytes, numStateSlots, stateBytes: numStateSlots * slotBytes,
  };
}

export function formatBudget(b: MemoryBudget, blockSize: number): string {
  const limit = b.limitedBy === 'cap' ? ' (capped: max-num-seqs × max-model-len)' : b.limitedBy === 'explicit' ? ' (--num-kv-blocks)' : b.limitedBy === 'ranks' ? ' (the smallest count over the tensor-parallel ranks)' : '';
  return [
    `memory budget: ${fmt(b.totalBytes)} × ${b.utilization} = ${fmt(b.totalBytes * b.utilization)}`,
    `  weights ${fmt(b.weightsBytes)}, activation peak ${fmt(b.activationPeakBytes)} (${b.activationMeasured ? 'measured' : 'estimated'}), CUDA graphs ${fmt(b.graphPoolBytes)}, step buffers ${fmt(b.runnerBytes)}`,
    ...(b.numStateSlots ? [`  recurrent state ${fmt(b.stateBytes)}: ${b.numStateSlots} slots × ${fmt(b.stateSlotBytes)} (one per running sequence)`] : []),
    b.numStateSlots && b.kvBlockBytes === 0
      ? '  KV cache: none (no attention layers)'
      : `  KV cache ${fmt(b.kvBytes)}: ${b.numKvBlocks} blocks × ${blockSize} tokens (${fmt(b.kvBlockBytes)} each) = ${b.numKvBlocks * blockSize} tokens${limit}`,
  ].join('\n');
}

/** The plan with fewer blocks (another tensor-parallel rank had room for only `numKvBlocks`). */
export function withKvBlocks(b: MemoryBudget, numKvBlocks: number): MemoryBudget {
  if (numKvBlocks >= b.numKvBlocks) return b;
  return { ...b, numKvBlocks, kvBytes: numKvBlocks * b.kvBlockBytes, limitedBy: 'ranks' };
}

/**
 * The graph pool's sizing for the capture log line, when the estimate was short (each failed capture doubled the
 * pool) or the runtime reports the most one capture used: '' otherwise.
 */
export function formatGraphPool(p: { estimateBytes: number; attempts: number; peakBytes?: number } | null): string {
  if (!p || (p.attempts === 1 && p.peakBytes === undefined)) return '';
  const peak = p.peakBytes !== undefined ? `, one capture used at most ${fmt(p.peakBytes)}` : '';
  return `; graph pool estimate ${fmt(p.estimateBytes)}${p.attempts > 1 ? ` was short (${p.attempts} attempts)` : ''}${peak}`;
}
