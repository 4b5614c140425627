/**
 * HF BertLayer / BertEncoder / BertModel (ColBERTv2's encoder): the same post-LayerNorm math and parameter names as
 * XLM-RoBERTa's (HF's XLMRoberta* classes are copies of Bert*), with BERT's config (arange positions, pad 0, eps
 * 1e-12, two token types); each level is its own task so candidates can target the BERT shapes. Subclasses of the
 * XLM-R modules: only the task each one stacks differs.
 */
import { defineTask, hostArray } from '@fastkernels/core';
import { initEncoderParameters } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refEncoder, refLayer, refModel } from '../reference.js';
import { PACKED_HIDDEN_INPUTS, PACKED_HIDDEN_OUTPUT, TINY_BERT, colbertProduction, configOf, encoderCase, layerWork, packedHiddenInputs } from './encoder-cases.js';
import { XLMRobertaEncoder } from './xlm_roberta_encoder.js';
import { XLMRobertaLayer } from './xlm_roberta_layer.js';
import { PACKED_MODEL_INPUTS_WITH_TYPES, XLMRobertaModel, modelInputs, modelWork } from './xlm_roberta_model.js';

export class BertLayer extends XLMRobertaLayer {
  constructor(config: EncoderConfig) {
    super(config);
  }
}

export class BertEncoder extends XLMRobertaEncoder {
  constructor(config: EncoderConfig) {
    super(config);
  }

  protected override get layerTask(): string {
    return 'L3/bert_layer';
  }
}

export class BertModel extends XLMRobertaModel {
  constructor(config: EncoderConfig) {
    super(config);
  }

  protected override get encoderTask(): string {
    return 'L3/bert_encoder';
  }
}

const meta = (id: string, className: string, description: string) => ({
  id, level: 3, className, family: [FAMILY], architectures: ['colbertv2'],
  mirrors: `transformers.models.bert.modeling_bert.${className}`, description,
  init: [{ name: 'config', type: 'object' as const, doc: 'the parsed encoder config (EncoderConfig, model_type bert)' }],
  tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
});
const ci = [encoderCase('tiny-bert-f32', 'f32', TINY_BERT, [7, 3, 5]), encoderCase('tiny-bert-bf16', 'bf16', TINY_BERT, [4, 6]), encoderCase('tiny-bert-len1-max-f32', 'f32', TINY_BERT, [1, 40])];

export const bertLayerTask = defineTask(
  { ...meta('L3/bert_layer', 'BertLayer', 'One BERT encoder layer on packed sequences (cu_seqlens).'), inputs: PACKED_HIDDEN_INPUTS, outputs: PACKED_HIDDEN_OUTPUT, imports: ['L2/encoder_attention', 'L2/encoder_mlp'], cases: { ci, production: colbertProduction() } },
  {
    baseline: BertLayer,
    makeInputs: packedHiddenInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x, cu], params, c) => [hostArray(x!.shape, refLayer(x!.data, cu!.data, params, configOf(c)))],
    work: (c) => layerWork(c, configOf(c)),
  },
);

export const bertEncoderTask = defineTask(
  // plus L3/bert_layer through the registry (same level: not listed)
  { ...meta('L3/bert_encoder', 'BertEncoder', 'The stack of BERT encoder layers on packed sequences.'), inputs: PACKED_HIDDEN_INPUTS, outputs: PACKED_HIDDEN_OUTPUT, imports: ['L2/encoder_attention', 'L2/encoder_mlp'], cases: { ci, production: colbertProduction() } },
  {
    baseline: BertEncoder,
    makeInputs: packedHiddenInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x, cu], params, c) => [hostArray(x!.shape, refEncoder(x!.data, cu!.data, params, configOf(c)))],
    work: (c) => {
      const w = layerWork(c, configOf(c));
      return { bytes: w.bytes * configOf(c).numHiddenLayers, flops: w.flops * configOf(c).numHiddenLayers };
    },
  },
);

export const bertModelTask = defineTask(
  // plus L3/bert_encoder through the registry (same level: not listed)
  {
    ...meta('L3/bert_model', 'BertModel', 'BERT (add_pooling_layer=False) on packed sequences: embeddings (positions 0.. per sequence, token types) and the encoder stack; returns last_hidden_state.'),
    inputs: PACKED_MODEL_INPUTS_WITH_TYPES,
    outputs: [{ name: 'lastHiddenState', dtype: 'act', shape: ['T', 'H'] }],
    imports: ['L2/encoder_embeddings', 'L2/encoder_attention', 'L2/encoder_mlp'],
    cases: { ci, production: colbertProduction() },
  },
  {
    baseline: BertModel,
    makeInputs: (c, ctx, rng) => [...modelInputs(c, ctx, rng), null],
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([ids, , cu], params, c) => [hostArray([ids!.data.length, configOf(c).hiddenSize], refModel(ids!.data, cu!.data, params, configOf(c)))],
    work: modelWork,
  },
);
