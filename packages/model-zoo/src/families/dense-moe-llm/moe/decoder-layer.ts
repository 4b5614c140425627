/**
 * The pre-norm decoder layer the MoE models share (vLLM's MixtralDecoderLayer / Qwen3MoeDecoderLayer): input_layernorm
 * (adding the residual after the first layer), self_attn, post_attention_layernorm (adding the residual), then the
 * feed-forward block. forward(positions, hiddenStates, residual) -> [hiddenStates, residual], residual null on the
 * first layer, as LlamaDecoderLayer. The subclasses build self_attn and the feed-forward under their checkpoint names.
 */
import { Module, type Tensor } from '@fastkernels/core';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import type { MoeConfig } from './config.js';

export interface FeedForward extends Module {
  forward(x: Tensor): Tensor;
}
export interface SelfAttention extends Module {
  forward(positions: Tensor, x: Tensor): Tensor;
}

/** What the shared layer reads of a config (gpt-oss's GptOssConfig shares the layer without being a MoeConfig). */
export type MoeLayerConfig = Pick<MoeConfig, 'hiddenSize' | 'rmsNormEps'>;

export abstract class MoeDecoderLayerBase<C extends MoeLayerConfig = MoeConfig> extends Module {
  protected readonly inputLayernorm: RMSNorm;
  protected readonly postAttentionLayernorm: RMSNorm;
  protected abstract readonly selfAttn: SelfAttention;
  protected abstract readonly feedForward: FeedForward;
  constructor(
    readonly config: C,
    readonly layerIdx = 0,
  ) {
    super();
    this.inputLayernorm = this.createModule('input_layernorm', 'L1/rms_norm', config.hiddenSize, config.rmsNormEps);
    this.postAttentionLayernorm = this.createModule('post_attention_layernorm', 'L1/rms_norm', config.hiddenSize, config.rmsNormEps);
  }

  forward(positions: Tensor, hiddenStates: Tensor, residual?: Tensor | null): [Tensor, Tensor] {
    let x: Tensor;
    let res: Tensor;
    if (!residual) {
      res = hiddenStates;
      x = this.inputLayernorm.forward(hiddenStates) as Tensor;
    } else [x, res] = this.inputLayernorm.forward(hiddenStates, residual) as [Tensor, Tensor];
    let attn: Tensor;
    try {
      attn = this.selfAttn.forward(positions, x);
    } catch (e) {
      if (res !== hiddenStates) res.dispose();
      throw e;
    } finally {
      x.dispose();
    }
    try {
      const [y, res2] = this.postAttentionLayernorm.forward(attn, res) as [Tensor, Tensor];
      try {
        return [this.feedForward.forward(y), res2];
      } finally {
        y.dispose();
      }
    } finally {
      attn.dispose();
      if (res !== hiddenStates) res.dispose();
    }
  }
}
