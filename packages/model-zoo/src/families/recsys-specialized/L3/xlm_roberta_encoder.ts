import { Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { caseLens, initEncoderParameters, maskTensor } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refEncoder } from '../reference.js';
import type { XLMRobertaLayer } from './xlm_roberta_layer.js';
import { TINY_XLMR, bgeM3Production, configOf, encoderCase, layerWork } from './encoder-cases.js';

/**
 * HF XLMRobertaEncoder: `layer.<i>` (L3/xlm_roberta_layer) for each of num_hidden_layers, in order.
 * forward(hiddenStates [B, S, H], attentionMask [B, S] bool) -> [B, S, H]. BertEncoder overrides `layerTask`.
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

  forward(hiddenStates: Tensor, attentionMask: Tensor): Tensor {
    let h = hiddenStates;
    for (const layer of this.layers) {
      const next = layer.forward(h, attentionMask);
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
    description: 'The stack of XLM-RoBERTa encoder layers over a padded batch with its padding mask.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' }],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'H'] },
      { name: 'attentionMask', dtype: 'bool', shape: ['B', 'S'] },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'S', 'H'] }],
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
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.S!, c.dims.H!], c.dtype), maskTensor(ctx, caseLens(c), 'bool')],
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x, mask], params, c) => {
      const [B, S] = x!.shape as [number, number];
      return [hostArray(x!.shape, refEncoder(x!.data, mask!.data, B, S, params, configOf(c)))];
    },
    work: (c) => {
      const w = layerWork(c, configOf(c));
      const n = configOf(c).numHiddenLayers;
      return { bytes: w.bytes * n, flops: w.flops * n };
    },
  },
);
