import { DTYPE_INFO, Module, UserError, currentTensorParallelGroup, defineTask, hostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import type { CausalLM } from '../../../engine/model-runner.js';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { GemmaRMSNorm } from '../../../tasks/L1/norm/gemma_rms_norm.js';
import { runDecoderStack } from '../../dense-moe-llm/decoder-stack.js';
import { stepSpec, stepTokens } from '../../dense-moe-llm/task-batch.js';
import { FAMILY } from '../family.js';
import { decoderWork, type Qwen3NextDecoderLayer } from '../L3/qwen3_next_decoder.js';
import { QN_STATE_TOLERANCE, initQwen3NextParameters, qnConfigOf } from '../qwen3-next-cases.js';
import { QWEN3_NEXT_80B, tinyQwen3NextConfig, type Qwen3NextConfig } from '../qwen3-next-config.js';
import { refQwen3NextModel } from '../qwen3-next-reference.js';
import { buildQwen3NextStep, qwen3NextStepFor } from '../qwen3-next-step.js';
import { decodeCtx } from '../../../common/decoder-layer.js';

/**
 * HF's Qwen3NextModel: embed_tokens (L1/embedding), layers (L3/qwen3_next_decoder: gated DeltaNet and gated attention in
 * the config's pattern), norm (zero-centred, fused with the last residual). forward(inputIds [T], positions [T]) ->
 * final hidden states [T, D]. One process only (no tensor / expert parallelism yet).
 */
export class Qwen3NextModel extends Module {
  readonly embedTokens: VocabParallelEmbedding;
  readonly layers: Qwen3NextDecoderLayer[] = [];
  readonly norm: GemmaRMSNorm;
  constructor(readonly config: Qwen3NextConfig) {
    super();
    const world = currentTensorParallelGroup().world;
    if (world > 1) throw new UserError(`qwen3_next models do not run tensor parallel yet (${world} ranks)`, { field: '--tp', fix: 'drop --tp' });
    this.embedTokens = this.createModule('embed_tokens', 'L1/embedding', config.vocabSize, config.hiddenSize);
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.push(this.createModule(`layers.${i}`, 'L3/qwen3_next_decoder', config, i));
    this.norm = this.createModule('norm', 'L1/gemma_rms_norm', config.hiddenSize, config.rmsNormEps);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return runDecoderStack(this.embedTokens, this.layers, this.norm, inputIds, positions);
  }
}

/**
 * HF's Qwen3NextForCausalLM on the engine (vLLM's model interface): model + lm_head (L1/linear). forward(inputIds,
 * positions) -> final hidden states [T, D] over the step's packed tokens, the attention layers' K/V in the paged cache
 * and the DeltaNet layers' conv and recurrent states in the state pool (forward context); computeLogits(hidden rows) ->
 * [rows, vocab]. The MTP head of the released checkpoints is not built (its tensors are ignored on load).
 */
export class Qwen3NextForCausalLM extends Module implements CausalLM {
  readonly model: Qwen3NextModel;
  readonly lmHead: Linear;
  constructor(readonly config: Qwen3NextConfig) {
    super();
    this.model = this.registerModule('model', new Qwen3NextModel(config));
    this.lmHead = this.createModule('lm_head', 'L1/linear', config.hiddenSize, config.vocabSize, false);
  }

  forward(inputIds: Tensor, positions: Tensor): Tensor {
    return this.model.forward(inputIds, positions);
  }

  computeLogits(hiddenStates: Tensor): Tensor {
    return this.lmHead.forward(hiddenStates);
  }
}

function modelCase(name: string, dtype: 'f32' | 'bf16', cfg: Qwen3NextConfig, prefillLens: number[], decodeCtxLens: number[]) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg], options: { prefillLens, decodeCtxLens } };
}
/** The 80B's widths with 4 layers (one full pattern: 3 DeltaNet, 1 attention): the whole model does not fit a task case. */
const QN80_4L = { ...QWEN3_NEXT_80B, numHiddenLayers: 4, layerTypes: QWEN3_NEXT_80B.layerTypes.slice(0, 4), sparseLayers: QWEN3_NEXT_80B.sparseLayers.slice(0, 4) };

export const qwen3NextTask = defineTask(
  {
    id: 'L4/qwen3_next',
    level: 4,
    className: 'Qwen3NextForCausalLM',
    family: [FAMILY],
    architectures: ['qwen3_next'],
    mirrors: 'transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextForCausalLM',
    description: 'The Qwen3-Next text model: embedding, the hybrid layer stack (gated DeltaNet with states in the pool, gated attention over the paged cache, sparse MoE with a shared expert), final zero-centred norm; computeLogits applies the LM head.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed Qwen3-Next config (Qwen3NextConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['T'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
      { name: 'positions', dtype: 'i64', shape: ['T'] },
    ],
    outputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'after the final norm' }],
    tolerance: { bf16: { atol: 8e-2, rtol: 8e-2 }, f32: QN_STATE_TOLERANCE },
    imports: ['L1/embedding', 'L3/qwen3_next_decoder', 'L1/gemma_rms_norm', 'L1/linear'],
    cases: {
      ci: [
        modelCase('tiny-mixed-f32', 'f32', tinyQwen3NextConfig(), [6, 2], [21, 4]),
        // bf16 with dense MLPs: with the sparse blocks a near tie of the top-2 routing flips under bf16 rounding through
        // four layers (the sparse block's own bf16 case is L2/shared_expert_moe's)
        modelCase('tiny-prefill-dense-mlp-bf16', 'bf16', tinyQwen3NextConfig({ mlp_only_layers: [0, 1, 2, 3] }), [7], []),
      ],
      production: [
        modelCase('qwen3-next-80b-4-layers-decode-b32', 'bf16', QN80_4L, [], decodeCtx(32, 4096)),
        modelCase('qwen3-next-80b-4-layers-prefill-4096', 'bf16', QN80_4L, [4096], []),
      ],
    },
  },
  {
    baseline: Qwen3NextForCausalLM,
    makeInputs: (c, ctx, rng) => {
      const cfg = qnConfigOf(c);
      const step = buildQwen3NextStep(c, ctx, rng, cfg, cfg.numHiddenLayers);
      const T = step.positions.length;
      return [fromInts(ctx, Array.from({ length: T }, () => rng.int(0, cfg.vocabSize)), [T], 'i64'), fromInts(ctx, step.positions, [T], 'i64')];
    },
    initParameters: (m, _c, rng) => initQwen3NextParameters(m, rng),
    reference: ([ids, positions], params, c) => {
      const cfg = qnConfigOf(c);
      const step = qwen3NextStepFor(c);
      return [hostArray([ids!.data.length, cfg.hiddenSize], refQwen3NextModel(ids!.data, positions!.data, params, cfg, step.seqs, step.states))];
    },
    work: (c) => modelWork(c),
  },
);

function modelWork(c: TaskCase) {
  const cfg = qnConfigOf(c);
  const T = stepTokens(stepSpec(c));
  const it = DTYPE_INFO[c.dtype].itemsize;
  let bytes = 3 * bytesOf([T, cfg.hiddenSize], it) + bytesOf([cfg.hiddenSize], it) + bytesOf([T], 8);
  let flops = 4 * T * cfg.hiddenSize;
  for (let l = 0; l < cfg.numHiddenLayers; l++) {
    const w = decoderWork(c, cfg, l);
    bytes += w.bytes;
    flops += w.flops;
  }
  return { bytes, flops };
}
