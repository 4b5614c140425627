import { DTYPE_INFO, F, Module, OpScope, Tensor, defineTask, type Tensor as T } from '@fastkernels/core';
import { fromInts, randn } from '../../../common/inputs.js';
import { stepIoFor, type GraphRuntime } from '../../../engine/device-io.js';
import type { GeneratedImage, ImageRequest, ImageTimings, PipelineComponent, PipelineModel } from '../../../engine/pipeline-model.js';
import { initFamilyParameters } from '../cases.js';
import { CLIP_L, tinyClipConfig } from '../clip-config.js';
import { FAMILY } from '../family.js';
import { FLUX1_DEV, tinyFluxConfig } from '../flux-config.js';
import { latentImageIds, packLatents, unpackLatents } from '../pipeline/latents.js';
import type { FluxPipelineConfig } from '../pipeline/model-index.js';
import { fluxPipelineReference, fluxPipelineWork } from '../pipeline/reference.js';
import { FLUX1_DEV_SCHEDULER_RAW, FlowMatchEulerDiscreteScheduler, calculateShift, fluxDefaultSigmas, parseSchedulerConfig } from '../pipeline/scheduler.js';
import { FluxTransformerGraphs } from '../pipeline/transformer-graph.js';
import { fluxTextToImage, loadFluxTokenizers, type FluxTokenizers } from '../pipeline/text-to-image.js';
import { T5_XXL, tinyT5Config } from '../t5-config.js';
import { FLUX1_DEV_VAE, tinyVaeConfig } from '../vae/vae-config.js';
import { AutoencoderKL } from '../vae/autoencoder_kl.js';
import { clipTextWeightRules, fluxTransformerWeightRules, t5WeightRules, vaeWeightRules } from '../weights.js';
import type { CLIPTextModel } from './clip_text_model.js';
import { FluxTransformer2DModel } from './flux_transformer.js';
import type { T5EncoderModel } from './t5_encoder.js';

/** Per-run settings of the denoising loop (the constructor's are the defaults). */
export interface FluxRunOptions {
  readonly steps?: number;
  readonly guidanceScale?: number;
  /** After each step: its index (from 0) and the packed latents [B, S, 4C] (borrowed: copy to keep). */
  readonly onStep?: (step: number, latents: T) => void;
  /**
   * Replay the transformer step from a graph of this runtime (captured on the first step of a shape, kept for later
   * runs of that shape; see pipeline/transformer-graph.ts); null or absent: the step runs eagerly.
   */
  readonly graphs?: GraphRuntime | null;
}

/**
 * diffusers' FluxPipeline (the original's L4 `flux`): CLIP's pooled prompt vector (text_encoder) and T5's prompt
 * sequence (text_encoder_2), the initial noise packed into 2x2-patch tokens, RoPE ids (zeros for the text, (0, row,
 * col) for the image), FlowMatchEulerDiscreteScheduler's sigmas shifted by mu(image tokens), the guidance embedding, one
 * FluxTransformer2DModel call and one Euler step per timestep, then the latents unpacked, unscaled and decoded by the
 * AutoencoderKL, postprocessed to [0, 1] as VaeImageProcessor does. Children are named as diffusers' component folders.
 * forward(clipInputIds [B, Sc] i64, t5InputIds [B, St] i64, latents [B, C, h, w] (the noise)) -> image [B, 3, H, W].
 */
export class FluxPipeline extends Module implements PipelineModel {
  readonly transformer: FluxTransformer2DModel;
  readonly vae: AutoencoderKL;
  readonly textEncoder: CLIPTextModel;
  readonly textEncoder2: T5EncoderModel;
  private tokenizers: FluxTokenizers | null = null;
  /** The transformer step's graphs and static buffers, for the runtime they were captured with. */
  private stepGraphs: { runtime: GraphRuntime; graphs: FluxTransformerGraphs } | null = null;
  constructor(
    readonly config: FluxPipelineConfig,
    readonly numInferenceSteps = 28,
    readonly guidanceScale = 3.5,
  ) {
    super();
    this.transformer = this.registerModule('transformer', new FluxTransformer2DModel(config.transformer));
    this.vae = this.registerModule('vae', new AutoencoderKL(config.vae));
    this.textEncoder = this.createModule('text_encoder', 'L4/clip_text_model', config.textEncoder);
    this.textEncoder2 = this.createModule('text_encoder_2', 'L4/t5_encoder', config.textEncoder2);
  }

  components(): readonly PipelineComponent[] {
    const c = this.config;
    return [
      { name: 'transformer', module: this.transformer, rules: fluxTransformerWeightRules(c.transformer) },
      { name: 'vae', module: this.vae, rules: vaeWeightRules(c.vae) },
      { name: 'text_encoder', module: this.textEncoder, rules: clipTextWeightRules(c.textEncoder) },
      { name: 'text_encoder_2', module: this.textEncoder2, rules: t5WeightRules(c.textEncoder2) },
    ];
  }

  loadAssets(dir: string): void {
    this.tokenizers = loadFluxTokenizers(dir, this.config);
  }

  generateImage(req: ImageRequest, onStep?: (step: number, steps: number, latents: T) => void): { images: GeneratedImage[]; timings: ImageTimings } {
    if (!this.tokenizers) throw new Error('FluxPipeline.generateImage: call loadAssets(dir) first (the tokenizers)');
    return fluxTextToImage(this, this.tokenizers, req, onStep);
  }

  /** encode_prompt: [T5 prompt_embeds [B, St, J], CLIP pooled_prompt_embeds [B, P]] (no attention masks, as FLUX). */
  encodePrompt(clipInputIds: T, t5InputIds: T): [T, T] {
    const [last, pooled] = this.textEncoder.forward(clipInputIds, null) as [T, T];
    last.dispose();
    return [this.textEncoder2.forward(t5InputIds, null), pooled];
  }

  /** The denoising loop over packed latents [B, S, 4C] of an h x w latent image -> the final packed latents. */
  denoise(packed: T, promptEmbeds: T, pooled: T, h: number, w: number, opts: FluxRunOptions = {}): T {
    const steps = opts.steps ?? this.numInferenceSteps;
    const [B, S] = packed.shape as [number, number];
    const dtype = packed.dtype;
    const sc = this.config.scheduler;
    const scheduler = new FlowMatchEulerDiscreteScheduler(sc);
    scheduler.setTimesteps(fluxDefaultSigmas(steps), calculateShift(S, sc.baseImageSeqLen, sc.maxImageSeqLen, sc.baseShift, sc.maxShift));
    const s = new OpScope();
    try {
      const g = opts.guidanceScale ?? this.guidanceScale;
      const guidance = this.config.transformer.guidanceEmbeds ? s.own(Tensor.fromArray(packed.backend, new Array<number>(B).fill(g), [B], 'f32', { device: packed.device })) : null;
      if (opts.graphs) {
        const out = this.denoiseGraphed(opts.graphs, packed, promptEmbeds, pooled, guidance, h, w, scheduler, steps, opts.onStep);
        s.dispose();
        return out;
      }
      const imgIds = s.own(latentImageIds(packed, h, w, dtype));
      const txtIds = s.own(Tensor.zeros(packed.backend, [promptEmbeds.shape[1]!, 3], dtype, { device: packed.device }));
      let x = packed;
      for (let i = 0; i < steps; i++) {
        // diffusers: t.expand(B).to(latents.dtype), then timestep / 1000 in that dtype
        const t = s.own(Tensor.fromArray(packed.backend, new Array<number>(B).fill(scheduler.timesteps[i]!), [B], 'f32', { device: packed.device }));
        const timestep = s.op('div', [s.op('to', [t], { dtype }), 1000]);
        const v = this.transformer.forward(x, promptEmbeds, pooled, timestep, imgIds, txtIds, guidance);
        const next = scheduler.step(v, x);
        v.dispose();
        if (x !== packed) x.dispose();
        x = next;
        opts.onStep?.(i, x);
      }
      s.dispose();
      return x === packed ? F.contiguous(packed) : x;
    } catch (e) {
      s.dispose();
      throw e;
    }
  }

  /**
   * denoise's loop with the transformer step replayed from a graph: the timesteps of the whole schedule made before the
   * loop ([steps, B], t / 1000 in the model dtype as the eager loop rounds them), each step a row copied into the static
   * timestep, the replay, and the Euler step written back into the static latents.
   */
  private denoiseGraphed(runtime: GraphRuntime, packed: T, promptEmbeds: T, pooled: T, guidance: T | null, h: number, w: number, scheduler: FlowMatchEulerDiscreteScheduler, steps: number, onStep: FluxRunOptions['onStep']): T {
    const s = new OpScope();
    try {
      const [B] = packed.shape as [number];
      const graphs = this.graphsFor(runtime, packed);
      const all = s.own(Tensor.fromArray(packed.backend, Array.from({ length: steps * B }, (_, k) => scheduler.timesteps[Math.floor(k / B)]!), [steps, B], 'f32', { device: packed.device }));
      const timesteps = s.op('div', [s.op('to', [all], { dtype: packed.dtype }), 1000]);
      const step = graphs.bind(packed, promptEmbeds, pooled, guidance, h, w);
      for (let i = 0; i < steps; i++) {
        const v = step.run(timesteps, i);
        const next = scheduler.step(v, step.latents);
        step.latents.copy_(next);
        next.dispose();
        onStep?.(i, step.latents);
      }
      return F.contiguous(step.latents);
    } finally {
      s.dispose();
    }
  }

  private graphsFor(runtime: GraphRuntime, like: T): FluxTransformerGraphs {
    if (this.stepGraphs?.runtime !== runtime) {
      this.releaseGraphs();
      this.stepGraphs = { runtime, graphs: new FluxTransformerGraphs(this.transformer, runtime, stepIoFor(like.backend)) };
    }
    return this.stepGraphs.graphs;
  }

  /** Counts of the transformer step's captures and replays (null before any graphed run). */
  get graphStats(): FluxTransformerGraphs['stats'] | null {
    return this.stepGraphs?.graphs.stats ?? null;
  }

  /** Release the step graphs, their pool and static buffers (the next graphed run captures again). */
  releaseGraphs(): void {
    this.stepGraphs?.graphs.dispose();
    this.stepGraphs = null;
  }

  override dispose(): void {
    this.releaseGraphs();
    super.dispose();
  }

  /** Packed latents -> the image in [0, 1]: unpack, / scaling_factor + shift_factor, vae.decode, (x / 2 + 0.5).clamp(0, 1). */
  decodeLatents(packed: T, h: number, w: number): T {
    const s = new OpScope();
    const z = s.own(this.vae.unscaleLatents(s.own(unpackLatents(packed, h, w))));
    const img = s.own(this.vae.decode(z));
    return s.keep([F.clamp(s.op('add', [s.op('div', [img, 2]), 0.5]), 0, 1)])[0]!;
  }

  forward(clipInputIds: T, t5InputIds: T, latents: T): T {
    return this.run(clipInputIds, t5InputIds, latents);
  }

  /** forward with per-run settings (steps, guidance, a per-step callback). */
  run(clipInputIds: T, t5InputIds: T, latents: T, opts: FluxRunOptions = {}): T {
    const [, , h, w] = latents.shape as [number, number, number, number];
    const s = new OpScope();
    try {
      const [embeds, pooled] = this.encodePrompt(clipInputIds, t5InputIds).map((t) => s.own(t)) as [T, T];
      const packed = s.own(packLatents(latents));
      const out = s.own(this.denoise(packed, embeds, pooled, h, w, opts));
      return s.keep([this.decodeLatents(out, h, w)])[0]!;
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** A tiny FLUX pipeline config (CI cases and tests): the tiny transformer, VAE, CLIP and T5, FLUX.1-dev's scheduler. */
export function tinyFluxPipelineConfig(): FluxPipelineConfig {
  const vae = tinyVaeConfig();
  const textEncoder = tinyClipConfig();
  const textEncoder2 = tinyT5Config();
  return {
    dir: null,
    transformer: tinyFluxConfig({ inChannels: 4 * vae.latentChannels, outChannels: 4 * vae.latentChannels, jointAttentionDim: textEncoder2.dModel, pooledProjectionDim: textEncoder.hiddenSize }),
    vae,
    textEncoder,
    textEncoder2,
    scheduler: parseSchedulerConfig(FLUX1_DEV_SCHEDULER_RAW),
    dtype: null,
  };
}

export const FLUX1_DEV_PIPELINE: FluxPipelineConfig = { dir: null, transformer: FLUX1_DEV, vae: FLUX1_DEV_VAE, textEncoder: CLIP_L, textEncoder2: T5_XXL, scheduler: parseSchedulerConfig(FLUX1_DEV_SCHEDULER_RAW), dtype: 'bf16' };

type Dims = { B: number; Sc: number; St: number; C: number; h: number; w: number; H: number; W: number };
const pcase = (name: string, dtype: 'f32' | 'bf16', cfg: FluxPipelineConfig, steps: number, B: number, Sc: number, St: number, size: number) => {
  const h = 2 * Math.floor(size / (cfg.vae.vaeScaleFactor * 2));
  return { name, dtype, dims: { B, Sc, St, C: cfg.vae.latentChannels, h, w: h, H: size, W: size }, init: [cfg, steps, 3.5] };
};
const TINY = tinyFluxPipelineConfig();

export const fluxTask = defineTask(
  {
    id: 'L4/flux',
    level: 4,
    className: 'FluxPipeline',
    family: [FAMILY],
    architectures: ['flux'],
    mirrors: 'diffusers.pipelines.flux.pipeline_flux.FluxPipeline',
    description: 'FLUX.1 text-to-image: CLIP pooled + T5 prompt embeddings, packed latents, the flow-matching Euler loop over FluxTransformer2DModel with guidance embedding, AutoencoderKL decode to [0, 1].',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed pipeline folder (FluxPipelineConfig: transformer, vae, text encoders, scheduler)' },
      { name: 'numInferenceSteps', type: 'int', optional: true, default: 28 },
      { name: 'guidanceScale', type: 'float', optional: true, default: 3.5 },
    ],
    inputs: [
      { name: 'clipInputIds', dtype: 'i64', shape: ['B', 'Sc'], doc: 'CLIP tokens padded to model_max_length (77)' },
      { name: 't5InputIds', dtype: 'i64', shape: ['B', 'St'], doc: 'T5 tokens padded to max_sequence_length (512)' },
      { name: 'latents', dtype: 'act', shape: ['B', 'C', 'h', 'w'], doc: 'the initial noise N(0, 1), unpacked' },
    ],
    outputs: [{ name: 'image', dtype: 'act', shape: ['B', 3, 'H', 'W'], doc: 'in [0, 1] (output_type "pt")' }],
    // bf16 activations through two transformer steps and the VAE, the scalar conditioning rounded as diffusers does
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L4/clip_text_model', 'L4/t5_encoder', 'L1/flux_pos_embed', 'L2/timestep_embedding', 'L3/flux_transformer_block', 'L2/ada_layer_norm_continuous', 'L1/linear', 'L2/sdxl_resnet', 'L2/sdxl_upsample', 'L1/dense_attention'],
    cases: {
      ci: [pcase('tiny-2-steps-f32', 'f32', TINY, 2, 1, 6, 7, 8), pcase('tiny-b2-bf16', 'bf16', TINY, 2, 2, 5, 4, 12)],
      production: [pcase('flux1-dev-1024-28', 'bf16', FLUX1_DEV_PIPELINE, 28, 1, 77, 512, 1024), pcase('flux1-dev-512-28', 'bf16', FLUX1_DEV_PIPELINE, 28, 1, 77, 512, 512)],
    },
  },
  {
    baseline: FluxPipeline,
    makeInputs: (c, ctx, rng) => {
      const cfg = c.init[0] as FluxPipelineConfig;
      const { B, Sc, St, C, h, w } = c.dims as Dims;
      const ids = (n: number, vocab: number) => fromInts(ctx, Array.from({ length: B * n }, () => rng.int(0, vocab)), [B, n], 'i64');
      return [ids(Sc, cfg.textEncoder.vocabSize), ids(St, cfg.textEncoder2.vocabSize), randn(ctx, rng, [B, C, h, w], c.dtype)];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([clip, t5, latents], P, c) => [fluxPipelineReference(clip!, t5!, latents!, P, c.init[0] as FluxPipelineConfig, c.init[1] as number, c.init[2] as number, undefined, c.dtype)],
    work: (c) => {
      const { B, Sc, St, h, w } = c.dims as Dims;
      return fluxPipelineWork(c.init[0] as FluxPipelineConfig, c.init[1] as number, B, Sc, St, h, w, DTYPE_INFO[c.dtype].itemsize);
    },
  },
);
