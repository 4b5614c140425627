import { defineTask } from '@fastkernels/core';
import { FAMILY } from '../family.js';
import type { LlamaAttention } from '../L2/attention.js';
import type { GptOssMoE } from '../L2/gpt_oss_moe.js';
import { GPT_OSS_20B_CONFIG, tinyGptOssConfig, type GptOssConfig } from '../gpt-oss/config.js';
import { gptOssDecoderCase, gptOssDecoderInputs, gptOssDecoderReference, gptOssDecoderWork, initGptOssParameters } from '../gpt-oss/layer-cases.js';
import { MoeDecoderLayerBase } from '../moe/decoder-layer.js';
import { DECODER_LAYER_IO, decodeCtx } from '../../../common/decoder-layer.js';

/**
 * vLLM's gpt_oss TransformerBlock / HF GptOssDecoderLayer: input_layernorm, self_attn (L2/attention with q/k/v/o
 * biases, YaRN rotary, learned sinks and the layer's window from layer_types: sliding_window or full), post_attention_
 * layernorm, mlp (L2/gpt_oss_moe, dense or MXFP4 experts). forward(positions, hiddenStates, residual) ->
 * [hiddenStates, residual], residual null on the first layer. Constructor: (config, layerIdx).
 */
export class GptOssDecoderLayer extends MoeDecoderLayerBase<GptOssConfig> {
  protected readonly selfAttn: LlamaAttention;
  protected readonly feedForward: GptOssMoE;
  constructor(config: GptOssConfig, layerIdx = 0) {
    super(config, layerIdx);
    const c = config;
    this.selfAttn = this.createModule(
      'self_attn', 'L2/attention',
      c.hiddenSize, c.numAttentionHeads, c.numKeyValueHeads, c.ropeTheta, c.ropeScaling, c.maxPositionEmbeddings,
      c.attentionBias, c.attentionBias, c.headDim, c.slidingWindows[layerIdx] ?? 0, layerIdx, true,
    );
    this.feedForward = this.createModule('mlp', 'L2/gpt_oss_moe', c.hiddenSize, c.numLocalExperts, c.numExpertsPerTok, c.intermediateSize, c.swigluLimit, c.expertsFormat, c.swigluAlpha);
  }
}

const G = GPT_OSS_20B_CONFIG;

export const gptOssDecoderTask = defineTask(
  {
    id: 'L3/gpt_oss_decoder',
    level: 3,
    className: 'GptOssDecoderLayer',
    family: [FAMILY],
    architectures: ['gpt_oss'],
    mirrors: 'vllm.model_executor.models.gpt_oss.TransformerBlock',
    description:
      'One gpt-oss decoder layer: fused residual add + RMSNorm, attention with biases, YaRN, sinks and the layer\'s sliding window over the paged cache, fused residual add + RMSNorm, the MoE block (clamped SwiGLU experts, dense or MXFP4).',
    init: [
      { name: 'config', type: 'object', doc: 'the normalised HF config (GptOssConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0, doc: 'even layers slide (layer_types), odd ones attend fully' },
    ],
    ...DECODER_LAYER_IO,
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L2/attention', 'L2/gpt_oss_moe', 'L1/rms_norm'],
    cases: {
      ci: [
        gptOssDecoderCase('tiny-gpt-oss-sliding-mixed-f32', 'f32', tinyGptOssConfig(), [12, 3], [20, 6]),
        gptOssDecoderCase('tiny-gpt-oss-full-layer1-f32', 'f32', tinyGptOssConfig(), [9], [25, 2], { layerIdx: 1 }),
        gptOssDecoderCase('tiny-gpt-oss-mxfp4-first-layer-bf16', 'bf16', tinyGptOssConfig({ expertsFormat: 'mxfp4' }), [10], [17], { residual: false }),
      ],
      production: [
        gptOssDecoderCase('gpt-oss-20b-decode-b32-sliding', 'bf16', G, [], decodeCtx(32, 4096)),
        gptOssDecoderCase('gpt-oss-20b-decode-b32-full', 'bf16', G, [], decodeCtx(32, 4096), { layerIdx: 1 }),
        gptOssDecoderCase('gpt-oss-20b-prefill-4096-sliding', 'bf16', G, [4096], []),
        gptOssDecoderCase('gpt-oss-20b-mixed-512+b16-full', 'bf16', G, [512], decodeCtx(16, 2048), { layerIdx: 1 }),
      ],
    },
  },
  {
    baseline: GptOssDecoderLayer,
    makeInputs: gptOssDecoderInputs,
    initParameters: (m, _c, rng) => initGptOssParameters(m, rng),
    reference: gptOssDecoderReference,
    work: (c) => gptOssDecoderWork(c),
  },
);
