/**
 * Qwen3-Next on the engine on CUDA (tag gpu): tiny-qwen3-next (gated delta rule layers: causal conv + delta-rule states
 * in the pool; a gated full-attention layer on the paged cache; shared-expert MoE through fused_experts, whose f32
 * expert GEMMs run on grouped_gemm): greedy generate = the CPU backend batched, alone = batched, and with CUDA-graph
 * decode (engine-cuda-parity.ts). Runs with `dist/gpu-host/run-gpu-tests qwen3-next-engine`.
 */
import { describe, it } from 'vitest';
import tinyQwen3Next from '../packages/model-zoo/fixtures/tiny-qwen3-next/config.json' with { type: 'json' };
import { checkEngineOnCuda } from './engine-cuda-parity.js';

const G = { tags: ['gpu'], timeout: 600_000 };

describe('Qwen3-Next on the CUDA engine', () => {
  it('greedy generate = the CPU backend; alone = batched; graph decode', G, () => {
    checkEngineOnCuda('tiny-qwen3-next', { ...tinyQwen3Next, initializer_range: 0.5 });
  });
});
