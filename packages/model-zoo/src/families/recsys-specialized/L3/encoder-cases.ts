/** Cases and work counts shared by the encoder's L3 / L4 tasks (one config, a batch of sequence lengths). */
import { DTYPE_INFO, type TaskCase } from '@fastkernels/core';
import { bytesOf } from '../../../common/inputs.js';
import { BGE_M3, COLBERTV2, tinyEncoderConfig, type EncoderConfig } from '../config.js';

export const configOf = (c: Pick<TaskCase, 'init'>) => c.init[0] as EncoderConfig;

export function encoderCase(name: string, dtype: 'f32' | 'bf16', cfg: EncoderConfig, lens: number[]) {
  return { name, dtype, dims: { B: lens.length, S: Math.max(...lens), H: cfg.hiddenSize }, init: [cfg], options: { lens } };
}

const spread = (B: number, lo: number, span: number) => Array.from({ length: B }, (_, i) => lo + ((i * 97) % span));

export const TINY_XLMR = tinyEncoderConfig();
export const TINY_BERT = tinyEncoderConfig({ modelType: 'bert', robertaPositions: false, padTokenId: 0, typeVocabSize: 2, layerNormEps: 1e-12, vocabSize: 40 });

/** BGE-M3 production batches: 64 documents of U[32, 512)-like lengths, and one 8192-token document. */
export const bgeM3Production = () => [
  encoderCase('bge-m3-b64-u32-512', 'bf16', BGE_M3, spread(64, 32, 481)),
  encoderCase('bge-m3-b1-8192', 'bf16', BGE_M3, [8192]),
  encoderCase('bge-m3-b256-128', 'bf16', BGE_M3, new Array(256).fill(128)),
];
export const colbertProduction = () => [
  encoderCase('colbertv2-b32-docs-180', 'bf16', COLBERTV2, spread(32, 60, 121)),
  encoderCase('colbertv2-b64-queries-32', 'bf16', COLBERTV2, new Array(64).fill(32)),
];

/** One encoder layer's bytes (weights + activations) and FLOPs on a padded [B, S] batch. */
export function layerWork(c: TaskCase, cfg: EncoderConfig): { bytes: number; flops: number } {
  const { B, S } = c.dims as { B: number; S: number };
  const H = cfg.hiddenSize;
  const I = cfg.intermediateSize;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const T = B * S;
  return {
    bytes: bytesOf([4 * H * H + 2 * H * I], it) + bytesOf([T, 14 * H + 2 * I], it),
    flops: 8 * T * H * H + 4 * T * H * I + 4 * B * S * S * H,
  };
}
