/**
 * Where Llama / Qwen2 / Mistral checkpoints differ from our module tree, and nothing else (vLLM's llama.py
 * load_weights): q/k/v_proj stacked into qkv_proj and gate/up_proj into gate_up_proj, lm_head read from
 * model.embed_tokens when tied, rotary inv_freq ignored; and how each parameter splits over tensor-parallel ranks,
 * as tensor-parallel.ts builds the modules (row-parallel o_proj / down_proj, vocabulary-parallel embedding and head).
 */
import type { WeightRules } from '../../weights/weight-plan.js';
import type { LlamaConfig } from './config.js';

export function llamaWeightRules(cfg: LlamaConfig): WeightRules {
  const V = cfg.vocabSize;
  return {
    label: `${cfg.modelType} config`,
    stacked: [
      { param: 'qkv_proj', parts: ['q_proj', 'k_proj', 'v_proj'], layout: { kind: 'qkv', headSize: cfg.headDim, numHeads: cfg.numAttentionHeads, numKvHeads: cfg.numKeyValueHeads } },
      { param: 'gate_up_proj', parts: ['gate_proj', 'up_proj'], layout: { kind: 'merged', sizes: [cfg.intermediateSize, cfg.intermediateSize] } },
    ],
    // Our LM head wraps its linear (L2/parallel_embedding); the checkpoint names the weight lm_head.weight.
    renames: [{ from: /^lm_head\.linear\./, to: 'lm_head.' }],
    // Tied: the LM head is filled from the embedding (vLLM's tie_weights); lm_head.weight, if present, is ignored.
    tied: cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embed_tokens.weight' } : {},
    sharded: [
      { match: /\.(o_proj|down_proj)\.weight$/, kind: 'row' },
      { match: /^model\.embed_tokens\.weight$/, kind: 'vocab', size: V },
      { match: /^lm_head\.linear\.weight$/, kind: 'vocab', size: V },
    ],
    ignore: [/\.rotary_emb\.inv_freq$/],
    computed: [/(^|\.)cos_sin_cache$/],
    norms: /(^|\.)(input_layernorm|post_attention_layernorm|norm)\.weight$/,
    initStd: cfg.initializerRange,
    missingFix: (n) => (n === 'lm_head.weight' ? 'set "tie_word_embeddings": true in config.json if the model shares its embedding' : undefined),
    unexpectedFix: 'check num_hidden_layers, attention_bias, mlp_bias and tie_word_embeddings in config.json',
  };
}
