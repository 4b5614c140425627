/**
 * What the decoder-layer tasks of every LLM family share (Llama, Mixtral, Qwen3-MoE, gpt-oss, Qwen3-Next): vLLM's
 * decoder-layer signature, forward(positions [T], hiddenStates [T, H], residual [T, H] | null) -> [hiddenStates,
 * residual], and the context lengths of the decode batches their cases build.
 */
import type { TaskMetaInput } from '@fastkernels/core';

/** vLLM's decoder-layer inputs and outputs (the residual stream is carried between layers; null on the first). */
export const DECODER_LAYER_IO: Pick<TaskMetaInput, 'inputs' | 'outputs'> = {
  inputs: [
    { name: 'positions', dtype: 'i64', shape: ['T'] },
    { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] },
    { name: 'residual', dtype: 'act', shape: ['T', 'H'], optional: true, doc: 'null on the first layer' },
  ],
  outputs: [
    { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] },
    { name: 'residual', dtype: 'act', shape: ['T', 'H'] },
  ],
};

/** The context lengths of a decode batch of B sequences, spread evenly over (0, S] (each at least 1). */
export function decodeCtx(B: number, S: number): number[] {
  return Array.from({ length: B }, (_, i) => Math.max(1, Math.floor(((i + 1) * S) / B)));
}
