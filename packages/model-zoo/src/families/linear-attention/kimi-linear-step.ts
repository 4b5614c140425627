/**
 * Inputs of the Kimi-Linear tasks that run one engine step (L3 decoder, L4 model): hybrid-step.ts with the MLA layers'
 * latent rows in the paged cache (one latent tensor of one kv head of kv_lora_rank + qk_rope_head_dim) and each KDA layer's four pools, the
 * q, k and v conv states [C, W - 1] and the recurrent state [H, K, K].
 */
import { hybridStepBuilder, type HybridStep } from './hybrid-step.js';
import type { KimiLinearConfig } from './kimi-linear-config.js';
import type { KdaState } from './kimi-linear-reference.js';

export type KimiStep = HybridStep<KdaState>;

const kimiSteps = hybridStepBuilder<KimiLinearConfig, KdaState>({
  kvLayout: (cfg) => ({ numKvHeads: 1, headDim: cfg.kvLoraRank + cfg.qkRopeHeadDim, latent: true }),
  isRecurrent: (cfg, l) => cfg.layerTypes[l] === 'kda',
  pools: (cfg) => {
    const conv = { slotShape: [cfg.kdaProjSize, cfg.kdaConvKernelSize - 1], scale: 1 };
    return [conv, conv, conv, { slotShape: [cfg.kdaNumHeads, cfg.kdaHeadDim, cfg.kdaHeadDim], scale: 0.5 }];
  },
  state: ([qConv, kConv, vConv, recurrent]) => ({ qConv: qConv!, kConv: kConv!, vConv: vConv!, recurrent: recurrent! }),
});

export const kimiStepFor = kimiSteps.stepFor;
/** Build the step for layers [0, numLayers) (an L3 case: up to its layer; the others' pools are empty holes). */
export const buildKimiStep = kimiSteps.build;
