/**
 * Where Qwen3-Next checkpoints differ from the module tree (vLLM's qwen3_next.py load_weights at tp / ep 1): each
 * expert's gate and up projections stacked into the layer's mlp.experts.w13_weight [E, 2I, D] and its down projection
 * into experts.w2_weight [E, D, I]; everything else (in_proj_qkvz, in_proj_ba, conv1d [convDim, 1, W], A_log, dt_bias,
 * the gated norm, q/k/v/o_proj, q_norm / k_norm, the shared expert and its gate, the zero-centred norms) by its HF name.
 * The released checkpoints' multi-token-prediction head (mtp.*) is not built and is ignored; lm_head is read from the
 * embedding when tied.
 */
import type { StackedRule, WeightRules } from '../../weights/weight-plan.js';
import type { Qwen3NextConfig } from './qwen3-next-config.js';

export function qwen3NextWeightRules(cfg: Qwen3NextConfig): WeightRules {
  const [E, I] = [cfg.numExperts, cfg.moeIntermediateSize];
  const stacked: StackedRule[] = [
    { param: 'w13_weight', parts: ['gate_proj.weight', 'up_proj.weight'], layout: { kind: 'experts', numExperts: E, sizes: [I, I] } },
    { param: 'w2_weight', parts: ['down_proj.weight'], layout: { kind: 'experts', numExperts: E, sizes: [cfg.hiddenSize] } },
  ];
  return {
    label: 'the qwen3_next config',
    stacked,
    tied: cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embed_tokens.weight' } : {},
    ignore: [/^mtp\./, /\.rotary_emb\.inv_freq$/],
    computed: [/(^|\.)cos_sin_cache$/],
    // only the gated norm scales by w itself; the zero-centred norms (1 + w) draw as small 1-D tensors around 0
    norms: /(^|\.)linear_attn\.norm\.weight$/,
    initStd: cfg.initializerRange,
    missingFix: (n) => (n === 'lm_head.weight' ? 'set "tie_word_embeddings": true in config.json if the model shares its embedding' : /experts\.\d+\./.test(n) ? 'check num_experts and moe_intermediate_size in config.json' : undefined),
    unexpectedFix: 'check num_hidden_layers, layer_types / full_attention_interval, num_experts, mlp_only_layers / decoder_sparse_step and tie_word_embeddings in config.json',
  };
}
