import { F, Module, defineTask, hostArray, moeAlignSizes, type HostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { fromInts } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B, randomRouting, type MoeShape } from './shapes.js';

/** vLLM's sizes with pad_sorted_ids (core's moe_align op infers its outputs with them). */
export { moeAlignSizes };

/**
 * vLLM's moe_align_block_size (torch.ops._moe_C.moe_align_block_size): the flattened (token, k) slots of topkIds
 * [T, K] grouped by expert, each expert's run padded to a multiple of blockSize, so the grouped GEMM gives each block of
 * rows one expert. forward(topkIds) -> [sortedTokenIds i32 [P], expertIds i32 [NB], numTokensPostPad i32 [1]] with
 * P = T*K + E*(blockSize - 1) rounded up to a multiple of blockSize (vLLM's pad_sorted_ids), NB = P / blockSize. Padding entries hold T*K (vLLM's fill value). Blocks past
 * numTokensPostPad have expert id -1 (no expert: the grouped GEMM skips them, vLLM's expert_map convention).
 * Within an expert the slots are in ascending order (vLLM's small-batch kernel's order; its large-batch kernel's
 * atomics give any order, which a consumer must not depend on: a canonical order makes the outputs comparable).
 *
 * One registry op, moe_align: on CUDA one launch of one CTA (kernels/moe_align.cu: counts, offsets, a stable scatter,
 * as vLLM's kernel), elsewhere its decomposition (one_hot counts, cumsum offsets, a stable sort, a scatter), with no
 * read of the ids on the host either way.
 */
export class MoeAlign extends Module {
  constructor(
    readonly blockSize: number,
    readonly numExperts: number,
  ) {
    super();
    if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`MoeAlign: blockSize must be a positive integer, got ${blockSize}`);
  }

  forward(topkIds: Tensor): [Tensor, Tensor, Tensor] {
    return F.moeAlign(topkIds, { block_size: this.blockSize, num_experts: this.numExperts });
  }
}

/** The alignment in plain loops (see MoeAlign). */
export function moeAlignReference(topkIds: HostArray, blockSize: number, numExperts: number): [HostArray, HostArray, HostArray] {
  const numel = topkIds.data.length;
  const { maxPadded, numBlocks } = moeAlignSizes(numel, numExperts, blockSize);
  const perExpert: number[][] = Array.from({ length: numExperts }, () => []);
  topkIds.data.forEach((e, i) => {
    if (!Number.isInteger(e)) throw new RangeError(`moe_align: expert id ${e} at ${i} is not an integer`);
    if (e >= 0 && e < numExperts) perExpert[e]!.push(i); // others (-1: another rank's expert) are in no block
  });
  const sorted = hostArray([maxPadded]);
  sorted.data.fill(numel);
  const experts = hostArray([numBlocks]);
  experts.data.fill(-1);
  let at = 0;
  perExpert.forEach((slots, e) => {
    const padded = Math.ceil(slots.length / blockSize) * blockSize;
    slots.forEach((s, j) => (sorted.data[at + j] = s));
    for (let b = at / blockSize; b < (at + padded) / blockSize; b++) experts.data[b] = e;
    at += padded;
  });
  const post = hostArray([1]);
  post.data[0] = at;
  return [sorted, experts, post];
}

function alignCase(name: string, T: number, K: number, E: number, blockSize: number, dtype: 'f32' | 'bf16' = 'bf16'): TaskCase {
  const { maxPadded, numBlocks } = moeAlignSizes(T * K, E, blockSize);
  return { name, dtype, dims: { T, K, P: maxPadded, NB: numBlocks }, init: [blockSize, E], options: {}, count: 1 };
}
// vLLM's tuned block_size_m: 16 for small batches, 64 for large ones.
const prod = (m: MoeShape, T: number) => alignCase(`${m.name}-T${T}`, T, m.topK, m.numExperts, T <= 64 ? 16 : 64);

export const moeAlignTask = defineTask(
  {
    id: 'L1/moe_align',
    level: 1,
    className: 'MoeAlign',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'gemma4', 'glm', 'jamba', 'kimi_linear', 'mixtral', 'qwen3_moe', 'qwen3_next', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.fused_moe.moe_align_block_size.moe_align_block_size',
    description: 'Sort the (token, k) slots by expert and pad each expert to the GEMM block size: sorted ids, one expert per block, the padded count.',
    init: [
      { name: 'blockSize', type: 'int' },
      { name: 'numExperts', type: 'int' },
    ],
    inputs: [{ name: 'topkIds', dtype: 'i32', shape: ['T', 'K'], doc: 'expert ids per token (data-dependent: captured from real runs)' }],
    outputs: [
      { name: 'sortedTokenIds', dtype: 'i32', shape: ['P'] },
      { name: 'expertIds', dtype: 'i32', shape: ['NB'] },
      { name: 'numTokensPostPad', dtype: 'i32', shape: [1] },
    ],
    cases: {
      ci: [
        alignCase('top2-of-8-block4', 13, 2, 8, 4, 'f32'),
        alignCase('top8-of-64-block16', 9, 8, 64, 16, 'f32'),
        alignCase('decode-1-block16', 1, 2, 8, 16, 'bf16'),
      ],
      production: [...MOE_TOKENS.map((T) => prod(MIXTRAL_8X7B, T)), ...MOE_TOKENS.map((T) => prod(QWEN3_30B_A3B, T))],
    },
  },
  {
    baseline: MoeAlign,
    makeInputs: (c, ctx, rng) => [fromInts(ctx, randomRouting(rng, c.dims.T!, c.init[1] as number, c.dims.K!), [c.dims.T!, c.dims.K!], 'i32')],
    reference: ([ids], _p, c) => moeAlignReference(ids!, c.init[0] as number, c.init[1] as number),
    work: (c) => {
      const { T, K, P, NB } = c.dims as { T: number; K: number; P: number; NB: number };
      return { bytes: 4 * (T * K + P + NB + 1), flops: T * K };
    },
  },
);
