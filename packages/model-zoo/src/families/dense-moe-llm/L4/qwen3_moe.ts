import { defineTask } from '@fastkernels/core';
import { FAMILY } from '../family.js';
import { QWEN3_30B_A3B_CONFIG, tinyQwen3MoeConfig, type MoeConfig } from '../moe/config.js';
import { MoeForCausalLMBase } from '../moe/causal-lm.js';
import { initMoeParameters } from '../moe/fused-moe.js';
import { moeModelCase, moeModelInputs, moeModelReference, moeModelWork } from '../moe/layer-cases.js';
import { decodeCtx } from '../../../common/decoder-layer.js';

/**
 * vLLM's Qwen3MoeForCausalLM (the text model): model (embed_tokens, layers of L3/qwen3_moe_decoder, norm) + lm_head. forward(inputIds,
 * positions) -> final hidden states [T, H]; computeLogits(hidden [B, H]) -> [B, V]. Constructor: (config) where vLLM
 * takes vllm_config.
 */
export class Qwen3MoeForCausalLM extends MoeForCausalLMBase {
  constructor(config: MoeConfig) {
    super(config, 'L3/qwen3_moe_decoder');
  }
}

const X = QWEN3_30B_A3B_CONFIG;

export const qwen3MoeModelTask = defineTask(
  {
    id: 'L4/qwen3_moe',
    level: 4,
    className: 'Qwen3MoeForCausalLM',
    family: [FAMILY],
    architectures: ['qwen3_moe'],
    mirrors: 'vllm.model_executor.models.qwen3_moe.Qwen3MoeForCausalLM',
    description: 'The Qwen3-MoE text model: embedding, decoder layers (attention with q/k norms over the paged cache, sparse MoE), final norm; computeLogits applies the LM head.',
    init: [{ name: 'config', type: 'object', doc: 'the normalised HF config (MoeConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['T'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
      { name: 'positions', dtype: 'i64', shape: ['T'] },
    ],
    outputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'after the final norm' }],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L1/embedding', 'L3/qwen3_moe_decoder', 'L1/rms_norm', 'L2/parallel_embedding'],
    cases: {
      ci: [
        moeModelCase('tiny-qwen3-moe-mixed-f32', 'f32', tinyQwen3MoeConfig(), [6, 2], [21, 4]),
        moeModelCase('tiny-qwen3-moe-dense-layer0-bf16', 'bf16', tinyQwen3MoeConfig({ denseLayers: [0] }), [12], [20, 7]),
      ],
      production: [
        moeModelCase('qwen3-30b-a3b-decode-b32', 'bf16', X, [], decodeCtx(32, 2048)),
        moeModelCase('qwen3-30b-a3b-prefill-4096', 'bf16', X, [4096], []),
      ],
    },
  },
  {
    baseline: Qwen3MoeForCausalLM,
    makeInputs: moeModelInputs,
    initParameters: (m, _c, rng) => initMoeParameters(m, rng),
    reference: moeModelReference,
    work: (c) => moeModelWork(c),
  },
);
