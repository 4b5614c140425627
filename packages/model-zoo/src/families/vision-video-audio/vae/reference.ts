/**
 * The float64 reference of the AutoencoderKL decoder on host arrays, from diffusers' definitions (ResnetBlock2D,
 * Upsample2D, the VAE's single-head mid-block Attention, UNetMidBlock2D, UpDecoderBlock2D, Decoder): plain loops plus
 * the L1 references of conv2d and group norm, parameters read by their checkpoint paths.
 */
import { hostArray, type HostArray } from '@fastkernels/core';
import { conv2dReference } from '../../../tasks/L1/conv/conv2d.js';
import { groupNormReference } from '../../../tasks/L1/norm/group_norm.js';
import { attention, linear, param, silu, sub } from '../host-math.js';
import type { AutoencoderKLConfig } from './vae-config.js';

type Params = ReadonlyMap<string, HostArray>;
const map = (x: HostArray, f: (v: number) => number) => hostArray(x.shape, x.data.map(f));
const conv = (x: HostArray, P: Params, name: string, pad: number) => conv2dReference(x, param(P, `${name}.weight`), P.get(`${name}.bias`) ?? null, 1, pad);
const gn = (x: HostArray, P: Params, name: string, groups: number, eps: number) => groupNormReference(x, groups, param(P, `${name}.weight`), param(P, `${name}.bias`), eps);

/** ResnetBlock2D (pre-norm, "default" time embedding): (shortcut(x) + conv2(silu(gn2(conv1(silu(gn1 x)) + proj(silu temb))))) / osf. */
export function resnetBlock2dReference(x: HostArray, temb: HostArray | null, P: Params, groups: number, eps: number, outputScaleFactor = 1): HostArray {
  let h = conv(map(gn(x, P, 'norm1', groups, eps), silu), P, 'conv1', 1);
  const [N, Co, H, W] = h.shape as [number, number, number, number];
  if (temb) {
    const t = linear(temb.data.map(silu), N, param(P, 'time_emb_proj.weight'), param(P, 'time_emb_proj.bias'));
    h = hostArray(h.shape, h.data.map((v, i) => v + t[Math.floor(i / (H * W))]!));
  }
  h = conv(map(gn(h, P, 'norm2', groups, eps), silu), P, 'conv2', 1);
  const short = P.has('conv_shortcut.weight') ? conv(x, P, 'conv_shortcut', 0) : x;
  return hostArray([N, Co, H, W], h.data.map((v, i) => (short.data[i]! + v) / outputScaleFactor));
}

/** Upsample2D: nearest 2x (each pixel to a 2 x 2 square), then the 3 x 3 conv when it has one. */
export function upsample2dReference(x: HostArray, P: Params, useConv: boolean): HostArray {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const up = hostArray([N, C, 2 * H, 2 * W]);
  for (let nc = 0; nc < N * C; nc++) for (let i = 0; i < 2 * H; i++) for (let j = 0; j < 2 * W; j++) up.data[(nc * 2 * H + i) * 2 * W + j] = x.data[(nc * H + (i >> 1)) * W + (j >> 1)]!;
  return useConv ? conv(up, P, 'conv', 1) : up;
}

/** The VAE's Attention: one head over the H*W positions of group-normed channels, to_out, plus the residual. */
export function vaeAttentionReference(x: HostArray, P: Params, groups: number, eps: number): HostArray {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const S = H * W;
  const n = gn(x, P, 'group_norm', groups, eps);
  const tokens = new Float64Array(N * S * C);
  for (let b = 0; b < N; b++) for (let c = 0; c < C; c++) for (let s = 0; s < S; s++) tokens[(b * S + s) * C + c] = n.data[(b * C + c) * S + s]!;
  const proj = (name: string) => linear(tokens, N * S, param(P, `${name}.weight`), param(P, `${name}.bias`));
  const a = attention(proj('to_q'), proj('to_k'), proj('to_v'), { B: N, L: S, S, H: 1, E: C }, 1 / Math.sqrt(C));
  const o = linear(a, N * S, param(P, 'to_out.0.weight'), param(P, 'to_out.0.bias'));
  const out = hostArray(x.shape);
  for (let b = 0; b < N; b++) for (let c = 0; c < C; c++) for (let s = 0; s < S; s++) out.data[(b * C + c) * S + s] = o[(b * S + s) * C + c]! + x.data[(b * C + c) * S + s]!;
  return out;
}

const EPS = 1e-6;

/** diffusers' Decoder (vae.decoder.*): conv_in, mid block, up blocks (last without upsampler), GroupNorm + SiLU + conv_out. */
export function decoderReference(z: HostArray, P: Params, c: AutoencoderKLConfig): HostArray {
  const G = c.normNumGroups;
  let h = conv(z, P, 'conv_in', 1);
  h = resnetBlock2dReference(h, null, sub(P, 'mid_block.resnets.0'), G, EPS);
  if (c.midBlockAddAttention) h = vaeAttentionReference(h, sub(P, 'mid_block.attentions.0'), G, EPS);
  h = resnetBlock2dReference(h, null, sub(P, 'mid_block.resnets.1'), G, EPS);
  const blocks = c.blockOutChannels.length;
  for (let i = 0; i < blocks; i++) {
    for (let j = 0; j <= c.layersPerBlock; j++) h = resnetBlock2dReference(h, null, sub(P, `up_blocks.${i}.resnets.${j}`), G, EPS);
    if (i < blocks - 1) h = upsample2dReference(h, sub(P, `up_blocks.${i}.upsamplers.0`), true);
  }
  return conv(map(gn(h, P, 'conv_norm_out', G, EPS), silu), P, 'conv_out', 1);
}

/** AutoencoderKL.decode(z): post_quant_conv (when the config has one), then the decoder. */
export function vaeDecodeReference(z: HostArray, P: Params, c: AutoencoderKLConfig): HostArray {
  const q = c.usePostQuantConv ? conv(z, P, 'post_quant_conv', 0) : z;
  return decoderReference(q, sub(P, 'decoder'), c);
}
