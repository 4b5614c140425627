import { Module, type Tensor } from '@fastkernels/core';
import type { ResnetBlock2D } from '../L2/sdxl_resnet.js';
import type { Upsample2D } from '../L2/sdxl_upsample.js';

/**
 * diffusers' UpDecoderBlock2D (temb None): num_layers ResnetBlock2D (the first from in_channels), then an Upsample2D
 * with a conv (`upsamplers.0`) unless it is the decoder's last block. forward([N, Ci, H, W]) -> [N, Co, 2H, 2W] or [N, Co, H, W].
 */
export class UpDecoderBlock2D extends Module {
  readonly resnets: ResnetBlock2D[];
  readonly upsamplers: Upsample2D[];
  constructor(
    readonly inChannels: number,
    readonly outChannels: number,
    readonly numLayers: number,
    readonly resnetGroups: number,
    readonly addUpsample = true,
    readonly resnetEps = 1e-6,
  ) {
    super();
    this.resnets = Array.from({ length: numLayers }, (_, i) => this.createModule<ResnetBlock2D>(`resnets.${i}`, 'L2/sdxl_resnet', i === 0 ? inChannels : outChannels, outChannels, null, resnetGroups, resnetEps));
    this.upsamplers = addUpsample ? [this.createModule<Upsample2D>('upsamplers.0', 'L2/sdxl_upsample', outChannels, true, outChannels)] : [];
  }

  forward(hiddenStates: Tensor): Tensor {
    let h = hiddenStates;
    for (const m of [...this.resnets, ...this.upsamplers]) {
      const y = m.forward(h);
      if (h !== hiddenStates) h.dispose();
      h = y;
    }
    return h;
  }
}
