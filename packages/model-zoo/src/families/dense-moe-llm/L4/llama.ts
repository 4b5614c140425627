import { DTYPE_INFO, Module, currentTensorParallelGroup, defineTask, hostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import { LLAMA3_8B, tinyLlamaConfig, type LlamaConfig } from '../config.js';
import { FAMILY } from '../family.js';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { initProjections } from '../L2/attention.js';
import type { ParallelLMHead } from '../L2/parallel_embedding.js';
import { decoderWork, type LlamaDecoderLayer } from '../L3/llama_decoder.js';
import { denseModel } from '../reference.js';
import { checkLlamaTensorParallel } from '../tensor-parallel.js';
import { buildTaskStep, stepSpec, stepTokens, taskStepFor } from '../task-batch.js';
import { runDecoderStack } from '../decoder-stack.js';
import { decodeCtx } from '../../../common/decoder-layer.js';

/**
 * vLLM's LlamaModel: embed_tokens (L1/embedding), layers (L3/llama_decoder), norm (L1/rms_norm, fused with
 * the last residual). Part of the L4 wiring, not a task of its own (as in vLLM, where it is LlamaForCausalLM.model).
 * Under tensor parallelism the embedding stays replicated (tensor-parallel.ts says why) and the layers split
 * themselves; a config that does not split over the group is a UserError here, before any layer is built.
 */
export class LlamaModel extends Module {
  readonly embedTokens: VocabParallelEmbedding;
  readonly layers: LlamaDecoderLayer[] = [];
  readonly norm: RMSNorm;
  constructor(readonly config: LlamaConfig) {
    super();
    checkLlamaTensorParallel(config, currentTensorParallelGroup().world);
    this.embedTokens = this.createModule('embed_tokens', 'L1/embedding', config.vocabSize, config.hiddenSize);
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.push(this.createModule(`layers.${i}`, 'L3/llama_decoder', config, i));
    this.norm = this.createModule('norm', 'L1/rms_norm', config.hiddenSize, config.rmsNormEps);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return runDecoderStack(this.embedTokens, this.layers, this.norm, inputIds, positions);
  }
}

/**
 * vLLM's LlamaForCausalLM: model + lm_head (L2/parallel_embedding). forward(inputIds, positions) -> final
 * hidden states [T, H] of every token; computeLogits(hidden [B, H]) -> logits [B, V] (the runner passes the
 * last token of each sequence, as vLLM's logits_indices do). Constructor: (config) where vLLM takes vllm_config.
 */
export class LlamaForCausalLM extends Module {
  readonly model: LlamaModel;
  readonly lmHead: ParallelLMHead;
  constructor(readonly config: LlamaConfig) {
    super();
    this.model = this.registerModule('model', new LlamaModel(config));
    this.lmHead = this.createModule('lm_head', 'L2/parallel_embedding', config.vocabSize, config.hiddenSize);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return this.model.forward(inputIds, positions);
  }

  computeLogits(hiddenStates: Tensor): Tensor {
    return this.lmHead.forward(hiddenStates);
  }
}

const caseConfig = (c: Pick<TaskCase, 'init'>) => c.init[0] as LlamaConfig;

function modelCase(name: string, dtype: 'f32' | 'bf16', config: LlamaConfig, prefillLens: number[], decodeCtxLens: number[]) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: config.hiddenSize, V: config.vocabSize }, init: [config], options: { prefillLens, decodeCtxLens } };
}

export const llamaTask = defineTask(
  {
    id: 'L4/llama',
    level: 4,
    className: 'LlamaForCausalLM',
    family: [FAMILY],
    architectures: ['llama', 'qwen2', 'mistral'],
    mirrors: 'vllm.model_executor.models.llama.LlamaForCausalLM',
    description: 'The Llama model (llama, qwen2, mistral configs): embedding, decoder layers over the paged cache, final norm; computeLogits applies the LM head to the last token of each sequence.',
    init: [{ name: 'config', type: 'object', doc: 'the normalised HF config (LlamaConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['T'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
      { name: 'positions', dtype: 'i64', shape: ['T'] },
    ],
    outputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'after the final norm' }],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L1/embedding', 'L3/llama_decoder', 'L1/rms_norm', 'L2/parallel_embedding'],
    cases: {
      ci: [
        modelCase('tiny-llama-mixed-f32', 'f32', tinyLlamaConfig(), [6, 2], [21, 4]),
        modelCase('tiny-qwen2-mixed-bf16', 'bf16', tinyLlamaConfig({ modelType: 'qwen2', qkvBias: true, tieWordEmbeddings: true, ropeTheta: 1000000 }), [5], [17, 3]),
        modelCase('tiny-mistral-window8-f32', 'f32', tinyLlamaConfig({ modelType: 'mistral', slidingWindows: [8, 8] }), [12], [20, 7]),
      ],
      production: [
        modelCase('llama3-8b-decode-b32', 'bf16', LLAMA3_8B, [], decodeCtx(32, 2048)),
        modelCase('llama3-8b-prefill-4096', 'bf16', LLAMA3_8B, [4096], []),
        modelCase('llama3-8b-prefill-1024x4', 'bf16', LLAMA3_8B, [1024, 1024, 1024, 1024], []),
      ],
    },
  },
  {
    baseline: LlamaForCausalLM,
    makeInputs: (c, ctx, rng) => {
      const cfg = caseConfig(c);
      const step = buildTaskStep(c, ctx, rng, { numLayers: cfg.numHiddenLayers, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim });
      const T = step.positions.length;
      const ids = Array.from({ length: T }, () => rng.int(0, cfg.vocabSize));
      return [fromInts(ctx, ids, [T], 'i64'), fromInts(ctx, step.positions, [T], 'i64')];
    },
    initParameters: (m, _c, rng) => initProjections(m, rng),
    reference: ([ids, positions], params, c) => {
      const cfg = caseConfig(c);
      const h = denseModel(ids!.data, positions!.data, params, cfg, taskStepFor(c).seqs);
      return [hostArray([ids!.data.length, cfg.hiddenSize], h)];
    },
    work: (c) => {
      const cfg = caseConfig(c);
      const T = stepTokens(stepSpec(c));
      const it = DTYPE_INFO[c.dtype].itemsize;
      let bytes = bytesOf([T, cfg.hiddenSize], it) * 3 + bytesOf([cfg.hiddenSize], it) + bytesOf([T], 8);
      let flops = 4 * T * cfg.hiddenSize;
      for (let l = 0; l < cfg.numHiddenLayers; l++) {
        const w = decoderWork(c, cfg, l);
        bytes += w.bytes;
        flops += w.flops;
      }
      return { bytes, flops };
    },
  },
);
