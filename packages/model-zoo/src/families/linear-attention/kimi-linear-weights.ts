/**
 * Where Kimi-Linear checkpoints differ from the module tree (vLLM's kimi_linear.py load_weights at tp / ep 1): each
 * expert's w1 (gate) and w3 (up) stacked into the layer's block_sparse_moe.experts.w13_weight [E, 2I, D] and its w2
 * (down) into experts.w2_weight [E, D, I]; the router's correction bias, a parameter of the block here, read from
 * block_sparse_moe.gate.e_score_correction_bias; everything else (q/k/v_proj, q/k/v_conv1d [C, 1, W], A_log
 * [1, 1, H, 1], dt_bias, f_a/f_b/g_a/g_b/b_proj, o_norm, o_proj; q_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj;
 * the shared experts and the dense MLPs; the norms) by its HF name. lm_head is read from the embedding when tied.
 */
import type { StackedRule, WeightRules } from '../../weights/weight-plan.js';
import type { KimiLinearConfig } from './kimi-linear-config.js';

export function kimiLinearWeightRules(cfg: KimiLinearConfig): WeightRules {
  const [E, I] = [cfg.numExperts, cfg.moeIntermediateSize];
  const stacked: StackedRule[] = [
    { param: 'w13_weight', parts: ['w1.weight', 'w3.weight'], layout: { kind: 'experts', numExperts: E, sizes: [I, I] } },
    { param: 'w2_weight', parts: ['w2.weight'], layout: { kind: 'experts', numExperts: E, sizes: [cfg.hiddenSize] } },
  ];
  return {
    label: 'the kimi_linear config',
    stacked,
    renames: [{ from: /\.block_sparse_moe\.e_score_correction_bias$/, to: '.block_sparse_moe.gate.e_score_correction_bias' }],
    tied: cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embed_tokens.weight' } : {},
    ignore: [/\.rotary_emb\.inv_freq$/],
    // every norm here scales by its weight (no zero-centred norms): drawn around 1 by random init
    norms: /(^|\.)(input_layernorm|post_attention_layernorm|kv_a_layernorm|o_norm|norm)\.weight$/,
    initStd: cfg.initializerRange,
    missingFix: (n) => (n === 'lm_head.weight' ? 'set "tie_word_embeddings": true in config.json if the model shares its embedding' : /experts\.\d+\./.test(n) ? 'check num_experts and moe_intermediate_size in config.json' : undefined),
    unexpectedFix: 'check num_hidden_layers, linear_attn_config (kda_layers / full_attn_layers), num_experts, first_k_dense_replace / moe_layer_freq, num_shared_experts and tie_word_embeddings in config.json',
  };
}
