/**
 * Qwen3-Next's entry in the model registry: HF's Qwen3NextForCausalLM (model_type qwen3_next) -> parseQwen3NextConfig,
 * the L4/qwen3_next tree (built through the module registry, so candidates apply), qwen3NextWeightRules, the engine.
 * A hybrid stack (docs/recurrent-state.md): full-attention layers keep paged K/V; gated-DeltaNet layers keep two states
 * per sequence in the state pool, the conv state [conv_dim, W - 1] (the last W - 1 inputs of the short conv, vLLM's
 * conv state) and the delta-rule state [HV, K, V], both f32.
 */
import type { CausalLM } from '../../engine/model-runner.js';
import type { ModelArchitecture } from '../../models/registry.js';
import { FAMILY } from './family.js';
import { parseQwen3NextConfig, type Qwen3NextConfig } from './qwen3-next-config.js';
import { qwen3NextWeightRules } from './qwen3-next-weights.js';
import { attentionGeometry } from '../../common/decoder-layer.js';

/** The per-layer cache specs: attention for full_attention layers, the two states for linear_attention layers. */
export function qwen3NextLayerCaches(c: Qwen3NextConfig) {
  return c.layerTypes.map((t) =>
    t === 'full_attention'
      ? { kind: 'attention' as const }
      : {
          kind: 'recurrent' as const,
          states: [
            { name: 'conv', shape: [c.convDim, c.linearConvKernelDim - 1], dtype: 'f32' as const },
            { name: 'recurrent', shape: [c.linearNumValueHeads, c.linearKeyHeadDim, c.linearValueHeadDim], dtype: 'f32' as const },
          ],
        },
  );
}

export const qwen3NextArchitecture: ModelArchitecture<Qwen3NextConfig> = {
  name: 'qwen3_next',
  family: FAMILY,
  architectures: ['Qwen3NextForCausalLM'],
  modelTypes: ['qwen3_next'],
  runner: 'decoder-llm',
  parseConfig: parseQwen3NextConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    ...attentionGeometry(c),
    // the widest feed-forward activation a token has: its top-k experts and the shared expert, or the dense MLP
    intermediateSize: Math.max(c.moeIntermediateSize * c.numExpertsPerTok + c.sharedExpertIntermediateSize, c.sparseLayers.every(Boolean) ? 0 : c.intermediateSize, 2 * c.linearKeyDim + 2 * c.linearValueDim),
    layerCaches: qwen3NextLayerCaches(c),
  }),
  build: (ctx, c) => ctx.registry.createIn<CausalLM>(ctx, 'L4/qwen3_next', c),
  weightRules: qwen3NextWeightRules,
  describe: (c) =>
    `qwen3_next, ${c.numHiddenLayers} layers (${c.layerTypes.filter((t) => t === 'full_attention').length} gated attention, the rest gated DeltaNet), hidden ${c.hiddenSize}, ${c.numExperts} experts top-${c.numExpertsPerTok} + shared`,
};
