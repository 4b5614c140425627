import { Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { initEncoderParameters } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refLayer } from '../reference.js';
import type { EncoderAttention } from '../L2/encoder_attention.js';
import { EncoderOutput, type EncoderIntermediate } from '../L2/encoder_mlp.js';
import { PACKED_HIDDEN_INPUTS, PACKED_HIDDEN_OUTPUT, TINY_BERT, TINY_XLMR, bgeM3Production, configOf, encoderCase, layerWork, packedHiddenInputs } from './encoder-cases.js';

/**
 * HF XLMRobertaLayer (= BertLayer): attention (L2/encoder_attention), intermediate (L2/encoder_mlp), output
 * (EncoderOutput: dense, residual, LayerNorm), on packed tokens. forward(hiddenStates [T, H], cuSeqlens [B + 1] i32) ->
 * [T, H].
 */
export class XLMRobertaLayer extends Module {
  readonly attention: EncoderAttention;
  readonly intermediate: EncoderIntermediate;
  readonly output: EncoderOutput;
  constructor(readonly config: EncoderConfig) {
    super();
    this.attention = this.createModule('attention', 'L2/encoder_attention', config.hiddenSize, config.numAttentionHeads, config.layerNormEps);
    this.intermediate = this.createModule('intermediate', 'L2/encoder_mlp', config.hiddenSize, config.intermediateSize, config.hiddenAct);
    this.output = this.registerModule('output', new EncoderOutput(config.intermediateSize, config.hiddenSize, config.layerNormEps));
  }

  forward(hiddenStates: Tensor, cuSeqlens: Tensor): Tensor {
    const a = this.attention.forward(hiddenStates, cuSeqlens);
    const i = this.intermediate.forward(a);
    const y = this.output.forward(i, a);
    i.dispose();
    a.dispose();
    return y;
  }
}

export const xlmRobertaLayerTask = defineTask(
  {
    id: 'L3/xlm_roberta_layer',
    level: 3,
    className: 'XLMRobertaLayer',
    family: [FAMILY],
    architectures: ['bge_m3'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaLayer',
    description: 'One post-LayerNorm encoder layer on packed sequences: varlen self-attention, GELU FFN, residuals and LayerNorms.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' }],
    inputs: PACKED_HIDDEN_INPUTS,
    outputs: PACKED_HIDDEN_OUTPUT,
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L2/encoder_attention', 'L2/encoder_mlp'],
    cases: {
      ci: [encoderCase('tiny-xlmr-f32', 'f32', TINY_XLMR, [7, 3, 5]), encoderCase('tiny-xlmr-bf16', 'bf16', TINY_XLMR, [5, 2]), encoderCase('tiny-xlmr-len1-f32', 'f32', TINY_XLMR, [1, 6, 1]), encoderCase('tiny-bert-f32', 'f32', TINY_BERT, [4, 6])],
      production: bgeM3Production(),
    },
  },
  {
    baseline: XLMRobertaLayer,
    makeInputs: packedHiddenInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x, cu], params, c) => [hostArray(x!.shape, refLayer(x!.data, cu!.data, params, configOf(c)))],
    work: (c) => layerWork(c, configOf(c)),
  },
);
