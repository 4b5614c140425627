import { DTYPE_INFO, Module, defineTask, hostArray, type ExecutionContext, type Rng, type TaskCase, type TaskMetaInput, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import { caseLens, cuSeqlensTensor, initEncoderParameters, packedIds, positionsOf } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refModel } from '../reference.js';
import type { XLMRobertaEmbeddings } from '../L2/encoder_embeddings.js';
import type { XLMRobertaEncoder } from './xlm_roberta_encoder.js';
import { TINY_BERT, TINY_XLMR, bgeM3Production, configOf, encoderCase, layerWork } from './encoder-cases.js';

/**
 * HF XLMRobertaModel without its pooler (add_pooling_layer=False, as vLLM and the embedding heads use it), on packed
 * tokens as vLLM's BertModel runs it: embeddings (L2/encoder_embeddings), encoder (L3/xlm_roberta_encoder).
 * forward(inputIds [T] i64, positions [T] i64 (0.. per sequence), cuSeqlens [B + 1] i32, tokenTypeIds? [T]) ->
 * last_hidden_state [T, H]. BertModel overrides `encoderTask`.
 */
export class XLMRobertaModel extends Module {
  /** The encoder task (a getter, so BertModel's applies inside super()). */
  protected get encoderTask(): string {
    return 'L3/xlm_roberta_encoder';
  }
  readonly embeddings: XLMRobertaEmbeddings;
  readonly encoder: XLMRobertaEncoder;
  constructor(readonly config: EncoderConfig) {
    super();
    this.embeddings = this.createModule('embeddings', 'L2/encoder_embeddings', config);
    this.encoder = this.createModule('encoder', this.encoderTask, config);
  }

  forward(inputIds: Tensor, positions: Tensor, cuSeqlens: Tensor, tokenTypeIds: Tensor | null = null): Tensor {
    const e = this.embeddings.forward(inputIds, positions, tokenTypeIds);
    try {
      return this.encoder.forward(e, cuSeqlens);
    } finally {
      e.dispose();
    }
  }
}

/** The packed inputs every model-level task takes (ids, positions, offsets). */
export const PACKED_MODEL_INPUTS: TaskMetaInput['inputs'] = [
  { name: 'inputIds', dtype: 'i64', shape: ['T'], doc: 'the sequences\' tokens back to back, no padding' },
  { name: 'positions', dtype: 'i64', shape: ['T'], doc: '0..n-1 within each sequence (vLLM\'s positions)' },
  { name: 'cuSeqlens', dtype: 'i32', shape: ['B1'], doc: 'offsets of the sequences [B + 1]' },
];

/** The model tasks' inputs: the packed ones and HF's optional token_type_ids. */
export const PACKED_MODEL_INPUTS_WITH_TYPES: TaskMetaInput['inputs'] = [
  ...PACKED_MODEL_INPUTS,
  { name: 'tokenTypeIds', dtype: 'i64', shape: ['T'], optional: true, doc: 'default 0' },
];

/** Inputs of a model-level case: packed ids, their per-sequence positions and cu_seqlens. */
export function modelInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): Tensor[] {
  const lens = caseLens(c);
  const ids = packedIds(rng, lens, configOf(c));
  return [fromInts(ctx, ids, [ids.length], 'i64'), fromInts(ctx, positionsOf(lens), [ids.length], 'i64'), cuSeqlensTensor(ctx, lens)];
}

export function modelWork(c: TaskCase): { bytes: number; flops: number } {
  const cfg = configOf(c);
  const w = layerWork(c, cfg);
  const it = DTYPE_INFO[c.dtype].itemsize;
  return { bytes: w.bytes * cfg.numHiddenLayers + bytesOf([c.dims.T!, cfg.hiddenSize], it) * 4, flops: w.flops * cfg.numHiddenLayers };
}

export const xlmRobertaModelTask = defineTask(
  {
    id: 'L3/xlm_roberta_model',
    level: 3,
    className: 'XLMRobertaModel',
    family: [FAMILY],
    architectures: ['bge_m3'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaModel',
    description: 'XLM-RoBERTa on packed sequences: embeddings (positions from padding_idx + 1 per sequence) and the encoder stack; returns last_hidden_state.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' }],
    inputs: PACKED_MODEL_INPUTS_WITH_TYPES,
    outputs: [{ name: 'lastHiddenState', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    // plus L3/xlm_roberta_encoder through the registry (same level: not listed, imports are lower levels)
    imports: ['L2/encoder_embeddings', 'L2/encoder_attention', 'L2/encoder_mlp'],
    cases: {
      ci: [
        encoderCase('tiny-xlmr-f32', 'f32', TINY_XLMR, [7, 3, 5]),
        encoderCase('tiny-xlmr-bf16', 'bf16', TINY_XLMR, [4, 6]),
        encoderCase('tiny-xlmr-len1-max-f32', 'f32', TINY_XLMR, [1, 38, 2]),
        encoderCase('tiny-bert-f32', 'f32', TINY_BERT, [5, 2]),
      ],
      production: bgeM3Production(),
    },
  },
  {
    baseline: XLMRobertaModel,
    makeInputs: (c, ctx, rng) => [...modelInputs(c, ctx, rng), null],
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    // positions from the ids, HF's way per sequence: checks the module's padding_idx + 1 offset too
    reference: ([ids, , cu], params, c) => [hostArray([ids!.data.length, configOf(c).hiddenSize], refModel(ids!.data, cu!.data, params, configOf(c)))],
    work: modelWork,
  },
);
