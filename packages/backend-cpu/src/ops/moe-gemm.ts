/**
 * fused_moe_gemm in float64: vLLM's fused_moe_kernel over moe_align's block-padded slots (core's spec says the
 * contract). Each processed entry's row is one dot product per output column, scaled by its routed weight when asked,
 * rounded once to the input's dtype; slots no processed entry names stay zero.
 */
import type { Backend, FusedMoeGemmAttrs, Tensor } from '@fastkernels/core';
import { gather, gatherInts, output } from '../strided.js';

export function fusedMoeGemm(
  backend: Backend,
  input: Tensor,
  weight: Tensor,
  topkWeights: Tensor | null,
  sortedTokenIds: Tensor,
  expertIds: Tensor,
  numTokensPostPadded: Tensor,
  attrs: FusedMoeGemmAttrs,
): Tensor {
  const what = 'fused_moe_gemm';
  const [M, K] = input.shape as [number, number];
  const [E, N] = weight.shape as [number, number, number];
  const topK = attrs.top_k;
  const slots = M * topK;
  const X = gather(input, what);
  const W = gather(weight, what);
  const scale = attrs.mul_routed_weight ? gather(topkWeights!, what) : null;
  const ids = gatherInts(sortedTokenIds, `${what} sorted_token_ids`);
  const experts = gatherInts(expertIds, `${what} expert_ids`);
  const post = gatherInts(numTokensPostPadded, `${what} num_tokens_post_padded`)[0]!;
  const P = ids.length;
  const bs = experts.length === 0 ? 0 : P / experts.length;
  const Y = new Float64Array(slots * N);
  for (let b = 0; b < experts.length; b++) {
    if (b * bs >= post) continue; // past the padded count: vLLM's kernel returns before reading the block
    const e = experts[b]!;
    const live = e >= 0 && e < E; // -1 (a non-local expert): zero rows, as vLLM writes
    for (let i = b * bs; i < (b + 1) * bs; i++) {
      const s = ids[i]!;
      if (s < 0 || s >= slots) continue; // padding
      const x0 = Math.floor(s / topK) * K;
      const f = scale ? scale[s]! : 1;
      for (let n = 0; n < N; n++) {
        let acc = 0;
        if (live) {
          const w0 = (e * N + n) * K;
          for (let k = 0; k < K; k++) acc += X[x0 + k]! * W[w0 + k]!;
        }
        Y[s * N + n] = acc * f;
      }
    }
  }
  return output(backend, [M, topK, N], input.dtype, Y, what);
}

/**
 * moe_align (vLLM's moe_align_block_size) in loops: the flattened slots of topk_ids grouped by expert in ascending slot
 * order, each expert's run padded to whole blocks of `blockSize` with the slot count n; ids outside [0, E) join no
 * block; a block's expert, -1 at or past the padded total; the padded total. P and NB come from core's moeAlignSizes.
 */
export function moeAlign(backend: Backend, topkIds: Tensor, blockSize: number, numExperts: number, P: number, NB: number): [Tensor, Tensor, Tensor] {
  const what = 'moe_align';
  const ids = gatherInts(topkIds, what);
  const n = ids.length;
  const slotsOf: number[][] = Array.from({ length: numExperts }, () => []);
  ids.forEach((e, s) => {
    if (e >= 0 && e < numExperts) slotsOf[e]!.push(s);
  });
  const sorted = new Float64Array(P).fill(n);
  const experts = new Float64Array(NB).fill(-1);
  let at = 0;
  slotsOf.forEach((slots, e) => {
    slots.forEach((s, j) => (sorted[at + j] = s));
    const padded = Math.ceil(slots.length / blockSize) * blockSize;
    for (let b = at / blockSize; b < (at + padded) / blockSize; b++) experts[b] = e;
    at += padded;
  });
  return [output(backend, [P], 'i32', sorted, what), output(backend, [NB], 'i32', experts, what), output(backend, [1], 'i32', Float64Array.of(at), what)];
}
