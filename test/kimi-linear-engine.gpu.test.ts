/**
 * Kimi-Linear on the engine on CUDA (tag gpu): tiny-kimi-linear (KDA layers: short convs + per-channel-decay delta-rule
 * states in the pool; an MLA layer with its latent row in the paged cache, absorbed at decode; grouped sigmoid top-k MoE
 * through fused_experts, whose f32 expert GEMMs run on grouped_gemm): greedy generate = the CPU backend batched, alone =
 * batched, and with CUDA-graph decode (engine-cuda-parity.ts). Runs with `dist/gpu-host/run-gpu-tests kimi-linear-engine`.
 */
import { describe, it } from 'vitest';
import tinyKimiLinear from '../packages/model-zoo/fixtures/tiny-kimi-linear/config.json' with { type: 'json' };
import { checkEngineOnCuda } from './engine-cuda-parity.js';

const G = { tags: ['gpu'], timeout: 600_000 };

describe('Kimi-Linear on the CUDA engine', () => {
  it('greedy generate = the CPU backend; alone = batched; graph decode', G, () => {
    checkEngineOnCuda('tiny-kimi-linear', { ...tinyKimiLinear, initializer_range: 0.5 });
  });
});
