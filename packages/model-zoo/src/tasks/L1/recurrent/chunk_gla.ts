import { F, Module, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { GLA_2_7B_HEADS, GLA_OUTPUTS, caseScale, glaForward, withSequenceDims, glaRecurrenceReference, glaWork, makeGlaInputs } from './gla-common.js';

/**
 * FLA's chunk_gla (fla.ops.gla.chunk_gla) as a module: gated linear attention over a prefill, computed chunk by chunk
 * (inter-chunk through the state, intra-chunk as a masked attention). The same function as the recurrence, so its
 * reference is the recurrence. forward(q, k, v, g, initial_state?) -> [o, final_state]: the final state is always
 * returned (production calls it with output_final_state = use_cache, and serving caches). scale and chunk_size are
 * constructor arguments here (FLA takes scale per call; its chunk is 64).
 */
export class ChunkGLA extends Module {
  constructor(
    readonly scale: number | null = null,
    readonly chunkSize = 64,
  ) {
    super();
    if (!Number.isInteger(chunkSize) || chunkSize < 1) throw new RangeError(`ChunkGLA: chunk_size must be a positive integer, got ${chunkSize}`);
  }

  /** cuSeqlens / ssmStateIndices: the engine's varlen prefill over a state pool, as FusedRecurrentGLA.forward. */
  forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, initialState: Tensor | null = null, cuSeqlens: Tensor | null = null, ssmStateIndices: Tensor | null = null): Tensor[] {
    return F.chunkGla(q, k, v, g, { scale: this.scale, initial_state: initialState, output_final_state: !ssmStateIndices, chunk_size: this.chunkSize, cu_seqlens: cuSeqlens, ssm_state_indices: ssmStateIndices });
  }
}

const { H, K, V } = GLA_2_7B_HEADS;

export const chunkGlaTask = defineL1OpTask('chunk_gla', {
  id: 'L1/chunk_gla',
  className: 'ChunkGLA',
  mirrors: 'fla.ops.gla.chunk_gla',
  description: 'Chunked gated linear attention (prefill): per-key-channel decayed state, chunks of chunk_size, initial and final state [B, H, K, V] f32.',
  architectures: ['gla', 'retnet'],
  baseline: ChunkGLA,
  init: [
    { name: 'scale', type: 'float', optional: true, default: null, doc: 'null: K^-0.5' },
    { name: 'chunkSize', type: 'int', optional: true, default: 64 },
  ],
  forward: glaForward('g', true),
  params: {},
  outputs: GLA_OUTPUTS,
  attrs: (c) => ({ scale: caseScale(c), output_final_state: true, chunk_size: (c.init[1] as number | undefined) ?? 64 }),
  cases: {
    ci: withSequenceDims([
      // T not a multiple of the chunk: a partial last chunk; the state carried in and out
      { name: 'small-chunk16-state', dtype: 'f32', dims: { B: 2, T: 37, H: 2, K: 8, V: 12 }, init: [null, 16], options: { initial_state: true, gateNormalizer: 4 } },
      { name: 'small-chunk5-bf16', dtype: 'bf16', dims: { B: 1, T: 23, H: 3, K: 16, V: 8 }, init: [0.5, 5], options: { gateNormalizer: 2 } },
    ]),
    production: withSequenceDims([
      // fla-hub/gla-2.7B-100B (5 heads, K 256, V 512): one long prefill, and a 256-token chunk of a chunked prefill
      { name: 'gla-2.7b-prefill-4096', dtype: 'bf16', dims: { B: 1, T: 4096, H, K, V }, init: [] },
      { name: 'gla-2.7b-prefill-16384', dtype: 'bf16', dims: { B: 1, T: 16384, H, K, V }, init: [] },
      { name: 'gla-2.7b-prefill-chunk-256-state', dtype: 'bf16', dims: { B: 1, T: 256, H, K, V }, init: [], options: { initial_state: true } },
      { name: 'gla-2.7b-prefill-8x1024', dtype: 'bf16', dims: { B: 8, T: 1024, H, K, V }, init: [] },
    ]),
  },
  makeInputs: makeGlaInputs,
  reference: ([q, k, v, g, s0], _p, c) => glaRecurrenceReference(q!, k!, v!, g!, s0 ?? null, caseScale(c)),
  work: glaWork,
});
