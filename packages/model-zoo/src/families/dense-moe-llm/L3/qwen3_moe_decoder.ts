import { defineTask } from '@fastkernels/core';
import { FAMILY } from '../family.js';
import { Qwen3MoeAttention } from '../L2/qwen3_moe_attention.js';
import { QWEN3_30B_A3B_CONFIG, tinyQwen3MoeConfig, type MoeConfig } from '../moe/config.js';
import { MoeDecoderLayerBase, type FeedForward } from '../moe/decoder-layer.js';
import { initMoeParameters } from '../moe/fused-moe.js';
import { moeDecoderCase, moeDecoderInputs, moeDecoderReference, moeDecoderWork } from '../moe/layer-cases.js';
import { DECODER_LAYER_IO, decodeCtx } from '../../../common/decoder-layer.js';

/**
 * vLLM's Qwen3MoeDecoderLayer (the original's Qwen3MoEDecoderLayer): input_layernorm, self_attn (Qwen3MoeAttention:
 * Llama's attention with per-head q_norm / k_norm), post_attention_layernorm, mlp: the sparse block (L2/qwen3_moe), or
 * on a layer of mlp_only_layers / off decoder_sparse_step a dense Qwen3MoeMLP (L2/llama_mlp: the same SwiGLU).
 * forward(positions, hiddenStates, residual) -> [hiddenStates, residual].
 */
export class Qwen3MoEDecoderLayer extends MoeDecoderLayerBase {
  protected readonly selfAttn: Qwen3MoeAttention;
  protected readonly feedForward: FeedForward;
  constructor(config: MoeConfig, layerIdx = 0) {
    super(config, layerIdx);
    const c = config;
    // Qwen3's attention is LlamaAttention plus the q/k norms (no task of its own): built here, its children through the registry.
    this.selfAttn = this.registerModule(
      'self_attn',
      new Qwen3MoeAttention(c.hiddenSize, c.numAttentionHeads, c.numKeyValueHeads, c.ropeTheta, c.ropeScaling, c.maxPositionEmbeddings, c.qkvBias, c.headDim, c.rmsNormEps, layerIdx),
    );
    this.feedForward = c.denseLayers.includes(layerIdx)
      ? this.createModule('mlp', 'L2/llama_mlp', c.hiddenSize, c.intermediateSize, 'silu', false)
      : this.createModule('mlp', 'L2/qwen3_moe', c.hiddenSize, c.numExperts, c.numExpertsPerTok, c.moeIntermediateSize, c.normTopkProb);
  }
}

const Q = QWEN3_30B_A3B_CONFIG;

export const qwen3MoeDecoderTask = defineTask(
  {
    id: 'L3/qwen3_moe_decoder',
    level: 3,
    className: 'Qwen3MoEDecoderLayer',
    family: [FAMILY],
    architectures: ['qwen3_moe', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.models.qwen3_moe.Qwen3MoeDecoderLayer',
    description: 'One Qwen3-MoE decoder layer: fused residual add + RMSNorm, self-attention with per-head q/k norms over the paged cache, fused residual add + RMSNorm, sparse MoE block (or a dense MLP on mlp-only layers).',
    init: [
      { name: 'config', type: 'object', doc: 'the normalised HF config (MoeConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    ...DECODER_LAYER_IO,
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L2/attention', 'L2/qwen3_moe', 'L2/llama_mlp', 'L1/rms_norm'],
    cases: {
      ci: [
        moeDecoderCase('tiny-qwen3-moe-mixed-f32', 'f32', tinyQwen3MoeConfig(), [5, 3], [20, 6]),
        moeDecoderCase('tiny-qwen3-moe-first-layer-bf16', 'bf16', tinyQwen3MoeConfig(), [6], [18], { residual: false }),
        moeDecoderCase('tiny-qwen3-moe-dense-layer1-f32', 'f32', tinyQwen3MoeConfig({ denseLayers: [1], normTopkProb: false }), [7], [12], { layerIdx: 1 }),
      ],
      production: [
        moeDecoderCase('qwen3-30b-a3b-decode-b32', 'bf16', Q, [], decodeCtx(32, 2048)),
        moeDecoderCase('qwen3-30b-a3b-prefill-4096', 'bf16', Q, [4096], []),
        moeDecoderCase('qwen3-30b-a3b-mixed-512+b16', 'bf16', Q, [512], decodeCtx(16, 1024)),
      ],
    },
  },
  {
    baseline: Qwen3MoEDecoderLayer,
    makeInputs: moeDecoderInputs,
    initParameters: (m, _c, rng) => initMoeParameters(m, rng),
    reference: moeDecoderReference,
    work: (c) => moeDecoderWork(c),
  },
);
