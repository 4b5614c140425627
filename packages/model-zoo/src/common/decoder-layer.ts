/**
 * What the decoder LLM families share (Llama, Mixtral, Qwen3-MoE, gpt-oss, Qwen3-Next): vLLM's decoder-layer
 * signature, forward(positions [T], hiddenStates [T, H], residual [T, H] | null) -> [hiddenStates, residual], the
 * context lengths of the decode batches their cases build, and the attention geometry their registry entries give the
 * engine.
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

/** The fields of an HF decoder config (normalised) that size the engine's attention and KV cache. */
export interface AttentionGeometrySource {
  readonly vocabSize: number;
  readonly maxPositionEmbeddings: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly hiddenSize: number;
}

/** Those fields of a config, as a registry entry's geometry lists them (its family adds the rest). */
export function attentionGeometry(c: AttentionGeometrySource): AttentionGeometrySource {
  const { vocabSize, maxPositionEmbeddings, numHiddenLayers, numAttentionHeads, numKeyValueHeads, headDim, hiddenSize } = c;
  return { vocabSize, maxPositionEmbeddings, numHiddenLayers, numAttentionHeads, numKeyValueHeads, headDim, hiddenSize };
}
