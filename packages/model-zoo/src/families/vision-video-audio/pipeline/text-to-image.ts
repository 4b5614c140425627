/**
 * The FLUX text-to-image runner: the prompt through both tokenizers (padded / truncated as FluxPipeline asks them:
 * CLIP to model_max_length, T5 to max_sequence_length), seeded N(0, 1) noise, the pipeline's denoising loop with a
 * per-step callback (the transformer step replayed from a CUDA graph where the backend has them, unless the request
 * says graphs: false), VAE decode (eager), and VaeImageProcessor's postprocess to 8-bit RGB ((x * 255).round(), x in [0, 1]).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Rng, Tensor, UserError, toHostArray } from '@fastkernels/core';
import { z } from 'zod';
import { stepIoFor } from '../../../engine/device-io.js';
import type { GeneratedImage, ImageRequest, ImageTimings } from '../../../engine/pipeline-model.js';
import { hasSlowClipFiles, loadSlowClipTokenizer } from '../../../tokenizer/clip-slow.js';
import { loadTokenizer, type TextTokenizer } from '../../../tokenizer/tokenizer.js';
import type { FluxPipeline } from '../L4/flux.js';
import { latentSize, packLatents } from './latents.js';
import type { FluxPipelineConfig } from './model-index.js';

/** A tokenizer with the padding FluxPipeline uses. */
export interface PaddedTokenizer {
  readonly tokenizer: TextTokenizer;
  readonly padId: number;
  /** tokenizer_config.json's model_max_length (CLIP: 77), if any. */
  readonly modelMaxLength: number | null;
}

export interface FluxTokenizers {
  /** tokenizer/ (CLIP): padded to model_max_length. */
  readonly clip: PaddedTokenizer;
  /** tokenizer_2/ (T5): padded to max_sequence_length. */
  readonly t5: PaddedTokenizer;
}

const TokenizerConfigSchema = z.looseObject({
  pad_token: z.union([z.string(), z.looseObject({ content: z.string() })]).nullish(),
  model_max_length: z.number().nullish(),
});

function loadPadded(dir: string, sub: string, vocabSize: number): PaddedTokenizer {
  const folder = join(dir, sub);
  const json = join(folder, 'tokenizer.json');
  // CLIP's slow files (FLUX.1-dev ships tokenizer/ as vocab.json + merges.txt): CLIPTokenizerFast's tokenizer built here
  if (sub === 'tokenizer' && hasSlowClipFiles(folder)) {
    const slow = loadSlowClipTokenizer(folder, vocabSize);
    return { tokenizer: slow.tokenizer, padId: slow.tokenizer.tokenToId(slow.specials.pad_token)!, modelMaxLength: slow.modelMaxLength };
  }
  if (!existsSync(json)) {
    throw new UserError(`${json} is missing`, {
      fix:
        sub === 'tokenizer'
          ? `CLIP's tokenizer is read from tokenizer.json or from vocab.json + merges.txt (+ tokenizer_config.json): copy the model's ${sub}/ folder whole`
          : `the pipeline reads fast tokenizers: in Python, AutoTokenizer.from_pretrained('<model>', subfolder='${sub}').save_pretrained('${folder}') writes tokenizer.json beside spiece.model`,
    });
  }
  const tokenizer = loadTokenizer(folder, vocabSize)!;
  const cfgFile = join(folder, 'tokenizer_config.json');
  let raw: unknown = {};
  if (existsSync(cfgFile)) {
    try {
      raw = JSON.parse(readFileSync(cfgFile, 'utf8'));
    } catch (e) {
      throw new UserError(`${cfgFile} is not valid JSON: ${(e as Error).message}`);
    }
  }
  const parsed = TokenizerConfigSchema.safeParse(raw);
  if (!parsed.success) throw new UserError(`invalid field ${parsed.error.issues[0]!.path.join('.')} in ${cfgFile}: ${parsed.error.issues[0]!.message}`);
  const pad = parsed.data.pad_token;
  const padText = pad == null ? undefined : typeof pad === 'string' ? pad : pad.content;
  const padId = padText === undefined ? undefined : tokenizer.tokenToId(padText);
  if (padId === undefined) throw new UserError(`${cfgFile} names no pad_token the tokenizer knows (${JSON.stringify(padText ?? null)})`, { field: 'pad_token', fix: 'FluxPipeline pads prompts to a fixed length: set pad_token (CLIP: <|endoftext|>, T5: <pad>)' });
  // transformers stores "no limit" as a huge number
  const mml = parsed.data.model_max_length;
  return { tokenizer, padId, modelMaxLength: mml && mml < 1e9 ? mml : null };
}

/**
 * tokenizer/ and tokenizer_2/ of a pipeline folder (tokenizer.json + tokenizer_config.json each; CLIP's tokenizer/ may
 * instead be the slow vocab.json + merges.txt, see tokenizer/clip-slow.ts).
 */
export function loadFluxTokenizers(dir: string, c: FluxPipelineConfig): FluxTokenizers {
  return { clip: loadPadded(dir, 'tokenizer', c.textEncoder.vocabSize), t5: loadPadded(dir, 'tokenizer_2', c.textEncoder2.vocabSize) };
}

/**
 * padding="max_length", truncation=True, add_special_tokens=True: the template's specials kept around the first
 * maxLength - specials tokens of the text, then pads on the right.
 */
export function encodePadded(t: PaddedTokenizer, text: string, maxLength: number): number[] {
  const full = t.tokenizer.encode(text, true);
  let ids = full;
  if (full.length > maxLength) {
    const body = t.tokenizer.encode(text, false);
    const specials = full.length - body.length;
    // the template's specials sit before and after the text (CLIP: BOS A EOS; T5: A EOS)
    let pre = 0;
    while (pre < specials && full[pre] !== body[0]) pre++;
    const post = specials - pre;
    ids = [...full.slice(0, pre), ...body.slice(0, Math.max(0, maxLength - specials)), ...full.slice(full.length - post)];
  }
  return [...ids, ...new Array<number>(maxLength - ids.length).fill(t.padId)];
}

/** VaeImageProcessor.postprocess(output_type='pil') of images [B, 3, H, W] in [0, 1]: float32 x 255, round half to even. */
export function toRgb8(image: Tensor): GeneratedImage[] {
  const [B, C, H, W] = image.shape as [number, number, number, number];
  const data = toHostArray(image).data;
  const out: GeneratedImage[] = [];
  for (let b = 0; b < B; b++) {
    const rgb = new Uint8Array(H * W * 3);
    for (let c = 0; c < 3; c++)
      for (let p = 0; p < H * W; p++) {
        const v = Math.fround(Math.fround(data[(b * C + Math.min(c, C - 1)) * H * W + p]!) * 255);
        const r = Math.round(v);
        rgb[p * 3 + c] = r - v === 0.5 && r % 2 === 1 ? r - 1 : r; // numpy rounds halves to even
      }
    out.push({ width: W, height: H, rgb });
  }
  return out;
}

/** Generate one image for a prompt (see the file comment); onStep(step from 1, steps, the packed latents) after each denoising step. */
export function fluxTextToImage(pipe: FluxPipeline, tok: FluxTokenizers, req: ImageRequest, onStep?: (step: number, steps: number, latents: Tensor) => void): { images: GeneratedImage[]; timings: ImageTimings } {
  const c = pipe.config;
  const h = latentSize(req.height, c.vae.vaeScaleFactor, '--size');
  const w = latentSize(req.width, c.vae.vaeScaleFactor, '--size');
  const maxSeq = req.maxSequenceLength ?? 512;
  if (!Number.isInteger(maxSeq) || maxSeq < 1 || maxSeq > 512) throw new UserError(`max_sequence_length ${maxSeq} must be an integer in 1..512 (FluxPipeline's limit)`, { field: '--max-sequence-length' });
  const clipLen = tok.clip.modelMaxLength ?? c.textEncoder.maxPositionEmbeddings;
  const dev = pipe.transformer.xEmbedder.weight;
  const backend = dev.backend;
  const sync = () => backend.synchronize(dev.device);
  const dtype = dev.dtype;
  const ids = (v: number[]) => Tensor.fromArray(backend, v, [1, v.length], 'i64', { device: dev.device });
  const owned: Tensor[] = [];
  const own = <T extends Tensor>(t: T): T => (owned.push(t), t);
  try {
    let t0 = performance.now();
    const [embeds, pooled] = pipe.encodePrompt(own(ids(encodePadded(tok.clip, req.prompt, clipLen))), own(ids(encodePadded(tok.t5, req.prompt, maxSeq)))).map(own) as [Tensor, Tensor];
    sync();
    const encodeMs = performance.now() - t0;
    const noise = own(Tensor.fromArray(backend, new Rng(req.seed).fillNormal(c.vae.latentChannels * h * w, 1), [1, c.vae.latentChannels, h, w], dtype, { device: dev.device }));
    const packed = own(packLatents(noise));
    const stepMs: number[] = [];
    t0 = performance.now();
    const final = own(
      pipe.denoise(packed, embeds, pooled, h, w, {
        steps: req.steps,
        ...(req.guidanceScale !== undefined ? { guidanceScale: req.guidanceScale } : {}),
        graphs: req.graphs === false ? null : typeof req.graphs === 'object' ? req.graphs : stepIoFor(backend).graphs,
        onStep: (i, x) => {
          sync();
          const now = performance.now();
          stepMs.push(now - t0);
          t0 = now;
          onStep?.(i + 1, req.steps, x);
        },
      }),
    );
    t0 = performance.now();
    const image = own(pipe.decodeLatents(final, h, w));
    const images = toRgb8(image);
    return { images, timings: { encodeMs, stepMs, decodeMs: performance.now() - t0 } };
  } finally {
    for (const t of owned) t.dispose();
  }
}
