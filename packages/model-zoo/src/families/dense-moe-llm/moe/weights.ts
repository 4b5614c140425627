/**
 * Where Mixtral / Qwen3-MoE checkpoints differ from the module tree (vLLM's mixtral.py / qwen3_moe.py load_weights):
 * q/k/v_proj stacked into qkv_proj; each expert's gate and up projections stacked into the layer's
 * experts.w13_weight [E, 2I, H] and its down projection into experts.w2_weight [E, H, I] (Mixtral's experts.N.w1 /
 * w3 / w2, Qwen3-MoE's experts.N.gate_proj / up_proj / down_proj); Qwen3-MoE's dense layers' gate/up_proj into
 * gate_up_proj; lm_head read from the embedding when tied; rotary inv_freq ignored. Over ranks (expert parallelism,
 * issue 31) attention, the dense layers' MLP and the vocabulary split as Llama's do; the expert tensors by expert.
 */
import type { StackedRule, WeightRules } from '../../../weights/weight-plan.js';
import type { MoeConfig } from './config.js';

export function moeWeightRules(cfg: MoeConfig): WeightRules {
  const E = cfg.numExperts;
  const I = cfg.moeIntermediateSize;
  const [gate, up, down] = cfg.modelType === 'mixtral' ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];
  const stacked: StackedRule[] = [
    { param: 'qkv_proj', parts: ['q_proj', 'k_proj', 'v_proj'], layout: { kind: 'qkv', headSize: cfg.headDim, numHeads: cfg.numAttentionHeads, numKvHeads: cfg.numKeyValueHeads } },
    { param: 'gate_up_proj', parts: ['gate_proj', 'up_proj'], layout: { kind: 'merged', sizes: [cfg.intermediateSize, cfg.intermediateSize] } },
    { param: 'w13_weight', parts: [`${gate}.weight`, `${up}.weight`], layout: { kind: 'experts', numExperts: E, sizes: [I, I] } },
    { param: 'w2_weight', parts: [`${down}.weight`], layout: { kind: 'experts', numExperts: E, sizes: [cfg.hiddenSize] } },
  ];
  return {
    label: `${cfg.modelType} config`,
    stacked,
    renames: [{ from: /^lm_head\.linear\./, to: 'lm_head.' }],
    sharded: [
      { match: /\.(o_proj|down_proj)\.weight$/, kind: 'row' },
      { match: /^model\.embed_tokens\.weight$/, kind: 'vocab', size: cfg.vocabSize },
      { match: /^lm_head\.linear\.weight$/, kind: 'vocab', size: cfg.vocabSize },
    ],
    tied: cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embed_tokens.weight' } : {},
    ignore: [/\.rotary_emb\.inv_freq$/],
    computed: [/(^|\.)cos_sin_cache$/],
    norms: /(^|\.)(input_layernorm|post_attention_layernorm|norm|q_norm|k_norm)\.weight$/,
    initStd: cfg.initializerRange,
    missingFix: (n) => (n === 'lm_head.weight' ? 'set "tie_word_embeddings": true in config.json if the model shares its embedding' : /experts\.\d+\./.test(n) ? 'check num_local_experts / num_experts and moe_intermediate_size in config.json' : undefined),
    unexpectedFix: 'check num_hidden_layers, the expert count, mlp_only_layers / decoder_sparse_step and tie_word_embeddings in config.json',
  };
}
