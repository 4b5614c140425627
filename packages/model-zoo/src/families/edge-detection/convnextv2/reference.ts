/**
 * The float64 reference of ConvNeXt-V2 on host arrays, from HF's modeling_convnextv2.py with plain loops (the L1
 * references, no registry op): parameters are read by their checkpoint paths under a prefix.
 */
import { hostArray, type HostArray } from '@fastkernels/core';
import { geluReference } from '../../../tasks/L1/activation/gelu.js';
import { globalAvgPool2dReference } from '../../../tasks/L1/conv/global_avg_pool2d.js';
import { conv2dReference } from '../../../tasks/L1/conv/conv2d.js';
import { linearReference } from '../../../tasks/L1/linear/linear.js';
import { grnReference } from '../../../tasks/L1/norm/grn.js';
import { layerNormReference } from '../../../tasks/L1/norm/layer_norm.js';
import { layerNorm2dReference } from '../../../tasks/L1/norm/layer_norm2d.js';
import type { ConvNextV2Act, ConvNextV2Config } from './config.js';

export type Params = ReadonlyMap<string, HostArray>;

const get = (P: Params, name: string): HostArray => {
  const t = P.get(name);
  if (!t) throw new Error(`reference: no parameter '${name}' (have ${[...P.keys()].slice(0, 6).join(', ')}, ...)`);
  return t;
};
const at = (prefix: string, name: string) => (prefix ? `${prefix}.${name}` : name);

/** [N, C, H, W] <-> [N, H, W, C]. */
export function toChannelsLast(x: HostArray): HostArray {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const out = hostArray([N, H, W, C]);
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) for (let p = 0; p < H * W; p++) out.data[(n * H * W + p) * C + c] = x.data[(n * C + c) * H * W + p]!;
  return out;
}
export function toChannelsFirst(x: HostArray): HostArray {
  const [N, H, W, C] = x.shape as [number, number, number, number];
  const out = hostArray([N, C, H, W]);
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) for (let p = 0; p < H * W; p++) out.data[(n * C + c) * H * W + p] = x.data[(n * H * W + p) * C + c]!;
  return out;
}

function act(x: HostArray, a: ConvNextV2Act): HostArray {
  if (a === 'relu') return hostArray(x.shape, x.data.map((v) => Math.max(0, v)));
  return geluReference(x, a === 'gelu' ? 'none' : 'tanh');
}

/** ConvNextV2Layer: x + pwconv2(grn(act(pwconv1(layernorm(dwconv(x)))))) with the middle in channels-last. */
export function refConvNextV2Layer(x: HostArray, P: Params, prefix: string, dim: number, hiddenAct: ConvNextV2Act): HostArray {
  const p = (n: string) => get(P, at(prefix, n));
  let h = toChannelsLast(conv2dReference(x, p('dwconv.weight'), p('dwconv.bias'), 1, 3, 1, dim));
  h = layerNormReference(h, dim, p('layernorm.weight'), p('layernorm.bias'), 1e-6);
  h = act(linearReference(h, p('pwconv1.weight'), p('pwconv1.bias')), hiddenAct);
  h = grnReference(h, p('grn.weight'), p('grn.bias'));
  h = toChannelsFirst(linearReference(h, p('pwconv2.weight'), p('pwconv2.bias')));
  return hostArray(x.shape, x.data.map((v, i) => v + h.data[i]!));
}

/** ConvNextV2Stage: the optional downsampling (LayerNorm2d, then a stride-`stride` conv; its kernel from the weight), then the blocks. */
export function refConvNextV2Stage(x: HostArray, P: Params, prefix: string, config: ConvNextV2Config, inChannels: number, outChannels: number, stride: number, depth: number): HostArray {
  let h = x;
  if (inChannels !== outChannels || stride > 1) {
    h = layerNorm2dReference(h, get(P, at(prefix, 'downsampling_layer.0.weight')), get(P, at(prefix, 'downsampling_layer.0.bias')), 1e-6);
    h = conv2dReference(h, get(P, at(prefix, 'downsampling_layer.1.weight')), get(P, at(prefix, 'downsampling_layer.1.bias')), stride, 0);
  }
  for (let j = 0; j < depth; j++) h = refConvNextV2Layer(h, P, at(prefix, `layers.${j}`), outChannels, config.hiddenAct);
  return h;
}

/** ConvNextV2ForImageClassification: pixel_values [B, C, S, S] -> logits [B, num_labels]. */
export function refConvNextV2(x: HostArray, P: Params, config: ConvNextV2Config): HostArray {
  const m = 'convnextv2';
  let h = conv2dReference(x, get(P, `${m}.embeddings.patch_embeddings.weight`), get(P, `${m}.embeddings.patch_embeddings.bias`), config.patchSize, 0);
  h = layerNorm2dReference(h, get(P, `${m}.embeddings.layernorm.weight`), get(P, `${m}.embeddings.layernorm.bias`), 1e-6);
  let prev = config.hiddenSizes[0]!;
  config.hiddenSizes.forEach((out, i) => {
    h = refConvNextV2Stage(h, P, `${m}.encoder.stages.${i}`, config, prev, out, i > 0 ? 2 : 1, config.depths[i]!);
    prev = out;
  });
  const pooled = layerNormReference(globalAvgPool2dReference(h), prev, get(P, `${m}.layernorm.weight`), get(P, `${m}.layernorm.bias`), config.layerNormEps);
  return linearReference(pooled, get(P, 'classifier.weight'), get(P, 'classifier.bias'));
}
