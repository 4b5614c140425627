/**
 * Where gpt-oss checkpoints differ from the module tree (vLLM's gpt_oss load_weights at tp 1): q/k/v_proj (weights
 * and biases) stacked into qkv_proj; lm_head read from the embedding when tied; rotary inv_freq ignored. Everything
 * else is stored under the tree's own names: self_attn.sinks, mlp.router.weight / bias, and the experts' HF tensors
 * (gate_up_proj / down_proj with their biases, or the released checkpoints' *_blocks / *_scales), which the experts
 * read in the checkpoint's own layout. Over ranks (expert parallelism, issue 31) see `sharded`. Random init draws the MXFP4 tensors itself
 * (random bytes, one scale exponent).
 */
import type { WeightRules } from '../../../weights/weight-plan.js';
import type { GptOssConfig } from './config.js';

/** The e8m0 scale (2^(s - 127)) under which uniform random fp4 bytes (rms sqrt(68.5 / 8)) have rms `std`. */
export function mxfp4ScaleFor(std: number): number {
  return Math.min(254, Math.max(0, 127 + Math.round(Math.log2(std / Math.sqrt(68.5 / 8)))));
}

export function gptOssWeightRules(cfg: GptOssConfig): WeightRules {
  return {
    label: 'gpt_oss config',
    stacked: [{ param: 'qkv_proj', parts: ['q_proj', 'k_proj', 'v_proj'], layout: { kind: 'qkv', headSize: cfg.headDim, numHeads: cfg.numAttentionHeads, numKvHeads: cfg.numKeyValueHeads } }],
    renames: [{ from: /^lm_head\.linear\./, to: 'lm_head.' }],
    // over ranks (expert parallelism): attention and the vocabulary as Llama's, the sinks by head, the expert tensors
    // (stored whole, [E, ...]) by expert: rank r reads rows [r E / W, (r + 1) E / W)
    sharded: [
      { match: /\.o_proj\.weight$/, kind: 'row' },
      { match: /\.self_attn\.sinks$/, kind: 'column' },
      { match: /\.experts\.(gate_up_proj|down_proj)(_bias|_blocks|_scales)?$/, kind: 'column' },
      { match: /^model\.embed_tokens\.weight$/, kind: 'vocab', size: cfg.vocabSize },
      { match: /^lm_head\.linear\.weight$/, kind: 'vocab', size: cfg.vocabSize },
    ],
    tied: cfg.tieWordEmbeddings ? { 'lm_head.weight': 'model.embed_tokens.weight' } : {},
    ignore: [/\.rotary_emb\.inv_freq$/],
    computed: [/(^|\.)cos_sin_cache$/],
    norms: /(^|\.)(input_layernorm|post_attention_layernorm|norm)\.weight$/,
    initStd: cfg.initializerRange,
    // MXFP4 experts at random: uniform bytes (every fp4 value, rms 2.93) under the one exponent that gives the dense
    // matrices' std (initializer_range), so an MXFP4 random model is as tame as a dense one
    draws: (m) => (/_blocks$/.test(m.hfName) ? { integers: [0, 256] } : /_scales$/.test(m.hfName) ? { constant: mxfp4ScaleFor(cfg.initializerRange) } : undefined),
    missingFix: (n) =>
      n === 'lm_head.weight'
        ? 'set "tie_word_embeddings": true in config.json if the model shares its embedding'
        : /_blocks$|_scales$/.test(n)
          ? 'the checkpoint has dense experts: drop quantization_config from config.json'
          : /experts\.(gate_up_proj|down_proj)$/.test(n)
            ? 'the checkpoint has MXFP4 experts (*_blocks / *_scales): add "quantization_config": {"quant_method": "mxfp4"} to config.json'
            : undefined,
    unexpectedFix: 'check num_hidden_layers, num_local_experts, quantization_config and tie_word_embeddings in config.json',
  };
}
