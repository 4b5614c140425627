import { Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { initEncoderParameters } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refEncoder } from '../reference.js';
import type { XLMRobertaLayer } from './xlm_roberta_layer.js';
import { PACKED_HIDDEN_INPUTS, PACKED_HIDDEN_OUTPUT, TINY_XLMR, bgeM3Production, configOf, encoderCase, layerWork, packedHiddenInputs } from './encoder-cases.js';

/**
 * HF XLMRobertaEncoder: `layer.<i>` (L3/xlm_roberta_layer) for each of num_hidden_layers, in order.
 * forward(hiddenStates [T, H], cuSeqlens [B + 1] i32) -> [T, H] on packed tokens. BertEncoder overrides `layerTask`.
 */
export class XLMRobertaEncoder extends Module {
  /** The layer task each `layer.<i>` is built from (a getter, so a subclass's applies inside super()). */
  protected get layerTask(): string {
    return 'L3/xlm_roberta_layer';
  }
  readonly layers: XLMRobertaLayer[] = [];
  constructor(readonly config: EncoderConfig) {
    super();
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.push(this.createModule(`layer.${i}`, this.layerTask, config));
  }

  forward(hiddenStates: Tensor, cuSeqlens: Tensor): Tensor {
    let h = hiddenStates;
    for (const layer of this.layers) {
      const next = layer.forward(h, cuSeqlens);
      if (h !== hiddenStates) h.dispose();
      h = next;
    }
    return h === hiddenStates ? hiddenStates.clone() : h;
  }
}

export const xlmRobertaEncoderTask = defineTask(
  {
    id: 'L3/xlm_roberta_encoder',
    level: 3,
    className: 'XLMRobertaEncoder',
    family: [FAMILY],
    architectures: ['bge_m3'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaEncoder',
    description: 'The stack of XLM-RoBERTa encoder layers on packed sequences (cu_seqlens).',
    init: [{ name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' }],
    inputs: PACKED_HIDDEN_INPUTS,
    outputs: PACKED_HIDDEN_OUTPUT,
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    // the L3 layer it stacks is resolved through the registry too (same level: not listed, imports are lower levels)
    imports: ['L2/encoder_attention', 'L2/encoder_mlp'],
    cases: {
      ci: [encoderCase('tiny-xlmr-f32', 'f32', TINY_XLMR, [6, 3, 4]), encoderCase('tiny-xlmr-bf16', 'bf16', TINY_XLMR, [5, 2])],
      production: bgeM3Production(),
    },
  },
  {
    baseline: XLMRobertaEncoder,
    makeInputs: packedHiddenInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x, cu], params, c) => [hostArray(x!.shape, refEncoder(x!.data, cu!.data, params, configOf(c)))],
    work: (c) => {
      const w = layerWork(c, configOf(c));
      const n = configOf(c).numHiddenLayers;
      return { bytes: w.bytes * n, flops: w.flops * n };
    },
  },
);
