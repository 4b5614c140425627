/**
 * Where the family's checkpoints differ from the module trees. FLUX (diffusers' transformer/*.safetensors): to_q /
 * to_k / to_v stack into to_qkv and add_q/k/v_proj into add_kv_proj (vllm-omni's packed_modules_mapping). T5EncoderModel:
 * encoder.embed_tokens is tied to `shared` (some exports store it; it is ignored). CLIPTextModel: the position_ids
 * buffer is unused. AutoencoderKL (vae/*.safetensors): the tree's names are diffusers' (decoder.up_blocks.0.resnets.1.conv1.weight,
 * decoder.mid_block.attentions.0.to_q.weight); the encoder half and quant_conv are in the file and unused.
 */
import type { WeightRules } from '../../weights/weight-plan.js';
import type { ClipTextConfig } from './clip-config.js';
import type { FluxTransformerConfig } from './flux-config.js';
import type { T5Config } from './t5-config.js';
import type { AutoencoderKLConfig } from './vae/vae-config.js';

const NORMS = /(norm[^.]*|layer_norm\d?)\.weight$/;

export function fluxTransformerWeightRules(c: FluxTransformerConfig): WeightRules {
  const layout = { kind: 'qkv' as const, headSize: c.attentionHeadDim, numHeads: c.numAttentionHeads, numKvHeads: c.numAttentionHeads };
  return {
    label: 'the FLUX transformer config',
    stacked: [
      { param: 'to_qkv', parts: ['to_q', 'to_k', 'to_v'], layout },
      { param: 'add_kv_proj', parts: ['add_q_proj', 'add_k_proj', 'add_v_proj'], layout },
    ],
    norms: NORMS,
    initStd: 0.02,
    unexpectedFix: 'check num_layers, num_single_layers and guidance_embeds in transformer/config.json',
  };
}

export function t5WeightRules(c: T5Config): WeightRules {
  return {
    label: 'the t5 config',
    ignore: [/^encoder\.embed_tokens\.weight$/, /^lm_head\./, /^decoder\./],
    norms: NORMS,
    initStd: 0.05 * c.initializerFactor,
    unexpectedFix: 'check num_layers and feed_forward_proj in config.json',
  };
}

export function clipTextWeightRules(c: ClipTextConfig): WeightRules {
  return {
    label: 'the clip_text_model config',
    ignore: [/(^|\.)position_ids$/, /^text_projection\./, /^vision_model\./, /^visual_projection\./, /^logit_scale$/],
    norms: NORMS,
    initStd: c.initializerRange,
    unexpectedFix: 'check num_hidden_layers in config.json',
  };
}

export function vaeWeightRules(c: AutoencoderKLConfig): WeightRules {
  return {
    label: 'the AutoencoderKL config',
    ignore: [/^encoder\./, /^quant_conv\./, ...(c.usePostQuantConv ? [] : [/^post_quant_conv\./])],
    norms: /(norm\d|group_norm|conv_norm_out)\.weight$/,
    initStd: 0.02,
    unexpectedFix: 'check block_out_channels, layers_per_block, mid_block_add_attention and use_post_quant_conv in vae/config.json',
  };
}
