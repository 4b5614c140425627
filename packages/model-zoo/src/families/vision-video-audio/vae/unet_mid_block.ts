import { Module, type Tensor } from '@fastkernels/core';
import type { ResnetBlock2D } from '../L2/sdxl_resnet.js';
import { Attention } from './attention.js';

/**
 * diffusers' UNetMidBlock2D as the VAE decoder builds it (temb None, eps 1e-6, output_scale_factor 1): resnets.0, then
 * attentions.0 (single-head, when add_attention) and resnets.1. forward(hiddenStates [N, C, H, W]) -> same shape.
 */
export class UNetMidBlock2D extends Module {
  readonly resnets: ResnetBlock2D[];
  readonly attentions: Attention[];
  constructor(
    readonly inChannels: number,
    readonly resnetGroups: number,
    readonly addAttention = true,
    readonly resnetEps = 1e-6,
  ) {
    super();
    const resnet = (i: number) => this.createModule<ResnetBlock2D>(`resnets.${i}`, 'L2/sdxl_resnet', inChannels, inChannels, null, resnetGroups, resnetEps);
    this.resnets = [resnet(0)];
    this.attentions = addAttention ? [this.registerModule('attentions.0', new Attention(inChannels, resnetGroups, resnetEps))] : [];
    this.resnets.push(resnet(1));
  }

  forward(hiddenStates: Tensor): Tensor {
    let h = this.resnets[0]!.forward(hiddenStates);
    for (const m of [...this.attentions, this.resnets[1]!]) {
      const y = m.forward(h);
      h.dispose();
      h = y;
    }
    return h;
  }
}
