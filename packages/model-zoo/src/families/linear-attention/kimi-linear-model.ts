/**
 * Kimi-Linear's entry in the model registry: KimiLinearForCausalLM (model_type kimi_linear, remote code in the model
 * repo) -> parseKimiLinearConfig, the L4/kimi_linear tree (built through the module registry, so candidates apply),
 * kimiLinearWeightRules, the engine. A hybrid stack (docs/recurrent-state.md): the MLA layers keep their latent in the
 * paged cache as one latent tensor (LayerCacheSpec 'latent': one kv head of kv_lora_rank + qk_rope_head_dim per token, no
 * separate values, as vLLM's MLA: half the bytes of a K/V pair, so twice the blocks fit); the KDA layers keep four states per sequence in the state pool, the q, k
 * and v conv states [H * head_dim, W - 1] (vLLM's three conv states) and the delta-rule state [H, K, V], all f32.
 */
import type { CausalLM } from '../../engine/model-runner.js';
import type { ModelArchitecture } from '../../models/registry.js';
import { attentionGeometry } from '../../common/decoder-layer.js';
import { FAMILY } from './family.js';
import { parseKimiLinearConfig, type KimiLinearConfig } from './kimi-linear-config.js';
import { kimiLinearWeightRules } from './kimi-linear-weights.js';

/** The per-layer cache specs: a latent cache for MLA layers, the four states for KDA layers. */
export function kimiLinearLayerCaches(c: KimiLinearConfig) {
  const conv = [c.kdaProjSize, c.kdaConvKernelSize - 1];
  return c.layerTypes.map((t) =>
    t === 'mla'
      ? { kind: 'latent' as const }
      : {
          kind: 'recurrent' as const,
          states: [
            { name: 'q_conv', shape: conv, dtype: 'f32' as const },
            { name: 'k_conv', shape: conv, dtype: 'f32' as const },
            { name: 'v_conv', shape: conv, dtype: 'f32' as const },
            { name: 'recurrent', shape: [c.kdaNumHeads, c.kdaHeadDim, c.kdaHeadDim], dtype: 'f32' as const },
          ],
        },
  );
}

export const kimiLinearArchitecture: ModelArchitecture<KimiLinearConfig> = {
  name: 'kimi_linear',
  family: FAMILY,
  architectures: ['KimiLinearForCausalLM'],
  modelTypes: ['kimi_linear'],
  runner: 'decoder-llm',
  parseConfig: parseKimiLinearConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    // the paged cache holds the MLA latent row: one kv head of kv_lora_rank + qk_rope_head_dim (see the file comment)
    ...attentionGeometry({ ...c, numKeyValueHeads: 1, headDim: c.kvLoraRank + c.qkRopeHeadDim }),
    // the widest feed-forward activation a token has: its top-k experts and the shared experts, or the dense MLP
    intermediateSize: Math.max(c.moeIntermediateSize * (c.numExpertsPerToken + c.numSharedExperts), c.sparseLayers.every(Boolean) ? 0 : c.intermediateSize, 3 * c.kdaProjSize),
    layerCaches: kimiLinearLayerCaches(c),
  }),
  build: (ctx, c) => ctx.registry.createIn<CausalLM>(ctx, 'L4/kimi_linear', c),
  weightRules: kimiLinearWeightRules,
  describe: (c) =>
    `kimi_linear, ${c.numHiddenLayers} layers (${c.layerTypes.filter((t) => t === 'mla').length} MLA, the rest KDA), hidden ${c.hiddenSize}, ${c.numExperts} experts top-${c.numExpertsPerToken} + ${c.numSharedExperts} shared`,
};
