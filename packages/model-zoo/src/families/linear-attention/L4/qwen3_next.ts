import { defineTask, hostArray, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../../common/inputs.js';
import type { GemmaRMSNorm } from '../../../tasks/L1/norm/gemma_rms_norm.js';
import { FAMILY } from '../family.js';
import { HybridForCausalLM, HybridModel, hybridStackWork } from '../hybrid-model.js';
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
export class Qwen3NextModel extends HybridModel<Qwen3NextDecoderLayer, GemmaRMSNorm> {
  constructor(readonly config: Qwen3NextConfig) {
    super(config, { modelType: 'qwen3_next', decoder: 'L3/qwen3_next_decoder', norm: 'L1/gemma_rms_norm' });
  }
}

/**
 * HF's Qwen3NextForCausalLM on the engine (vLLM's model interface): model + lm_head (L1/linear). forward(inputIds,
 * positions) -> final hidden states [T, D] over the step's packed tokens, the attention layers' K/V in the paged cache
 * and the DeltaNet layers' conv and recurrent states in the state pool (forward context); computeLogits(hidden rows) ->
 * [rows, vocab]. The MTP head of the released checkpoints is not built (its tensors are ignored on load).
 */
export class Qwen3NextForCausalLM extends HybridForCausalLM<Qwen3NextModel> {
  constructor(readonly config: Qwen3NextConfig) {
    super(config, () => new Qwen3NextModel(config));
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
  return hybridStackWork(c, cfg, (l) => decoderWork(c, cfg, l));
}
