/**
 * The MoE models' LlamaModel / LlamaForCausalLM: embed_tokens (L1/embedding), layers (the family's MoE decoder task),
 * norm (L1/rms_norm, fused with the last residual), lm_head (L2/parallel_embedding). forward(inputIds, positions) ->
 * final hidden states [T, H]; computeLogits(hidden [B, H]) -> [B, V]. One process only: the expert and attention
 * weights are not split over ranks yet (tensor / expert parallelism is the issue's next part).
 */
import { Module, UserError, currentTensorParallelGroup, type Tensor } from '@fastkernels/core';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import type { ParallelLMHead } from '../L2/parallel_embedding.js';
import type { MoeConfig } from './config.js';
import { runDecoderStack } from '../decoder-stack.js';

interface DecoderLayer extends Module {
  forward(positions: Tensor, hiddenStates: Tensor, residual?: Tensor | null): [Tensor, Tensor];
}

/** What the shared model reads of a config (gpt-oss's GptOssConfig shares it without being a MoeConfig). */
export type MoeModelConfig = Pick<MoeConfig, 'vocabSize' | 'hiddenSize' | 'numHiddenLayers' | 'rmsNormEps'> & { readonly modelType: string };

export class MoeDecoderModel<C extends MoeModelConfig = MoeConfig> extends Module {
  readonly embedTokens: VocabParallelEmbedding;
  readonly layers: DecoderLayer[] = [];
  readonly norm: RMSNorm;
  constructor(
    readonly config: C,
    layerTask: string,
  ) {
    super();
    const world = currentTensorParallelGroup().world;
    if (world > 1) throw new UserError(`${config.modelType} models do not run tensor parallel yet (${world} ranks)`, { field: '--tp', fix: 'drop --tp' });
    this.embedTokens = this.createModule('embed_tokens', 'L1/embedding', config.vocabSize, config.hiddenSize);
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.push(this.createModule(`layers.${i}`, layerTask, config, i));
    this.norm = this.createModule('norm', 'L1/rms_norm', config.hiddenSize, config.rmsNormEps);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return runDecoderStack(this.embedTokens, this.layers, this.norm, inputIds, positions);
  }
}

export abstract class MoeForCausalLMBase<C extends MoeModelConfig = MoeConfig> extends Module {
  readonly model: MoeDecoderModel<C>;
  readonly lmHead: ParallelLMHead;
  constructor(
    readonly config: C,
    layerTask: string,
  ) {
    super();
    this.model = this.registerModule('model', new MoeDecoderModel<C>(config, layerTask));
    this.lmHead = this.createModule('lm_head', 'L2/parallel_embedding', config.vocabSize, config.hiddenSize);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return this.model.forward(inputIds, positions);
  }

  computeLogits(hiddenStates: Tensor): Tensor {
    return this.lmHead.forward(hiddenStates);
  }
}
