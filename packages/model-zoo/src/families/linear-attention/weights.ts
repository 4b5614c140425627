/**
 * fla-hub GLA checkpoints name their tensors as the module tree does (model.embeddings, model.layers.N.attn.q_proj /
 * gk_proj.0 / gk_proj.1 / g_norm_swish_gate, mlp.gate_proj / up_proj / down_proj, model.norm, lm_head): no renames and no
 * stacking; lm_head is read from the embedding when tied.
 */
import type { WeightRules } from '../../weights/weight-plan.js';
import type { GlaConfig } from './config.js';

export function glaWeightRules(cfg: GlaConfig): WeightRules {
  return {
    label: 'the gla config',
    tied: cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embeddings.weight' } : {},
    norms: /(^|\.)(attn_norm|mlp_norm|norm|g_norm_swish_gate)\.weight$/,
    initStd: cfg.initializerRange,
    missingFix: (n) => (n === 'lm_head.weight' ? 'set "tie_word_embeddings": true in config.json if the model shares its embedding' : undefined),
    unexpectedFix: 'check num_hidden_layers, num_heads, expand_k / expand_v, use_short_conv and tie_word_embeddings in config.json',
  };
}
