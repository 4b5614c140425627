import { DTYPE_INFO, F, Module, OpScope, Tensor, defineTask, hostArray, type HostArray } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { SiLU } from '../../../layers/activation.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { FLUX1_DEV } from '../flux-config.js';
import { linear, param, silu, sub } from '../host-math.js';

/**
 * diffusers' Timesteps(num_channels, flip_sin_to_cos, downscale_freq_shift, scale): get_timestep_embedding of
 * timesteps [B] -> [B, C] float32: t * exp(-ln(max_period) k / (C/2 - shift)) for k < C/2, [sin, cos] (or [cos, sin]
 * flipped). The frequencies are host constants (float64, rounded to float32 as torch's arange / exp give them).
 */
export class Timesteps extends Module {
  constructor(
    readonly numChannels: number,
    readonly flipSinToCos: boolean,
    readonly downscaleFreqShift: number,
    readonly scale = 1,
  ) {
    super();
    if (numChannels % 2 !== 0) throw new RangeError(`Timesteps: num_channels ${numChannels} must be even here (odd sizes zero-pad in diffusers)`);
  }

  static frequencies(numChannels: number, downscaleFreqShift: number, maxPeriod = 10000): number[] {
    const half = numChannels / 2;
    return Array.from({ length: half }, (_, k) => Math.exp((-Math.log(maxPeriod) * k) / (half - downscaleFreqShift)));
  }

  /** The frequencies [1, C/2] on the timesteps' device, uploaded once (a CUDA graph of the step may not copy from the host). */
  private freqs: Tensor | null = null;
  private frequencyTable(like: Tensor, half: number): Tensor {
    if (this.freqs && (this.freqs.backend !== like.backend || this.freqs.device !== like.device)) this.releaseFrequencies();
    this.freqs ??= Tensor.fromArray(like.backend, Timesteps.frequencies(this.numChannels, this.downscaleFreqShift), [1, half], 'f32', { device: like.device });
    return this.freqs;
  }

  private releaseFrequencies(): void {
    this.freqs?.dispose();
    this.freqs = null;
  }

  override dispose(): void {
    this.releaseFrequencies();
    super.dispose();
  }

  forward(timesteps: Tensor): Tensor {
    const B = timesteps.shape[0]!;
    const half = this.numChannels / 2;
    const s = new OpScope();
    const t = s.own(s.op('to', [timesteps], { dtype: 'f32' }).view(B, 1));
    const freqs = this.frequencyTable(timesteps, half);
    let arg = s.op('mul', [t, freqs]);
    if (this.scale !== 1) arg = s.op('mul', [arg, this.scale]);
    const sin = s.op('sin', [arg]);
    const cos = s.op('cos', [arg]);
    return s.keep([F.cat(this.flipSinToCos ? [cos, sin] : [sin, cos], 1)])[0];
  }
}

/** diffusers' TimestepEmbedding(in_channels, time_embed_dim, act_fn='silu', out_dim=None): linear_1, silu, linear_2. */
export class TimestepEmbedding extends Module {
  readonly linear1: Linear;
  readonly act: SiLU;
  readonly linear2: Linear;
  constructor(
    readonly inChannels: number,
    readonly timeEmbedDim: number,
    actFn = 'silu',
    outDim: number | null = null,
  ) {
    super();
    if (actFn !== 'silu') throw new RangeError(`TimestepEmbedding: act_fn '${actFn}' is not supported (silu)`);
    this.linear1 = this.createModule('linear_1', 'L1/linear', inChannels, timeEmbedDim, true);
    this.act = this.registerModule('act', createLayer('SiLU'));
    this.linear2 = this.createModule('linear_2', 'L1/linear', timeEmbedDim, outDim ?? timeEmbedDim, true);
  }

  forward(sample: Tensor): Tensor {
    const h = this.linear1.forward(sample);
    const a = this.act.forward(h);
    h.dispose();
    const y = this.linear2.forward(a);
    a.dispose();
    return y;
  }
}

/** diffusers' PixArtAlphaTextProjection(in_features, hidden_size, out_features=None, act_fn): linear_1, act, linear_2 (FLUX: silu). */
export class PixArtAlphaTextProjection extends TimestepEmbedding {
  constructor(inFeatures: number, hiddenSize: number, outFeatures: number | null = null, actFn = 'silu') {
    super(inFeatures, hiddenSize, actFn, outFeatures);
  }
}

/**
 * diffusers' CombinedTimestepGuidanceTextProjEmbeddings (FLUX.1-dev's time_text_embed): Timesteps(256, flip, 0) of the
 * timestep and of the guidance, each through its TimestepEmbedding(256, D), plus the pooled CLIP projection through
 * PixArtAlphaTextProjection(P, D, silu): temb = t_emb + g_emb + text_emb. forward(timestep [B], guidance [B],
 * pooledProjection [B, P]) -> [B, D]; the sinusoids are cast to the pooled projection's dtype, as diffusers does.
 * CombinedTimestepTextProjEmbeddings (schnell: no guidance) is the same with guidance null.
 */
export class CombinedTimestepGuidanceTextProjEmbeddings extends Module {
  readonly timeProj: Timesteps;
  readonly timestepEmbedder: TimestepEmbedding;
  readonly guidanceEmbedder: TimestepEmbedding | null;
  readonly textEmbedder: PixArtAlphaTextProjection;
  constructor(
    readonly embeddingDim: number,
    readonly pooledProjectionDim: number,
    guidance = true,
  ) {
    super();
    this.timeProj = this.registerModule('time_proj', new Timesteps(256, true, 0));
    this.timestepEmbedder = this.registerModule('timestep_embedder', new TimestepEmbedding(256, embeddingDim));
    this.guidanceEmbedder = guidance ? this.registerModule('guidance_embedder', new TimestepEmbedding(256, embeddingDim)) : null;
    this.textEmbedder = this.registerModule('text_embedder', new PixArtAlphaTextProjection(pooledProjectionDim, embeddingDim, null, 'silu'));
  }

  private embed(t: Tensor, embedder: TimestepEmbedding, dtype: Tensor['dtype']): Tensor {
    const p = this.timeProj.forward(t);
    const pc = F.to(p, dtype);
    p.dispose();
    const e = embedder.forward(pc);
    pc.dispose();
    return e;
  }

  forward(timestep: Tensor, guidance: Tensor | null, pooledProjection: Tensor): Tensor {
    const s = new OpScope();
    let temb = s.own(this.embed(timestep, this.timestepEmbedder, pooledProjection.dtype));
    if (this.guidanceEmbedder) {
      if (!guidance) throw new RangeError('CombinedTimestepGuidanceTextProjEmbeddings: this model embeds guidance (guidance_embeds): pass a guidance tensor');
      temb = s.op('add', [temb, s.own(this.embed(guidance, this.guidanceEmbedder, pooledProjection.dtype))]);
    }
    const text = s.own(this.textEmbedder.forward(pooledProjection));
    return s.keep([F.add(temb, text)])[0];
  }
}

/** Golden float64 timestep sinusoids [B, C] (flip: cos first). */
export function timestepsReference(t: ArrayLike<number>, C: number, flip: boolean, shift: number): Float64Array {
  const half = C / 2;
  const B = t.length;
  const out = new Float64Array(B * C);
  for (let b = 0; b < B; b++)
    for (let k = 0; k < half; k++) {
      const a = t[b]! * Math.exp((-Math.log(10000) * k) / (half - shift));
      out[b * C + (flip ? half : 0) + k] = Math.sin(a);
      out[b * C + (flip ? 0 : half) + k] = Math.cos(a);
    }
  return out;
}

/** Golden float64 CombinedTimestepGuidanceTextProjEmbeddings. */
export function timeTextEmbedReference(t: HostArray, g: HostArray | null, pooled: HostArray, params: ReadonlyMap<string, HostArray>): HostArray {
  const B = t.data.length;
  const mlp = (x: Float64Array, p: ReadonlyMap<string, HostArray>, rows: number) =>
    linear(linear(x, rows, param(p, 'linear_1.weight'), param(p, 'linear_1.bias')).map(silu), rows, param(p, 'linear_2.weight'), param(p, 'linear_2.bias'));
  const te = mlp(timestepsReference(t.data, 256, true, 0), sub(params, 'timestep_embedder'), B);
  const D = te.length / B;
  const ge = g ? mlp(timestepsReference(g.data, 256, true, 0), sub(params, 'guidance_embedder'), B) : new Float64Array(B * D);
  const xe = mlp(pooled.data, sub(params, 'text_embedder'), B);
  return hostArray([B, D], te.map((v, i) => v + ge[i]! + xe[i]!));
}

const embCase = (name: string, dtype: 'f32' | 'bf16', B: number, D: number, P: number) => ({ name, dtype, dims: { B, D, P }, init: [D, P] });

export const timestepEmbeddingTask = defineTask(
  {
    id: 'L2/timestep_embedding',
    level: 2,
    className: 'CombinedTimestepGuidanceTextProjEmbeddings',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video', 'sdxl'],
    mirrors: 'diffusers.models.embeddings.CombinedTimestepGuidanceTextProjEmbeddings',
    description: "FLUX's conditioning vector: sinusoidal timestep and guidance embeddings through their MLPs plus the pooled-text projection. Timesteps, TimestepEmbedding and PixArtAlphaTextProjection live in the same file.",
    init: [
      { name: 'embeddingDim', type: 'int' },
      { name: 'pooledProjectionDim', type: 'int' },
      { name: 'guidance', type: 'bool', optional: true, default: true, doc: 'false: CombinedTimestepTextProjEmbeddings (FLUX.1-schnell)' },
    ],
    inputs: [
      { name: 'timestep', dtype: 'act', shape: ['B'], doc: 'sigma * 1000' },
      { name: 'guidance', dtype: 'act', shape: ['B'], optional: true, doc: 'guidance scale * 1000' },
      { name: 'pooledProjection', dtype: 'act', shape: ['B', 'P'], doc: 'CLIP pooled output' },
    ],
    outputs: [{ name: 'temb', dtype: 'act', shape: ['B', 'D'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 2e-2 } },
    imports: ['L1/linear'],
    cases: {
      ci: [embCase('tiny-f32', 'f32', 3, 32, 12), embCase('tiny-bf16', 'bf16', 2, 48, 16)],
      production: [embCase('flux1-dev-b1', 'bf16', 1, FLUX1_DEV.innerDim, FLUX1_DEV.pooledProjectionDim), embCase('flux1-dev-b4', 'bf16', 4, FLUX1_DEV.innerDim, FLUX1_DEV.pooledProjectionDim)],
    },
  },
  {
    baseline: CombinedTimestepGuidanceTextProjEmbeddings,
    makeInputs: (c, ctx, rng) => {
      const B = c.dims.B!;
      const dev = { device: ctx.device };
      // sigmas in (0, 1] times 1000, and FLUX-dev's guidance 3.5 (x 1000) jittered
      const t = Tensor.fromArray(ctx.backend, Array.from({ length: B }, () => 1000 * (0.02 + 0.98 * rng.uniform())), [B], c.dtype, dev);
      const g = Tensor.fromArray(ctx.backend, Array.from({ length: B }, () => 1000 * (1 + 4 * rng.uniform())), [B], c.dtype, dev);
      return [t, g, randn(ctx, rng, [B, c.dims.P!], c.dtype)];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([t, g, pooled], params) => [timeTextEmbedReference(t!, g ?? null, pooled!, params)],
    work: (c) => {
      const { B, D, P } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([D!, 512 + 3 * D! + P!], it), flops: 2 * B! * D! * (512 + 3 * D! + P!) };
    },
  },
);
