/**
 * Inputs of the Qwen3-Next tasks that run one engine step (L3 decoder, L4 model): hybrid-step.ts with the gated-attention
 * layers' K/V in the paged cache and each DeltaNet layer's two pools, the conv state [convDim, W - 1] and the
 * delta-rule state [HV, K, V].
 */
import { hybridStepBuilder, type HybridStep } from './hybrid-step.js';
import type { Qwen3NextConfig } from './qwen3-next-config.js';
import type { GdnState } from './qwen3-next-reference.js';

export type Qwen3NextStep = HybridStep<GdnState>;

const qwen3NextSteps = hybridStepBuilder<Qwen3NextConfig, GdnState>({
  kvLayout: (cfg) => ({ numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim }),
  isRecurrent: (cfg, l) => cfg.layerTypes[l] === 'linear_attention',
  pools: (cfg) => [
    { slotShape: [cfg.convDim, cfg.linearConvKernelDim - 1], scale: 1 },
    { slotShape: [cfg.linearNumValueHeads, cfg.linearKeyHeadDim, cfg.linearValueHeadDim], scale: 0.5 },
  ],
  state: ([conv, recurrent]) => ({ conv: conv!, recurrent: recurrent! }),
});

export const qwen3NextStepFor = qwen3NextSteps.stepFor;
/** Build the step for layers [0, numLayers) (an L3 case: up to its layer; the others' pools are empty holes). */
export const buildQwen3NextStep = qwen3NextSteps.build;
