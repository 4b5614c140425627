import { defineTask, hostArray, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../../common/inputs.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { decodeCtx } from '../../../common/decoder-layer.js';
import { FAMILY } from '../family.js';
import { HybridForCausalLM, HybridModel, hybridStackWork } from '../hybrid-model.js';
import { kimiDecoderWork, type KimiLinearDecoderLayer } from '../L3/kimi_linear_decoder.js';
import { KIMI_STATE_TOLERANCE, initKimiParameters, kimiConfigOf } from '../kimi-linear-cases.js';
import { KIMI_LINEAR_48B, tinyKimiLinearConfig, type KimiLinearConfig } from '../kimi-linear-config.js';
import { refKimiLinearModel } from '../kimi-linear-reference.js';
import { buildKimiStep, kimiStepFor } from '../kimi-linear-step.js';

/**
 * Kimi-Linear's KimiLinearModel: embed_tokens (L1/embedding), layers (L3/kimi_linear_decoder: KDA and MLA in the
 * config's pattern), norm (RMSNorm, fused with the last residual). forward(inputIds [T], positions [T]) -> final hidden
 * states [T, D]. One process only (no tensor / expert parallelism yet).
 */
export class KimiLinearModel extends HybridModel<KimiLinearDecoderLayer, RMSNorm> {
  constructor(readonly config: KimiLinearConfig) {
    super(config, { modelType: 'kimi_linear', decoder: 'L3/kimi_linear_decoder', norm: 'L1/rms_norm' });
  }
}

/**
 * KimiLinearForCausalLM on the engine (vLLM's model interface): model + lm_head (L1/linear). forward(inputIds,
 * positions) -> final hidden states [T, D] over the step's packed tokens, the MLA layers' K/V in the paged cache and the
 * KDA layers' conv and recurrent states in the state pool (forward context); computeLogits(hidden rows) -> [rows, vocab].
 */
export class KimiLinearForCausalLM extends HybridForCausalLM<KimiLinearModel> {
  constructor(readonly config: KimiLinearConfig) {
    super(config, () => new KimiLinearModel(config));
  }
}

function modelCase(name: string, dtype: 'f32' | 'bf16', cfg: KimiLinearConfig, prefillLens: number[], decodeCtxLens: number[]) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg], options: { prefillLens, decodeCtxLens } };
}
/** The 48B's widths with its first 4 layers (3 KDA, then MLA; layer 0 dense): the whole model does not fit a task case. */
const KL48_4L = { ...KIMI_LINEAR_48B, numHiddenLayers: 4, layerTypes: KIMI_LINEAR_48B.layerTypes.slice(0, 4), sparseLayers: KIMI_LINEAR_48B.sparseLayers.slice(0, 4) };

export const kimiLinearTask = defineTask(
  {
    id: 'L4/kimi_linear',
    level: 4,
    className: 'KimiLinearForCausalLM',
    family: [FAMILY],
    architectures: ['kimi_linear'],
    mirrors: 'vllm.model_executor.models.kimi_linear.KimiLinearForCausalLM',
    description: 'The Kimi-Linear text model: embedding, the hybrid layer stack (KDA with states in the pool, NoPE MLA over the paged cache, DeepSeek-V3-style sparse MoE with shared experts), final RMSNorm; computeLogits applies the LM head.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed Kimi-Linear config (KimiLinearConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['T'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
      { name: 'positions', dtype: 'i64', shape: ['T'] },
    ],
    outputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'after the final norm' }],
    tolerance: { bf16: { atol: 8e-2, rtol: 8e-2 }, f32: KIMI_STATE_TOLERANCE },
    imports: ['L1/embedding', 'L3/kimi_linear_decoder', 'L1/rms_norm', 'L1/linear'],
    cases: {
      ci: [
        modelCase('tiny-mixed-f32', 'f32', tinyKimiLinearConfig(), [6, 2], [21, 4]),
        // bf16 with dense MLPs: through four layers a near tie of the routing can flip under bf16 rounding (the sparse
        // block's own bf16 case is L2/kimi_moe's)
        modelCase('tiny-prefill-dense-mlp-bf16', 'bf16', tinyKimiLinearConfig({ first_k_dense_replace: 4 }), [7], []),
      ],
      production: [
        modelCase('kimi-linear-48b-4-layers-decode-b32', 'bf16', KL48_4L, [], decodeCtx(32, 4096)),
        modelCase('kimi-linear-48b-4-layers-prefill-4096', 'bf16', KL48_4L, [4096], []),
      ],
    },
  },
  {
    baseline: KimiLinearForCausalLM,
    makeInputs: (c, ctx, rng) => {
      const cfg = kimiConfigOf(c);
      const step = buildKimiStep(c, ctx, rng, cfg, cfg.numHiddenLayers);
      const T = step.positions.length;
      return [fromInts(ctx, Array.from({ length: T }, () => rng.int(0, cfg.vocabSize)), [T], 'i64'), fromInts(ctx, step.positions, [T], 'i64')];
    },
    initParameters: (m, _c, rng) => initKimiParameters(m, rng),
    reference: ([ids], params, c) => {
      const cfg = kimiConfigOf(c);
      const step = kimiStepFor(c);
      return [hostArray([ids!.data.length, cfg.hiddenSize], refKimiLinearModel(ids!.data, params, cfg, step.seqs, step.states))];
    },
    work: (c) => modelWork(c),
  },
);

function modelWork(c: TaskCase) {
  const cfg = kimiConfigOf(c);
  return hybridStackWork(c, cfg, (l) => kimiDecoderWork(c, cfg, l));
}
