import { F, Module, OpScope, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { FluxPosEmbed } from '../../../tasks/L1/rotary/flux_pos_embed.js';
import { fluxPosEmbedReference } from '../../../tasks/L1/rotary/flux_pos_embed.js';
import type { FluxTransformerConfig } from '../flux-config.js';
import { linear, param, sub } from '../host-math.js';
import { adaLayerNormContinuousReference, type AdaLayerNormContinuous } from '../L2/ada_layer_norm_continuous.js';
import { timeTextEmbedReference, type CombinedTimestepGuidanceTextProjEmbeddings } from '../L2/timestep_embedding.js';
import { FluxSingleTransformerBlock, fluxBlockReference, fluxSingleBlockReference, type FluxTransformerBlock } from '../L3/flux_transformer_block.js';

/**
 * diffusers' FluxTransformer2DModel (one denoising step of FLUX.1): x_embedder on the packed latents, context_embedder
 * on the T5 states, time_text_embed (timestep and guidance scaled by 1000 in the model dtype, plus the pooled CLIP
 * vector), FluxPosEmbed of [txt_ids, img_ids], the double-stream blocks, one [text, image] stream through the
 * single-stream blocks, the image part through norm_out (AdaLayerNormContinuous) and proj_out. Parameter paths are
 * the checkpoint's, except to_qkv / add_kv_proj which weights.ts stacks from to_q / to_k / to_v (vllm-omni's layout).
 * forward(hiddenStates [B, S, C], encoderHiddenStates [B, St, J], pooledProjections [B, P], timestep [B] (sigma),
 * imgIds [S, 3], txtIds [St, 3], guidance [B] | null) -> the velocity [B, S, C_out]. Not a task of its own (the
 * original's L4 is the FluxPipeline); the pipeline pass wraps it.
 */
export class FluxTransformer2DModel extends Module {
  readonly posEmbed: FluxPosEmbed;
  readonly timeTextEmbed: CombinedTimestepGuidanceTextProjEmbeddings;
  readonly contextEmbedder: Linear;
  readonly xEmbedder: Linear;
  readonly transformerBlocks: FluxTransformerBlock[];
  readonly singleTransformerBlocks: FluxSingleTransformerBlock[];
  readonly normOut: AdaLayerNormContinuous;
  readonly projOut: Linear;
  constructor(readonly config: FluxTransformerConfig) {
    super();
    const c = config;
    const D = c.innerDim;
    this.posEmbed = this.createModule('pos_embed', 'L1/flux_pos_embed', 10000, c.axesDimsRope);
    this.timeTextEmbed = this.createModule('time_text_embed', 'L2/timestep_embedding', D, c.pooledProjectionDim, c.guidanceEmbeds);
    this.contextEmbedder = this.createModule('context_embedder', 'L1/linear', c.jointAttentionDim, D, true);
    this.xEmbedder = this.createModule('x_embedder', 'L1/linear', c.inChannels, D, true);
    this.transformerBlocks = Array.from({ length: c.numLayers }, (_, i) => this.createModule<FluxTransformerBlock>(`transformer_blocks.${i}`, 'L3/flux_transformer_block', D, c.numAttentionHeads, c.attentionHeadDim));
    this.singleTransformerBlocks = Array.from({ length: c.numSingleLayers }, (_, i) => this.registerModule(`single_transformer_blocks.${i}`, new FluxSingleTransformerBlock(D, c.numAttentionHeads, c.attentionHeadDim)));
    this.normOut = this.createModule('norm_out', 'L2/ada_layer_norm_continuous', D, D, false, 1e-6);
    this.projOut = this.createModule('proj_out', 'L1/linear', D, c.patchSize * c.patchSize * c.outChannels, true);
  }

  /** The rotary tables the blocks take: FluxPosEmbed's [N, d] columns come in equal pairs, so every other one. */
  rotary(imgIds: Tensor, txtIds: Tensor): [Tensor, Tensor] {
    const s = new OpScope();
    const ids = s.own(F.cat([txtIds, imgIds], 0));
    const [cos, sin] = this.posEmbed.forward(ids).map((t) => s.own(t)) as [Tensor, Tensor];
    const half = (t: Tensor) => s.op('contiguous', [s.own(F.slice(t, 1, 0, null, 2))]);
    return s.keep([half(cos), half(sin)]) as [Tensor, Tensor];
  }

  forward(hiddenStates: Tensor, encoderHiddenStates: Tensor, pooledProjections: Tensor, timestep: Tensor, imgIds: Tensor, txtIds: Tensor, guidance: Tensor | null = null): Tensor {
    const [cos, sin] = this.rotary(imgIds, txtIds);
    try {
      return this.forwardWithRotary(hiddenStates, encoderHiddenStates, pooledProjections, timestep, cos, sin, guidance);
    } finally {
      cos.dispose();
      sin.dispose();
    }
  }

  /**
   * forward with the rotary tables given (rotary(imgIds, txtIds), [St + S, head_dim / 2] each): the step as the CUDA
   * graph captures it, the tables made once per shape outside (FluxPosEmbed uploads its frequencies from the host).
   */
  forwardWithRotary(hiddenStates: Tensor, encoderHiddenStates: Tensor, pooledProjections: Tensor, timestep: Tensor, cos: Tensor, sin: Tensor, guidance: Tensor | null = null): Tensor {
    const s = new OpScope();
    try {
      let h = s.own(this.xEmbedder.forward(hiddenStates));
      const scaled = (t: Tensor) => s.op('mul', [s.op('to', [t], { dtype: h.dtype }), 1000]);
      const temb = s.own(this.timeTextEmbed.forward(scaled(timestep), guidance ? scaled(guidance) : null, pooledProjections));
      let e = s.own(this.contextEmbedder.forward(encoderHiddenStates));
      for (const block of this.transformerBlocks) [e, h] = block.forward(h, e, temb, cos, sin).map((t) => s.own(t)) as [Tensor, Tensor];
      const St = e.shape[1]!;
      const S = h.shape[1]!;
      let x = s.own(F.cat([e, h], 1));
      for (const block of this.singleTransformerBlocks) x = s.own(block.forward(x, temb, cos, sin));
      const img = s.op('contiguous', [s.own(x.narrow(1, St, S))]);
      const n = s.own(this.normOut.forward(img, temb));
      return s.keep([this.projOut.forward(n)])[0];
    } catch (err) {
      s.dispose();
      throw err;
    }
  }
}

/** Golden float64 FluxTransformer2DModel over its parameters by tree name (to_qkv stacked). */
export function fluxTransformerReference(
  x: HostArray,
  enc: HostArray,
  pooled: HostArray,
  timestep: HostArray,
  imgIds: HostArray,
  txtIds: HostArray,
  guidance: HostArray | null,
  params: ReadonlyMap<string, HostArray>,
  c: FluxTransformerConfig,
): HostArray {
  const [B, S] = x.shape as [number, number];
  const St = enc.shape[1]!;
  const D = c.innerDim;
  const N = S + St;
  let h = hostArray([B, S, D], linear(x.data, B * S, param(params, 'x_embedder.weight'), param(params, 'x_embedder.bias')));
  let e = hostArray([B, St, D], linear(enc.data, B * St, param(params, 'context_embedder.weight'), param(params, 'context_embedder.bias')));
  const scale = (t: HostArray) => hostArray(t.shape, t.data.map((v) => v * 1000));
  const temb = timeTextEmbedReference(scale(timestep), guidance ? scale(guidance) : null, pooled, sub(params, 'time_text_embed'));
  const ids = hostArray([N, 3], [...txtIds.data, ...imgIds.data]);
  const [cf, sf] = fluxPosEmbedReference(ids, 10000, c.axesDimsRope);
  const half = (t: HostArray) => hostArray([N, c.attentionHeadDim / 2], t.data.filter((_, i) => i % 2 === 0));
  const [cos, sin] = [half(cf), half(sf)];
  for (let i = 0; i < c.numLayers; i++) [e, h] = fluxBlockReference(h, e, temb, cos, sin, sub(params, `transformer_blocks.${i}`), c.numAttentionHeads) as [HostArray, HostArray];
  let z = hostArray([B, N, D]);
  for (let b = 0; b < B; b++) {
    z.data.set(e.data.subarray(b * St * D, (b + 1) * St * D), b * N * D);
    z.data.set(h.data.subarray(b * S * D, (b + 1) * S * D), (b * N + St) * D);
  }
  for (let i = 0; i < c.numSingleLayers; i++) z = fluxSingleBlockReference(z, temb, cos, sin, sub(params, `single_transformer_blocks.${i}`), c.numAttentionHeads);
  const img = hostArray([B, S, D]);
  for (let b = 0; b < B; b++) img.data.set(z.data.subarray((b * N + St) * D, (b + 1) * N * D), b * S * D);
  const n = adaLayerNormContinuousReference(img, temb, sub(params, 'norm_out'), 1e-6);
  const w = param(params, 'proj_out.weight');
  return hostArray([B, S, w.shape[0]!], linear(n.data, B * S, w, param(params, 'proj_out.bias')));
}
