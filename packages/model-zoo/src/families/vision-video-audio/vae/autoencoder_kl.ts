import { F, Module, OpScope, type Tensor } from '@fastkernels/core';
import type { Conv2d } from '../../../layers/conv.js';
import { createLayer } from '../../../layers/registry.js';
import { Decoder } from './decoder.js';
import type { AutoencoderKLConfig } from './vae-config.js';

/**
 * diffusers' AutoencoderKL, the decoding half (a text-to-image pipeline never encodes): `decoder.*`, and
 * `post_quant_conv` (1x1) when use_post_quant_conv (SD / SDXL; FLUX has none). decode(z [N, latent, h, w]) -> the image
 * [N, 3, 8h, 8w] in [-1, 1]; unscaleLatents undoes the pipeline's scaling (z / scaling_factor + shift_factor) first.
 */
export class AutoencoderKL extends Module {
  readonly postQuantConv: Conv2d | null;
  readonly decoder: Decoder;
  constructor(readonly config: AutoencoderKLConfig) {
    super();
    const L = config.latentChannels;
    this.postQuantConv = config.usePostQuantConv ? this.registerModule('post_quant_conv', createLayer('Conv2d', L, L, 1, 1, 0)) : null;
    this.decoder = this.registerModule('decoder', new Decoder(config));
  }

  /** FluxPipeline before vae.decode: latents / scaling_factor + shift_factor, in the latents' dtype. */
  unscaleLatents(latents: Tensor): Tensor {
    const s = new OpScope();
    return s.keep([F.add(s.op('div', [latents, this.config.scalingFactor]), this.config.shiftFactor)])[0]!;
  }

  decode(z: Tensor): Tensor {
    if (!this.postQuantConv) return this.decoder.forward(z);
    const q = this.postQuantConv.forward(z);
    try {
      return this.decoder.forward(q);
    } finally {
      q.dispose();
    }
  }

  forward(z: Tensor): Tensor {
    return this.decode(z);
  }
}
