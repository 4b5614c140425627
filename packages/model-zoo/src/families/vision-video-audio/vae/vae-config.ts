/**
 * zod over diffusers' AutoencoderKL config.json (vae/config.json of black-forest-labs/FLUX.1-dev): the fields the
 * decoder reads, with diffusers' defaults. The encoder half is not built (text-to-image decodes only).
 */
import { z } from 'zod';
import { check, configDType, parseWith } from '../../../models/config-parse.js';
import type { DType } from '@fastkernels/core';

export interface AutoencoderKLConfig {
  readonly inChannels: number;
  readonly outChannels: number;
  readonly latentChannels: number;
  readonly blockOutChannels: readonly number[];
  readonly layersPerBlock: number;
  readonly normNumGroups: number;
  /** Latents are divided by it before decoding (after the shift is added back). */
  readonly scalingFactor: number;
  /** FLUX: 0.1159; SD / SDXL: none (0). */
  readonly shiftFactor: number;
  readonly usePostQuantConv: boolean;
  readonly midBlockAddAttention: boolean;
  /** 2 ** (len(block_out_channels) - 1): pixels per latent. */
  readonly vaeScaleFactor: number;
  readonly dtype: DType | null;
}

const VaeSchema = z.looseObject({
  _class_name: z.string().nullish(),
  in_channels: z.number().int().positive().default(3),
  out_channels: z.number().int().positive().default(3),
  latent_channels: z.number().int().positive().default(4),
  block_out_channels: z.array(z.number().int().positive()).min(1).default([64]),
  up_block_types: z.array(z.string()).nullish(),
  layers_per_block: z.number().int().positive().default(1),
  norm_num_groups: z.number().int().positive().default(32),
  act_fn: z.string().default('silu'),
  scaling_factor: z.number().positive().default(0.18215),
  shift_factor: z.number().nullish(),
  use_post_quant_conv: z.boolean().default(true),
  mid_block_add_attention: z.boolean().default(true),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
});

/** Parse a vae/config.json; a UserError naming the file and the field when one is wrong. */
export function parseVaeConfig(raw: unknown, file = 'vae/config.json'): AutoencoderKLConfig {
  const c = parseWith(VaeSchema, raw, file);
  check(!c._class_name || c._class_name === 'AutoencoderKL', file, '_class_name', `_class_name '${c._class_name}' is not AutoencoderKL`);
  check(c.act_fn === 'silu', file, 'act_fn', `act_fn '${c.act_fn}' is not supported (AutoencoderKL's decoders use silu)`);
  const ups = c.up_block_types ?? c.block_out_channels.map(() => 'UpDecoderBlock2D');
  check(ups.length === c.block_out_channels.length && ups.every((t) => t === 'UpDecoderBlock2D'), file, 'up_block_types', `up_block_types must be one UpDecoderBlock2D per block_out_channels entry (${c.block_out_channels.length})`);
  for (const ch of c.block_out_channels) check(ch % c.norm_num_groups === 0, file, 'block_out_channels', `block_out_channels entry ${ch} is not divisible by norm_num_groups ${c.norm_num_groups}`);
  return {
    inChannels: c.in_channels,
    outChannels: c.out_channels,
    latentChannels: c.latent_channels,
    blockOutChannels: [...c.block_out_channels],
    layersPerBlock: c.layers_per_block,
    normNumGroups: c.norm_num_groups,
    scalingFactor: c.scaling_factor,
    shiftFactor: c.shift_factor ?? 0,
    usePostQuantConv: c.use_post_quant_conv,
    midBlockAddAttention: c.mid_block_add_attention,
    vaeScaleFactor: 2 ** (c.block_out_channels.length - 1),
    dtype: configDType(c, file),
  };
}

/** black-forest-labs/FLUX.1-dev vae/config.json (the decoder's fields). */
export const FLUX1_DEV_VAE_RAW = {
  _class_name: 'AutoencoderKL',
  act_fn: 'silu',
  block_out_channels: [128, 256, 512, 512],
  in_channels: 3,
  latent_channels: 16,
  layers_per_block: 2,
  mid_block_add_attention: true,
  norm_num_groups: 32,
  out_channels: 3,
  sample_size: 1024,
  scaling_factor: 0.3611,
  shift_factor: 0.1159,
  up_block_types: ['UpDecoderBlock2D', 'UpDecoderBlock2D', 'UpDecoderBlock2D', 'UpDecoderBlock2D'],
  use_post_quant_conv: false,
  use_quant_conv: false,
} as const;
export const FLUX1_DEV_VAE: AutoencoderKLConfig = parseVaeConfig(FLUX1_DEV_VAE_RAW, 'black-forest-labs/FLUX.1-dev/vae/config.json');

/** A tiny FLUX-style VAE (2 blocks of 8 / 16 channels, groups of 4, 16 latent channels) for tests. */
export function tinyVaeConfig(over: Partial<AutoencoderKLConfig> = {}): AutoencoderKLConfig {
  const base: AutoencoderKLConfig = {
    inChannels: 3, outChannels: 3, latentChannels: 16, blockOutChannels: [8, 16], layersPerBlock: 1, normNumGroups: 4,
    scalingFactor: 0.3611, shiftFactor: 0.1159, usePostQuantConv: false, midBlockAddAttention: true, vaeScaleFactor: 2, dtype: null,
  };
  const c = { ...base, ...over };
  return { ...c, vaeScaleFactor: 2 ** (c.blockOutChannels.length - 1) };
}
