/**
 * FluxPipeline on the CPU: every denoising step's latents and the final image against the float64 pipeline of the
 * same modules; the tiny-flux fixture folder (diffusers' layout) loaded through the model registry, generating the
 * same image for the same seed and the float64 run's pixels; per-component checkpoints in diffusers / HF names
 * loading back; the packing, tokenisation and folder errors.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, Tensor, compareTensors, hostArray, toHostArray, withContext, type ExecutionContext, type HostArray } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { userError } from '../../../../test/user-error.js';
import { fromInts, randn } from '../../../common/inputs.js';
import { baselineRegistry } from '../../../index.js';
import { loadPipelineModel, writeRandomPipelineCheckpoint } from '../../../models/load-pipeline.js';
import { SafetensorsFile } from '../../../weights/safetensors.js';
import { initFamilyParameters } from '../cases.js';
import { FluxPipeline, tinyFluxPipelineConfig } from '../L4/flux.js';
import { latentSize, packLatents, packLatentsHost, unpackLatents, unpackLatentsHost } from './latents.js';
import { fluxPipelineReference } from './reference.js';
import { encodePadded, loadFluxTokenizers } from './text-to-image.js';

const FIXTURE = join(import.meta.dirname, '../../../../fixtures/tiny-flux');
const tmp = mkdtempSync(join(tmpdir(), 'fk-flux-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const ctxOf = (): ExecutionContext => ({ backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() });
const hostParams = (m: FluxPipeline) => new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);

describe('FluxPipeline', () => {
  it('each step of the denoising loop and the image match the float64 pipeline (f32, 3 steps)', () => {
    const ctx = ctxOf();
    withContext(ctx, () => {
      const cfg = tinyFluxPipelineConfig();
      const pipe = new FluxPipeline(cfg, 3, 3.5);
      const rng = new Rng(11);
      initFamilyParameters(pipe, rng);
      const clip = fromInts(ctx, Array.from({ length: 6 }, () => rng.int(0, cfg.textEncoder.vocabSize)), [1, 6]);
      const t5 = fromInts(ctx, Array.from({ length: 7 }, () => rng.int(0, cfg.textEncoder2.vocabSize)), [1, 7]);
      const noise = randn(ctx, rng, [1, cfg.vae.latentChannels, 4, 6], 'f32');
      const steps: HostArray[] = [];
      const image = pipe.run(clip, t5, noise, { onStep: (_, x) => steps.push(toHostArray(x)) });
      expect(image.shape).toEqual([1, 3, 8, 12]);
      const refSteps: HostArray[] = [];
      const ref = fluxPipelineReference(toHostArray(clip), toHostArray(t5), toHostArray(noise), hostParams(pipe), cfg, 3, 3.5, (_, x) => refSteps.push(x));
      expect(steps.length).toBe(3);
      steps.forEach((s, i) => expect(maxDiff(s.data, refSteps[i]!.data), `step ${i}`).toBeLessThan(1e-4));
      // the latents move: each step differs from the last
      expect(maxDiff(steps[0]!.data, steps[1]!.data)).toBeGreaterThan(1e-3);
      const cmp = compareTensors(image, ref, { atol: 1e-4, rtol: 1e-3 });
      expect(cmp.status, `maxAbs ${cmp.maxAbsError}`).toBe('PASSED');
      for (const t of [clip, t5, noise, image]) t.dispose();
      pipe.dispose();
    });
  });

  it('packs 2x2 latent patches as _pack_latents and unpacks them back', () => {
    const ctx = ctxOf();
    const x = randn(ctx, new Rng(2), [2, 3, 4, 6], 'f32');
    const p = packLatents(x);
    expect(p.shape).toEqual([2, 6, 12]);
    expect([...toHostArray(p).data]).toEqual([...packLatentsHost(toHostArray(x)).data]);
    // token 1 (row 0, col 1) holds channel 0's 2x2 patch at columns 2..3 first
    const h = toHostArray(x).data;
    expect([...toHostArray(p).data.subarray(12, 16)]).toEqual([h[2], h[3], h[8], h[9]]);
    const back = unpackLatents(p, 4, 6);
    expect([...toHostArray(back).data]).toEqual([...h]);
    expect([...unpackLatentsHost(packLatentsHost(toHostArray(x)), 4, 6).data]).toEqual([...h]);
    for (const t of [x, p, back]) t.dispose();
    expect(latentSize(1024, 8)).toBe(128);
    expect(userError(() => latentSize(1000, 8)).message).toMatch(/not a multiple of 16.*/);
  });
});

describe('the tiny-flux fixture folder', () => {
  const opts = () => ({ backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' as const });

  it('generates the same image for the same seed, another for another seed, equal to the float64 run', () => {
    const loaded = loadPipelineModel(FIXTURE, opts());
    try {
      expect(loaded.architecture.name).toBe('flux');
      expect(Object.values(loaded.weights)).toEqual(['random', 'random', 'random', 'random']);
      const req = { prompt: 'a red cube', height: 16, width: 12, steps: 2, seed: 7, maxSequenceLength: 10 };
      const stepsSeen: number[] = [];
      const a = loaded.model.generateImage(req, (i, n) => stepsSeen.push(i * 10 + n));
      expect(stepsSeen).toEqual([12, 22]);
      expect(a.timings.stepMs.length).toBe(2);
      const [img] = a.images;
      expect([img!.width, img!.height, img!.rgb.length]).toEqual([12, 16, 12 * 16 * 3]);
      expect(new Set(img!.rgb).size).toBeGreaterThan(8);
      expect(loaded.model.generateImage(req).images[0]!.rgb).toEqual(img!.rgb);
      expect(loaded.model.generateImage({ ...req, seed: 8 }).images[0]!.rgb).not.toEqual(img!.rgb);

      // the float64 pipeline on the same tokens and noise gives the same pixels (within one level of 255)
      const pipe = loaded.model as FluxPipeline;
      const tok = loadFluxTokenizers(FIXTURE, pipe.config);
      const clip = encodePadded(tok.clip, req.prompt, 16);
      const t5 = encodePadded(tok.t5, req.prompt, 10);
      const C = pipe.config.vae.latentChannels;
      const noise = hostArray([1, C, 8, 6], new Rng(req.seed).fillNormal(C * 48, 1));
      const ref = fluxPipelineReference(hostArray([1, 16], clip), hostArray([1, 10], t5), noise, hostParams(pipe), pipe.config, 2, 3.5);
      const refRgb = Array.from({ length: 16 * 12 * 3 }, (_, k) => Math.round(ref.data[(k % 3) * 192 + Math.floor(k / 3)]! * 255));
      expect(maxDiff(img!.rgb, refRgb)).toBeLessThanOrEqual(1);
    } finally {
      loaded.model.dispose();
    }
  });

  it('loads per-component checkpoints in diffusers / HF names (the values random init draws for the seed)', () => {
    const dir = join(tmp, 'ckpt');
    cpSync(FIXTURE, dir, { recursive: true });
    const random = loadPipelineModel(FIXTURE, { ...opts(), initSeed: 5 });
    try {
      writeRandomPipelineCheckpoint(random.model, dir, 5, 'f32');
      const names = (sub: string) => {
        const f = SafetensorsFile.open(join(dir, sub, 'model.safetensors'));
        const n = [...f.tensors.keys()];
        f.close();
        return n;
      };
      expect(names('vae')).toContain('decoder.up_blocks.0.upsamplers.0.conv.weight');
      expect(names('vae')).toContain('decoder.mid_block.attentions.0.to_q.weight');
      expect(names('transformer')).toContain('transformer_blocks.0.attn.to_q.weight');
      expect(names('text_encoder')).toContain('text_model.encoder.layers.1.mlp.fc2.weight');
      expect(names('text_encoder_2')).toContain('encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight');
      const loaded = loadPipelineModel(dir, opts());
      try {
        expect(Object.values(loaded.weights)).toEqual(['checkpoint', 'checkpoint', 'checkpoint', 'checkpoint']);
        const a = new Map(random.model.namedParameters());
        for (const [k, p] of loaded.model.namedParameters()) expect(maxDiff(toHostArray(p).data, toHostArray(a.get(k)!).data), k).toBe(0);
      } finally {
        loaded.model.dispose();
      }
    } finally {
      random.model.dispose();
    }
  });

  it('pads and truncates prompts as FluxPipeline asks the tokenizers to', () => {
    const cfg = tinyFluxPipelineConfig();
    const tok = loadFluxTokenizers(FIXTURE, { ...cfg, textEncoder: { ...cfg.textEncoder, vocabSize: 258 }, textEncoder2: { ...cfg.textEncoder2, vocabSize: 259 } });
    expect(tok.clip.modelMaxLength).toBe(16);
    expect(encodePadded(tok.clip, 'ab', 6)).toEqual([256, 97, 98, 257, 257, 257]);
    expect(encodePadded(tok.clip, 'abcdefgh', 6)).toEqual([256, 97, 98, 99, 100, 257]);
    expect(encodePadded(tok.t5, 'ab', 5)).toEqual([100, 101, 1, 0, 0]);
    expect(encodePadded(tok.t5, 'abcdefgh', 4)).toEqual([100, 101, 102, 1]);
  });

  it('a broken folder is a UserError naming the file and the fix', () => {
    const dir = join(tmp, 'broken');
    cpSync(FIXTURE, dir, { recursive: true });
    rmSync(join(dir, 'vae', 'config.json'));
    expect(userError(() => loadPipelineModel(dir, opts())).message).toMatch(/broken\/vae\/config.json is missing \(the AutoencoderKL config\)/);
    cpSync(join(FIXTURE, 'vae'), join(dir, 'vae'), { recursive: true });
    writeFileSync(join(dir, 'transformer', 'config.json'), JSON.stringify({ in_channels: 32, joint_attention_dim: 32, pooled_projection_dim: 32, num_layers: 1, num_single_layers: 1, attention_head_dim: 16, num_attention_heads: 2, axes_dims_rope: [4, 6, 6] }));
    expect(userError(() => loadPipelineModel(dir, opts())).message).toMatch(/in_channels 32 is not 4 x the VAE's latent_channels 16 .*transformer\/config.json/);
    cpSync(join(FIXTURE, 'transformer'), join(dir, 'transformer'), { recursive: true });
    rmSync(join(dir, 'tokenizer_2', 'tokenizer.json'));
    const e = userError(() => loadPipelineModel(dir, opts()));
    expect(e.message).toMatch(/tokenizer_2\/tokenizer.json is missing/);
    expect(e.details.fix).toMatch(/save_pretrained/);
    writeFileSync(join(dir, 'model_index.json'), JSON.stringify({ _class_name: 'StableDiffusionXLPipeline' }));
    expect(userError(() => loadPipelineModel(dir, opts())).message).toMatch(/no registered model reads architectures \[StableDiffusionXLPipeline\]/);
    expect(userError(() => loadPipelineModel(join(tmp, 'nowhere'), opts())).message).toMatch(/no model_index.json in/);
  });
});
