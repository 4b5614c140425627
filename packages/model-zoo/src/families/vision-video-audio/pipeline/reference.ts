/**
 * The float64 FluxPipeline: the family's float64 references of CLIPTextModel, T5EncoderModel, FluxTransformer2DModel
 * and the VAE decoder composed as FluxPipeline composes them, with host-side packing, ids and Euler steps; and the
 * pipeline's work count (roofline).
 */
import { hostArray, roundToDType, type DType, type HostArray } from '@fastkernels/core';
import { sub } from '../host-math.js';
import { clipTextModelReference } from '../L4/clip_text_model.js';
import { fluxTransformerReference } from '../L4/flux_transformer.js';
import { t5EncoderReference } from '../L4/t5_encoder.js';
import { vaeDecodeReference } from '../vae/reference.js';
import { packLatentsHost, unpackLatentsHost } from './latents.js';
import type { FluxPipelineConfig } from './model-index.js';
import { FlowMatchEulerDiscreteScheduler, calculateShift, fluxDefaultSigmas } from './scheduler.js';

/**
 * The image [B, 3, H, W] in [0, 1]; onStep(i, packed latents) after each Euler step. `dtype`: the model dtype, whose
 * rounding of the scalar conditioning the reference keeps (diffusers: t.to(dtype) / 1000, then x.to(dtype) * 1000 in
 * the transformer: a bf16 guidance of 3.5 embeds as 3504, not 3500), everything else in float64.
 */
export function fluxPipelineReference(
  clipIds: HostArray,
  t5Ids: HostArray,
  noise: HostArray,
  P: ReadonlyMap<string, HostArray>,
  c: FluxPipelineConfig,
  steps: number,
  guidanceScale: number,
  onStep?: (step: number, latents: HostArray) => void,
  dtype: DType = 'f64',
): HostArray {
  const r = (v: number) => roundToDType(v, dtype);
  // the value the transformer's time projection sees, / 1000 (the reference multiplies by 1000 itself)
  const asInput = (v: number) => r(r(v) * 1000) / 1000;
  const [B, , h, w] = noise.shape as [number, number, number, number];
  const pooled = clipTextModelReference(clipIds, sub(P, 'text_encoder'), c.textEncoder, null)[1]!;
  const enc = t5EncoderReference(t5Ids, null, sub(P, 'text_encoder_2'), c.textEncoder2);
  let x = packLatentsHost(noise);
  const S = x.shape[1]!;
  const St = enc.shape[1]!;
  const imgIds = hostArray([S, 3]);
  for (let r = 0; r < h / 2; r++) for (let col = 0; col < w / 2; col++) imgIds.data.set([0, r, col], (r * (w / 2) + col) * 3);
  const txtIds = hostArray([St, 3]);
  // the schedule is host math shared with the module (tested on its own against numpy's values)
  const sc = c.scheduler;
  const sched = new FlowMatchEulerDiscreteScheduler(sc);
  sched.setTimesteps(fluxDefaultSigmas(steps), calculateShift(S, sc.baseImageSeqLen, sc.maxImageSeqLen, sc.baseShift, sc.maxShift));
  const guidance = c.transformer.guidanceEmbeds ? hostArray([B], new Float64Array(B).fill(asInput(guidanceScale))) : null;
  const T = sub(P, 'transformer');
  for (let i = 0; i < steps; i++) {
    const t = hostArray([B], new Float64Array(B).fill(asInput(r(r(sched.timesteps[i]!) / 1000))));
    const v = fluxTransformerReference(x, enc, pooled, t, imgIds, txtIds, guidance, T, c.transformer);
    const dt = sched.sigmas[i + 1]! - sched.sigmas[i]!;
    x = hostArray(x.shape, x.data.map((xv, j) => xv + dt * v.data[j]!));
    onStep?.(i, x);
  }
  const z = unpackLatentsHost(x, h, w);
  const scaled = hostArray(z.shape, z.data.map((v) => v / c.vae.scalingFactor + c.vae.shiftFactor));
  const img = vaeDecodeReference(scaled, sub(P, 'vae'), c.vae);
  return hostArray(img.shape, img.data.map((v) => Math.min(1, Math.max(0, v / 2 + 0.5))));
}

/** FLOPs of the AutoencoderKL decoder on h x w latents (convolutions, mid-block attention) and bytes of its weights. */
function vaeDecodeWork(c: FluxPipelineConfig['vae'], h: number, w: number): { flops: number; weights: number } {
  const rev = [...c.blockOutChannels].reverse();
  let flops = 0;
  let weights = 0;
  const conv = (ci: number, co: number, k: number, px: number) => ((flops += 2 * px * ci * co * k * k), (weights += ci * co * k * k));
  let px = h * w;
  conv(c.latentChannels, rev[0]!, 3, px);
  const resnet = (ci: number, co: number) => (conv(ci, co, 3, px), conv(co, co, 3, px), ci !== co && conv(ci, co, 1, px));
  resnet(rev[0]!, rev[0]!);
  if (c.midBlockAddAttention) ((flops += 8 * px * rev[0]! ** 2 + 4 * px * px * rev[0]!), (weights += 4 * rev[0]! ** 2));
  resnet(rev[0]!, rev[0]!);
  rev.forEach((co, i) => {
    for (let j = 0; j <= c.layersPerBlock; j++) resnet(j === 0 ? rev[Math.max(0, i - 1)]! : co, co);
    if (i < rev.length - 1) ((px *= 4), conv(co, co, 3, px));
  });
  conv(c.blockOutChannels[0]!, c.outChannels, 3, px);
  return { flops, weights };
}

/** FLOPs and bytes of one pipeline call: the text encoders once, `steps` transformer calls, one VAE decode. */
export function fluxPipelineWork(c: FluxPipelineConfig, steps: number, B: number, Sc: number, St: number, h: number, w: number, itemsize: number): { bytes: number; flops: number } {
  const t = c.transformer;
  const D = t.innerDim;
  const S = (h / 2) * (w / 2);
  const N = S + St;
  const blocks = t.numLayers + t.numSingleLayers;
  // per token: 12 D² of projections in either kind of block (double: per stream; single: qkv + mlp + proj_out)
  const stepFlops = B * (2 * N * 12 * D * D * blocks + 4 * N * N * D * blocks + 2 * S * t.inChannels * D * 2 + 2 * St * t.jointAttentionDim * D);
  const stepWeights = blocks * 12 * D * D + t.numLayers * 12 * D * D + t.numSingleLayers * 3 * D * D;
  const e = c.textEncoder2;
  const inner = e.numHeads * e.dKv;
  const t5 = 2 * B * St * e.numLayers * (4 * e.dModel * inner + (e.isGatedAct ? 3 : 2) * e.dModel * e.dFf) + 4 * B * St * St * inner * e.numLayers;
  const k = c.textEncoder;
  const clip = 2 * B * Sc * k.numHiddenLayers * (4 * k.hiddenSize ** 2 + 2 * k.hiddenSize * k.intermediateSize) + 4 * B * Sc * Sc * k.hiddenSize * k.numHiddenLayers;
  const vae = vaeDecodeWork(c.vae, h, w);
  return {
    flops: steps * stepFlops + t5 + clip + B * vae.flops,
    bytes: itemsize * (steps * (stepWeights + 4 * B * N * D * blocks) + e.numLayers * (4 * e.dModel * inner + 3 * e.dModel * e.dFf) + k.numHiddenLayers * 12 * k.hiddenSize ** 2 + vae.weights + B * 3 * 64 * h * w),
  };
}
