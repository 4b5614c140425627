import { Module, type Tensor } from '@fastkernels/core';
import type { SiLU } from '../../../layers/activation.js';
import type { Conv2d } from '../../../layers/conv.js';
import type { GroupNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import { UNetMidBlock2D } from './unet_mid_block.js';
import { UpDecoderBlock2D } from './up_decoder_block.js';
import type { AutoencoderKLConfig } from './vae-config.js';

/**
 * diffusers' Decoder (diffusers.models.autoencoders.vae.Decoder, norm_type "group"): conv_in from the latent channels
 * to the widest block, the mid block, one UpDecoderBlock2D per block_out_channels entry from widest to narrowest
 * (layers_per_block + 1 resnets; all but the last upsample 2x), GroupNorm + SiLU, conv_out to the image channels.
 * forward(z [N, latent, h, w]) -> [N, out, h * 2^(blocks-1), w * 2^(blocks-1)].
 */
export class Decoder extends Module {
  readonly convIn: Conv2d;
  readonly midBlock: UNetMidBlock2D;
  readonly upBlocks: UpDecoderBlock2D[];
  readonly convNormOut: GroupNorm;
  readonly convAct: SiLU;
  readonly convOut: Conv2d;
  constructor(readonly config: AutoencoderKLConfig) {
    super();
    const c = config;
    const rev = [...c.blockOutChannels].reverse();
    const G = c.normNumGroups;
    this.convIn = this.registerModule('conv_in', createLayer('Conv2d', c.latentChannels, rev[0]!, 3, 1, 1));
    this.midBlock = this.registerModule('mid_block', new UNetMidBlock2D(rev[0]!, G, c.midBlockAddAttention));
    this.upBlocks = rev.map((out, i) => this.registerModule(`up_blocks.${i}`, new UpDecoderBlock2D(rev[Math.max(0, i - 1)]!, out, c.layersPerBlock + 1, G, i < rev.length - 1)));
    this.convNormOut = this.registerModule('conv_norm_out', createLayer('GroupNorm', G, c.blockOutChannels[0]!, 1e-6, true));
    this.convAct = this.registerModule('conv_act', createLayer('SiLU'));
    this.convOut = this.registerModule('conv_out', createLayer('Conv2d', c.blockOutChannels[0]!, c.outChannels, 3, 1, 1));
  }

  forward(z: Tensor): Tensor {
    let h = this.convIn.forward(z);
    for (const m of [this.midBlock, ...this.upBlocks, this.convNormOut, this.convAct, this.convOut]) {
      const y = m.forward(h);
      h.dispose();
      h = y;
    }
    return h;
  }
}
