/**
 * The model-level glue the hybrid stacks share (Qwen3-Next, Kimi-Linear): <model>Model (embed_tokens, the decoder layers
 * in the config's attention / recurrent pattern, the final norm fused with the last residual; one process only),
 * <model>ForCausalLM (the model and lm_head, as the engine's runner calls it) and the stack's work. Each model
 * subclasses them under its own class names (the tasks' baselines) and names its decoder and norm tasks.
 */
import { DTYPE_INFO, Module, UserError, currentTensorParallelGroup, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf } from '../../common/inputs.js';
import type { CausalLM } from '../../engine/model-runner.js';
import type { VocabParallelEmbedding } from '../../tasks/L1/embedding/embedding.js';
import type { Linear } from '../../tasks/L1/linear/linear.js';
import { runDecoderStack, type StackLayer, type StackNorm } from '../dense-moe-llm/decoder-stack.js';
import { stepSpec, stepTokens } from '../dense-moe-llm/task-batch.js';

export interface HybridStackConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numHiddenLayers: number;
  readonly rmsNormEps: number;
}

/** What a model names: its model_type (in errors), its decoder-layer task (built with (config, layer)), its norm task. */
export interface HybridStackTasks {
  readonly modelType: string;
  readonly decoder: string;
  readonly norm: string;
}

/** forward(inputIds [T], positions [T]) -> the final hidden states [T, D]. */
export class HybridModel<L extends StackLayer & Module, N extends StackNorm & Module> extends Module {
  readonly embedTokens: VocabParallelEmbedding;
  readonly layers: L[] = [];
  readonly norm: N;
  constructor(config: HybridStackConfig, tasks: HybridStackTasks) {
    super();
    const world = currentTensorParallelGroup().world;
    if (world > 1) throw new UserError(`${tasks.modelType} models do not run tensor parallel yet (${world} ranks)`, { field: '--tp', fix: 'drop --tp' });
    this.embedTokens = this.createModule('embed_tokens', 'L1/embedding', config.vocabSize, config.hiddenSize);
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.push(this.createModule(`layers.${i}`, tasks.decoder, config, i));
    this.norm = this.createModule('norm', tasks.norm, config.hiddenSize, config.rmsNormEps);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return runDecoderStack(this.embedTokens, this.layers, this.norm, inputIds, positions);
  }
}

/** The engine's model interface: forward(inputIds, positions) -> hidden [T, D]; computeLogits(hidden rows) -> [rows, vocab]. */
export class HybridForCausalLM<M extends Module & { forward(inputIds: Tensor, positions: Tensor): Tensor }> extends Module implements CausalLM {
  readonly model: M;
  readonly lmHead: Linear;
  /** `model` builds the model module (after this module, as its first child). */
  constructor(config: HybridStackConfig, model: () => M) {
    super();
    this.model = this.registerModule('model', model());
    this.lmHead = this.createModule('lm_head', 'L1/linear', config.hiddenSize, config.vocabSize, false);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return this.model.forward(inputIds, positions);
  }

  computeLogits(hiddenStates: Tensor): Tensor {
    return this.lmHead.forward(hiddenStates);
  }
}

/** The stack's work over a step case: the embedding rows, the final norm, and each layer's (layerWork). */
export function hybridStackWork(c: TaskCase, cfg: Pick<HybridStackConfig, 'hiddenSize' | 'numHiddenLayers'>, layerWork: (layer: number) => { bytes: number; flops: number }) {
  const T = stepTokens(stepSpec(c));
  const it = DTYPE_INFO[c.dtype].itemsize;
  let bytes = 3 * bytesOf([T, cfg.hiddenSize], it) + bytesOf([cfg.hiddenSize], it) + bytesOf([T], 8);
  let flops = 4 * T * cfg.hiddenSize;
  for (let l = 0; l < cfg.numHiddenLayers; l++) {
    const w = layerWork(l);
    bytes += w.bytes;
    flops += w.flops;
  }
  return { bytes, flops };
}
