import { F, Module, OpScope, Tensor, defineTask, deviceArange, hostArray, type HostArray, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B, randomRouting, type MoeShape } from './shapes.js';

/**
 * vLLM's sizes with pad_sorted_ids: sorted_token_ids holds numel + E * (blockSize - 1) entries rounded up to a whole
 * block (so a consumer finds the block size as P / NB), expert_ids one per block.
 */
export function moeAlignSizes(numel: number, numExperts: number, blockSize: number): { maxPadded: number; numBlocks: number } {
  const numBlocks = Math.ceil((numel + numExperts * (blockSize - 1)) / blockSize);
  return { maxPadded: numBlocks * blockSize, numBlocks };
}

/**
 * vLLM's moe_align_block_size (torch.ops._moe_C.moe_align_block_size): the flattened (token, k) slots of topkIds
 * [T, K] grouped by expert, each expert's run padded to a multiple of blockSize, so the grouped GEMM gives each block of
 * rows one expert. forward(topkIds) -> [sortedTokenIds i32 [P], expertIds i32 [NB], numTokensPostPad i32 [1]] with
 * P = T*K + E*(blockSize - 1) rounded up to a multiple of blockSize (vLLM's pad_sorted_ids), NB = P / blockSize. Padding entries hold T*K (vLLM's fill value). Blocks past
 * numTokensPostPad have expert id -1 (no expert: the grouped GEMM skips them, vLLM's expert_map convention).
 * Within an expert the slots are in ascending order (vLLM's small-batch kernel's order; its large-batch kernel's
 * atomics give any order, which a consumer must not depend on: a canonical order makes the outputs comparable).
 *
 * Written on the registry's ops, with no read of the ids on the host (vLLM's kernel does the same in one launch: a
 * per-expert count, a prefix sum, a scatter): counts by one_hot + sum, block-padded offsets by cumsum, the slots in
 * expert order by a stable sort, each slot's place = its expert's padded start + its rank within the expert, a
 * scatter into the padding-filled ids; a block's expert is the number of experts whose padded run ends at or before it.
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
    const E = this.numExperts;
    const bs = this.blockSize;
    const N = topkIds.numel;
    const { maxPadded: P, numBlocks: NB } = moeAlignSizes(N, E, bs);
    const dev = { device: this.ctx.device };
    const s = new OpScope();
    try {
      const flat = s.op('to', [s.own(topkIds.reshape(N))], { dtype: 'i64' });
      const counts = s.op('sum', [s.op('one_hot', [flat], { num_classes: E })], { dim: 0 }); // [E]
      const padded = s.op('mul', [s.op('div', [s.op('add', [counts, bs - 1]), bs], { rounding_mode: 'floor' }), bs]);
      const paddedEnd = s.op('cumsum', [padded], { dim: 0 });
      const paddedStart = s.op('sub', [paddedEnd, padded]);
      const countStart = s.op('sub', [s.op('cumsum', [counts], { dim: 0 }), counts]);
      // slots in expert order (stable: ascending within an expert), and where each goes
      const [expertOf, order] = F.sort(flat, { stable: true });
      s.own(expertOf!);
      s.own(order!);
      // index constants are built on the device: a host upload would fail a CUDA graph capture of the decode step
      const rank = s.own(deviceArange(this.ctx.backend, N, this.ctx.device));
      const dest = s.op('add', [s.op('index_select', [paddedStart, expertOf!], { dim: 0 }), s.op('sub', [rank, s.op('index_select', [countStart, expertOf!], { dim: 0 })])]);
      const fill = s.op('add', [s.own(Tensor.zeros(this.ctx.backend, [P], 'i64', dev)), N]);
      const sorted = s.op('scatter', [fill, dest, order!], { dim: 0 });
      // expert of each block: experts whose padded run ends at or before the block's start; -1 past the total
      const starts = s.own(s.op('mul', [s.own(deviceArange(this.ctx.backend, NB, this.ctx.device)), bs]).view(NB, 1));
      const before = s.op('sum', [s.op('le', [s.own(paddedEnd.view(1, E)), starts])], { dim: 1 });
      const total = s.own(paddedEnd.narrow(0, E - 1, 1));
      const experts = s.op('where', [s.op('lt', [s.own(starts.view(NB)), total]), before, -1]);
      return s.keep([s.op('to', [sorted], { dtype: 'i32' }), s.op('to', [experts], { dtype: 'i32' }), s.op('to', [total], { dtype: 'i32' })]) as unknown as [Tensor, Tensor, Tensor];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** The alignment in plain loops (see MoeAlign). */
export function moeAlignReference(topkIds: HostArray, blockSize: number, numExperts: number): [HostArray, HostArray, HostArray] {
  const numel = topkIds.data.length;
  const { maxPadded, numBlocks } = moeAlignSizes(numel, numExperts, blockSize);
  const perExpert: number[][] = Array.from({ length: numExperts }, () => []);
  topkIds.data.forEach((e, i) => {
    if (!Number.isInteger(e) || e < 0 || e >= numExperts) throw new RangeError(`moe_align: expert id ${e} at ${i} is outside [0, ${numExperts})`);
    perExpert[e]!.push(i);
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
