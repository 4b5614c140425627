/**
 * A diffusers FluxPipeline folder: model_index.json names each component's library and class, and each component has
 * its own folder (transformer/, vae/, text_encoder/, text_encoder_2/, scheduler/, tokenizer/, tokenizer_2/). This reads
 * and cross-checks every config with zod; a wrong or missing file is a UserError naming it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { UserError, type DType } from '@fastkernels/core';
import { z } from 'zod';
import { parseClipTextConfig, type ClipTextConfig } from '../clip-config.js';
import { check, parseWith } from '../../../models/config-parse.js';
import { parseFluxConfig, type FluxTransformerConfig } from '../flux-config.js';
import { parseT5Config, type T5Config } from '../t5-config.js';
import { parseVaeConfig, type AutoencoderKLConfig } from '../vae/vae-config.js';
import { parseSchedulerConfig, type FlowMatchSchedulerConfig } from './scheduler.js';

export interface FluxPipelineConfig {
  /** The pipeline folder (model_index.json's); null for configs built in code (task cases). */
  readonly dir: string | null;
  readonly transformer: FluxTransformerConfig;
  readonly vae: AutoencoderKLConfig;
  /** CLIP-L: the pooled prompt vector. */
  readonly textEncoder: ClipTextConfig;
  /** T5-XXL: the prompt sequence. */
  readonly textEncoder2: T5Config;
  readonly scheduler: FlowMatchSchedulerConfig;
  /** A dtype a component config names (diffusers' components usually name none). */
  readonly dtype: DType | null;
}

/** The components FluxPipeline has and the classes it reads them as ([library, class] in model_index.json). */
export const FLUX_COMPONENTS = {
  transformer: 'FluxTransformer2DModel',
  vae: 'AutoencoderKL',
  text_encoder: 'CLIPTextModel',
  text_encoder_2: 'T5EncoderModel',
  scheduler: 'FlowMatchEulerDiscreteScheduler',
  tokenizer: ['CLIPTokenizer', 'CLIPTokenizerFast'],
  tokenizer_2: ['T5TokenizerFast', 'T5Tokenizer'],
} as const;

const entry = z.tuple([z.string().nullable(), z.string().nullable()]);
const ModelIndexSchema = z.looseObject({
  _class_name: z.string(),
  _diffusers_version: z.string().nullish(),
  ...Object.fromEntries(Object.keys(FLUX_COMPONENTS).map((k) => [k, entry])),
});

function readJson(file: string, what: string): unknown {
  if (!existsSync(file)) throw new UserError(`${file} is missing (${what})`, { fix: "a FluxPipeline folder mirrors diffusers' layout: model_index.json, transformer/, vae/, text_encoder/, text_encoder_2/, scheduler/, tokenizer/, tokenizer_2/" });
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UserError(`${file} is not valid JSON: ${(e as Error).message}`);
  }
}

/** Parse model_index.json (at `file`) and the component configs beside it. */
export function parseFluxPipelineConfig(raw: unknown, file: string): FluxPipelineConfig {
  const idx = parseWith(ModelIndexSchema, raw, file);
  check(idx._class_name === 'FluxPipeline', file, '_class_name', `_class_name '${idx._class_name}' is not FluxPipeline`);
  for (const [k, cls] of Object.entries(FLUX_COMPONENTS)) {
    const got = (idx as Record<string, unknown>)[k] as [string | null, string | null];
    const ok = typeof cls === 'string' ? got[1] === cls : (cls as readonly string[]).includes(got[1] ?? '');
    check(ok, file, k, `${k} is [${got.map((g) => JSON.stringify(g)).join(', ')}], expected class ${typeof cls === 'string' ? cls : cls.join(' or ')}`);
  }
  const dir = dirname(file);
  const at = (...p: string[]) => join(dir, ...p);
  const transformer = parseFluxConfig(readJson(at('transformer', 'config.json'), 'the FluxTransformer2DModel config'), at('transformer', 'config.json'));
  const vae = parseVaeConfig(readJson(at('vae', 'config.json'), 'the AutoencoderKL config'), at('vae', 'config.json'));
  const textEncoder = parseClipTextConfig(readJson(at('text_encoder', 'config.json'), 'the CLIPTextModel config'), at('text_encoder', 'config.json'));
  const textEncoder2 = parseT5Config(readJson(at('text_encoder_2', 'config.json'), 'the T5EncoderModel config'), at('text_encoder_2', 'config.json'));
  const scheduler = parseSchedulerConfig(readJson(at('scheduler', 'scheduler_config.json'), 'the FlowMatchEulerDiscreteScheduler config'), at('scheduler', 'scheduler_config.json'));
  const tf = at('transformer', 'config.json');
  check(transformer.jointAttentionDim === textEncoder2.dModel, tf, 'joint_attention_dim', `joint_attention_dim ${transformer.jointAttentionDim} is not text_encoder_2's d_model ${textEncoder2.dModel}`);
  check(transformer.pooledProjectionDim === textEncoder.hiddenSize, tf, 'pooled_projection_dim', `pooled_projection_dim ${transformer.pooledProjectionDim} is not text_encoder's hidden_size ${textEncoder.hiddenSize}`);
  check(transformer.inChannels === 4 * vae.latentChannels, tf, 'in_channels', `in_channels ${transformer.inChannels} is not 4 x the VAE's latent_channels ${vae.latentChannels} (2x2 packed latents)`);
  check(transformer.outChannels === transformer.inChannels, tf, 'out_channels', `out_channels ${transformer.outChannels} must equal in_channels ${transformer.inChannels} (the velocity of the packed latents)`);
  return { dir, transformer, vae, textEncoder, textEncoder2, scheduler, dtype: vae.dtype ?? textEncoder2.dtype ?? textEncoder.dtype ?? null };
}
