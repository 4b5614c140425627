/**
 * zod over diffusers' FluxTransformer2DModel config.json (transformer/config.json of black-forest-labs/FLUX.1-dev):
 * the fields the transformer reads, with diffusers' defaults.
 */
import { z } from 'zod';
import { check, parseWith } from '../../models/config-parse.js';

export interface FluxTransformerConfig {
  readonly patchSize: number;
  readonly inChannels: number;
  readonly outChannels: number;
  readonly numLayers: number;
  readonly numSingleLayers: number;
  readonly attentionHeadDim: number;
  readonly numAttentionHeads: number;
  /** numAttentionHeads * attentionHeadDim. */
  readonly innerDim: number;
  /** T5 hidden size fed to context_embedder. */
  readonly jointAttentionDim: number;
  /** CLIP pooled size fed to the text embedder. */
  readonly pooledProjectionDim: number;
  /** FLUX.1-dev (guidance-distilled): true; schnell: false. */
  readonly guidanceEmbeds: boolean;
  readonly axesDimsRope: readonly number[];
}

const FluxSchema = z.looseObject({
  _class_name: z.string().nullish(),
  patch_size: z.number().int().positive().default(1),
  in_channels: z.number().int().positive().default(64),
  out_channels: z.number().int().positive().nullish(),
  num_layers: z.number().int().nonnegative().default(19),
  num_single_layers: z.number().int().nonnegative().default(38),
  attention_head_dim: z.number().int().positive().default(128),
  num_attention_heads: z.number().int().positive().default(24),
  joint_attention_dim: z.number().int().positive().default(4096),
  pooled_projection_dim: z.number().int().positive().default(768),
  guidance_embeds: z.boolean().default(false),
  axes_dims_rope: z.array(z.number().int().positive()).default([16, 56, 56]),
});

/** Parse a FLUX transformer config.json; a UserError naming the file and field when one is wrong. */
export function parseFluxConfig(raw: unknown, file = 'transformer/config.json'): FluxTransformerConfig {
  const c = parseWith(FluxSchema, raw, file);
  check(!c._class_name || c._class_name === 'FluxTransformer2DModel', file, '_class_name', `_class_name '${c._class_name}' is not FluxTransformer2DModel`);
  check(c.patch_size === 1, file, 'patch_size', `patch_size ${c.patch_size} is not supported (FLUX packs 2x2 latents itself: patch_size 1)`);
  const rope = c.axes_dims_rope.reduce((a, b) => a + b, 0);
  check(rope === c.attention_head_dim, file, 'axes_dims_rope', `axes_dims_rope sums to ${rope}, not attention_head_dim ${c.attention_head_dim}`);
  check(c.axes_dims_rope.every((d) => d % 2 === 0), file, 'axes_dims_rope', `axes_dims_rope [${c.axes_dims_rope.join(', ')}] must be even`);
  return {
    patchSize: c.patch_size,
    inChannels: c.in_channels,
    outChannels: c.out_channels ?? c.in_channels,
    numLayers: c.num_layers,
    numSingleLayers: c.num_single_layers,
    attentionHeadDim: c.attention_head_dim,
    numAttentionHeads: c.num_attention_heads,
    innerDim: c.num_attention_heads * c.attention_head_dim,
    jointAttentionDim: c.joint_attention_dim,
    pooledProjectionDim: c.pooled_projection_dim,
    guidanceEmbeds: c.guidance_embeds,
    axesDimsRope: [...c.axes_dims_rope],
  };
}

/** black-forest-labs/FLUX.1-dev transformer/config.json. */
export const FLUX1_DEV_RAW = {
  _class_name: 'FluxTransformer2DModel',
  attention_head_dim: 128,
  axes_dims_rope: [16, 56, 56],
  guidance_embeds: true,
  in_channels: 64,
  joint_attention_dim: 4096,
  num_attention_heads: 24,
  num_layers: 19,
  num_single_layers: 38,
  patch_size: 1,
  pooled_projection_dim: 768,
} as const;
export const FLUX1_DEV: FluxTransformerConfig = parseFluxConfig(FLUX1_DEV_RAW, 'black-forest-labs/FLUX.1-dev/transformer/config.json');

/** A tiny FLUX transformer for CI cases and tests (2 double + 2 single blocks, 2 heads of 16). */
export function tinyFluxConfig(over: Partial<FluxTransformerConfig> = {}): FluxTransformerConfig {
  const base: FluxTransformerConfig = {
    patchSize: 1, inChannels: 16, outChannels: 16, numLayers: 2, numSingleLayers: 2, attentionHeadDim: 16, numAttentionHeads: 2, innerDim: 32,
    jointAttentionDim: 24, pooledProjectionDim: 12, guidanceEmbeds: true, axesDimsRope: [4, 6, 6],
  };
  const c = { ...base, ...over };
  return { ...c, innerDim: c.numAttentionHeads * c.attentionHeadDim };
}
