import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import { caseLens, initEncoderParameters, maskTensor, paddedIds } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refModel } from '../reference.js';
import type { XLMRobertaEmbeddings } from '../L2/encoder_embeddings.js';
import type { XLMRobertaEncoder } from './xlm_roberta_encoder.js';
import { TINY_BERT, TINY_XLMR, bgeM3Production, configOf, encoderCase, layerWork } from './encoder-cases.js';

/**
 * HF XLMRobertaModel without its pooler (add_pooling_layer=False, as vLLM and the embedding heads use it):
 * embeddings (L2/encoder_embeddings), encoder (L3/xlm_roberta_encoder). forward(inputIds [B, S] i64, attentionMask
 * [B, S] (1 = token, 0 = pad; any int or bool dtype)) -> last_hidden_state [B, S, H]. BertModel overrides
 * `encoderTask`.
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

  forward(inputIds: Tensor, attentionMask: Tensor, tokenTypeIds: Tensor | null = null): Tensor {
    const e = this.embeddings.forward(inputIds, tokenTypeIds);
    const mask = attentionMask.dtype === 'bool' ? attentionMask : F.ne(attentionMask, 0);
    try {
      return this.encoder.forward(e, mask);
    } finally {
      e.dispose();
      if (mask !== attentionMask) mask.dispose();
    }
  }
}

/** Inputs of a model-level case: padded ids and the i64 mask. */
export function modelInputs(c: Parameters<Parameters<typeof defineTask>[1]['makeInputs']>[0], ctx: Parameters<Parameters<typeof defineTask>[1]['makeInputs']>[1], rng: Parameters<Parameters<typeof defineTask>[1]['makeInputs']>[2]): Tensor[] {
  const lens = caseLens(c);
  const { ids, S } = paddedIds(rng, lens, configOf(c));
  return [fromInts(ctx, ids, [lens.length, S], 'i64'), maskTensor(ctx, lens, 'i64')];
}

export function modelWork(c: Parameters<typeof layerWork>[0]): { bytes: number; flops: number } {
  const cfg = configOf(c);
  const w = layerWork(c, cfg);
  const it = DTYPE_INFO[c.dtype].itemsize;
  return { bytes: w.bytes * cfg.numHiddenLayers + bytesOf([c.dims.B! * c.dims.S!, cfg.hiddenSize], it) * 4, flops: w.flops * cfg.numHiddenLayers };
}

export const xlmRobertaModelTask = defineTask(
  {
    id: 'L3/xlm_roberta_model',
    level: 3,
    className: 'XLMRobertaModel',
    family: [FAMILY],
    architectures: ['bge_m3'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaModel',
    description: 'XLM-RoBERTa: embeddings (RoBERTa positions) and the encoder stack over a padded batch; returns last_hidden_state.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['B', 'S'] },
      { name: 'attentionMask', dtype: 'i64', shape: ['B', 'S'], doc: '1 = token, 0 = pad' },
      { name: 'tokenTypeIds', dtype: 'i64', shape: ['B', 'S'], optional: true, doc: 'default 0' },
    ],
    outputs: [{ name: 'lastHiddenState', dtype: 'act', shape: ['B', 'S', 'H'] }],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    // plus L3/xlm_roberta_encoder through the registry (same level: not listed, imports are lower levels)
    imports: ['L2/encoder_embeddings', 'L2/encoder_attention', 'L2/encoder_mlp'],
    cases: {
      ci: [encoderCase('tiny-xlmr-f32', 'f32', TINY_XLMR, [7, 3, 5]), encoderCase('tiny-xlmr-bf16', 'bf16', TINY_XLMR, [4, 6]), encoderCase('tiny-bert-f32', 'f32', TINY_BERT, [5, 2])],
      production: bgeM3Production(),
    },
  },
  {
    baseline: XLMRobertaModel,
    makeInputs: modelInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([ids, mask], params, c) => {
      const [B, S] = ids!.shape as [number, number];
      const cfg = configOf(c);
      return [hostArray([B, S, cfg.hiddenSize], refModel(ids!.data, mask!.data, B, S, params, cfg))];
    },
    work: modelWork,
  },
);
