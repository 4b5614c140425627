import { defineTask } from '@fastkernels/core';
import { FAMILY } from '../family.js';
import type { LlamaAttention } from '../L2/attention.js';
import type { MixtralMoE } from '../L2/mixtral_moe.js';
import { MIXTRAL_8X7B_CONFIG, tinyMixtralConfig, type MoeConfig } from '../moe/config.js';
import { MoeDecoderLayerBase } from '../moe/decoder-layer.js';
import { initMoeParameters } from '../moe/fused-moe.js';
import { moeDecoderCase, moeDecoderInputs, moeDecoderReference, moeDecoderWork } from '../moe/layer-cases.js';
import { DECODER_LAYER_IO, decodeCtx } from '../../../common/decoder-layer.js';

/**
 * vLLM's MixtralDecoderLayer: input_layernorm, self_attn (L2/attention: Llama's, with Mistral's sliding window when
 * the config has one), post_attention_layernorm, block_sparse_moe (L2/mixtral_moe). forward(positions, hiddenStates,
 * residual) -> [hiddenStates, residual]. Constructor: (config, layerIdx) where vLLM takes (config, cache_config,
 * quant_config, prefix).
 */
export class MixtralDecoderLayer extends MoeDecoderLayerBase {
  protected readonly selfAttn: LlamaAttention;
  protected readonly feedForward: MixtralMoE;
  constructor(config: MoeConfig, layerIdx = 0) {
    super(config, layerIdx);
    const c = config;
    this.selfAttn = this.createModule(
      'self_attn', 'L2/attention',
      c.hiddenSize, c.numAttentionHeads, c.numKeyValueHeads, c.ropeTheta, c.ropeScaling, c.maxPositionEmbeddings,
      c.qkvBias, false, c.headDim, c.slidingWindows[layerIdx] ?? 0, layerIdx,
    );
    this.feedForward = this.createModule('block_sparse_moe', 'L2/mixtral_moe', c.numExperts, c.numExpertsPerTok, c.hiddenSize, c.moeIntermediateSize);
  }
}

const X = MIXTRAL_8X7B_CONFIG;

export const mixtralDecoderTask = defineTask(
  {
    id: 'L3/mixtral_decoder',
    level: 3,
    className: 'MixtralDecoderLayer',
    family: [FAMILY],
    architectures: ['mixtral'],
    mirrors: 'vllm.model_executor.models.mixtral.MixtralDecoderLayer',
    description: 'One Mixtral decoder layer: fused residual add + RMSNorm, self-attention over the paged cache, fused residual add + RMSNorm, sparse MoE block.',
    init: [
      { name: 'config', type: 'object', doc: 'the normalised HF config (MoeConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    ...DECODER_LAYER_IO,
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L2/attention', 'L2/mixtral_moe', 'L1/rms_norm'],
    cases: {
      ci: [
        moeDecoderCase('tiny-mixtral-mixed-f32', 'f32', tinyMixtralConfig(), [5, 3], [20, 6]),
        moeDecoderCase('tiny-mixtral-first-layer-bf16', 'bf16', tinyMixtralConfig(), [6], [18], { residual: false }),
        moeDecoderCase('tiny-mixtral-window8-layer1-f32', 'f32', tinyMixtralConfig({ slidingWindows: [8, 8] }), [11], [19], { layerIdx: 1 }),
      ],
      production: [
        moeDecoderCase('mixtral-8x7b-decode-b32', 'bf16', X, [], decodeCtx(32, 2048)),
        moeDecoderCase('mixtral-8x7b-prefill-4096', 'bf16', X, [4096], []),
        moeDecoderCase('mixtral-8x7b-mixed-512+b16', 'bf16', X, [512], decodeCtx(16, 1024)),
      ],
    },
  },
  {
    baseline: MixtralDecoderLayer,
    makeInputs: moeDecoderInputs,
    initParameters: (m, _c, rng) => initMoeParameters(m, rng),
    reference: moeDecoderReference,
    work: (c) => moeDecoderWork(c),
  },
);
