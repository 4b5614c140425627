/** Cases and work counts shared by the encoder's L3 / L4 tasks (one config, a packed batch of sequence lengths). */
import { DTYPE_INFO, type ExecutionContext, type Rng, type TaskCase, type TaskMetaInput, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { caseLens, cuSeqlensTensor, packedDims } from '../cases.js';
import { BGE_M3, COLBERTV2, tinyEncoderConfig, type EncoderConfig } from '../config.js';

export const configOf = (c: Pick<TaskCase, 'init'>) => c.init[0] as EncoderConfig;

export function encoderCase(name: string, dtype: 'f32' | 'bf16', cfg: EncoderConfig, lens: number[]) {
  return { name, dtype, dims: packedDims(lens, { H: cfg.hiddenSize }), init: [cfg] as unknown[], options: { lens } };
}

const spread = (B: number, lo: number, span: number) => Array.from({ length: B }, (_, i) => lo + ((i * 97) % span));

export const TINY_XLMR = tinyEncoderConfig();
export const TINY_BERT = tinyEncoderConfig({ modelType: 'bert', robertaPositions: false, padTokenId: 0, typeVocabSize: 2, layerNormEps: 1e-12, vocabSize: 40 });

/** BGE-M3 production batches, packed: 64 documents of U[32, 512)-like lengths, one 8192-token document, 256 x 128. */
export const bgeM3Production = () => [
  encoderCase('bge-m3-64-docs-u32-512', 'bf16', BGE_M3, spread(64, 32, 481)),
  encoderCase('bge-m3-8192', 'bf16', BGE_M3, [8192]),
  encoderCase('bge-m3-256x128', 'bf16', BGE_M3, new Array(256).fill(128)),
];
export const colbertProduction = () => [
  encoderCase('colbertv2-32-docs-180', 'bf16', COLBERTV2, spread(32, 60, 121)),
  encoderCase('colbertv2-64-queries-32', 'bf16', COLBERTV2, new Array(64).fill(32)),
];

/** One encoder layer's bytes (weights + activations) and FLOPs on a packed batch (attention over each sequence). */
export function layerWork(c: TaskCase, cfg: EncoderConfig): { bytes: number; flops: number } {
  const T = c.dims.T!;
  const H = cfg.hiddenSize;
  const I = cfg.intermediateSize;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const pairs = caseLens(c).reduce((a, n) => a + n * n, 0);
  return {
    bytes: bytesOf([4 * H * H + 2 * H * I], it) + bytesOf([T, 14 * H + 2 * I], it),
    flops: 8 * T * H * H + 4 * T * H * I + 4 * pairs * H,
  };
}

/** The inputs and output of the layer / encoder tasks: packed hidden states and their offsets. */
export const PACKED_HIDDEN_INPUTS: TaskMetaInput['inputs'] = [
  { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'the sequences\' tokens back to back, no padding' },
  { name: 'cuSeqlens', dtype: 'i32', shape: ['B1'], doc: 'offsets of the sequences [B + 1]' },
];
export const PACKED_HIDDEN_OUTPUT: TaskMetaInput['inputs'] = [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }];

/** Random hidden states [T, H] and the case's cu_seqlens. */
export function packedHiddenInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): Tensor[] {
  return [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype), cuSeqlensTensor(ctx, caseLens(c))];
}
