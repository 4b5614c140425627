/**
 * The MoE models' LlamaModel / LlamaForCausalLM: embed_tokens (L1/embedding), layers (the family's MoE decoder task),
 * norm (L1/rms_norm, fused with the last residual), lm_head (L2/parallel_embedding). forward(inputIds, positions) ->
 * final hidden states [T, H]; computeLogits(hidden [B, H]) -> [B, V]. Over W ranks only with expert parallelism
 * (issue 31): attention, the embedding and the LM head split as Llama's, each rank holds E / W experts.
 */
import { Module, UserError, currentTensorParallelGroup, type Tensor } from '@fastkernels/core';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import type { ParallelLMHead } from '../L2/parallel_embedding.js';
import type { MoeConfig } from './config.js';
import { currentExpertParallel } from '../../../layers/parallel/expert-parallel.js';
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
    // over ranks: attention, embedding and LM head tensor-parallel, experts partitioned (FusedMoE); experts are never
    // tensor-parallel, so ranks without expert parallelism are refused
    if (world > 1 && !currentExpertParallel()) throw new UserError(`${config.modelType} models run over ${world} ranks only with expert parallelism`, { field: '--tp', fix: `add --ep ${world}` });
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
