/**
 * gpt-oss on the engine on CUDA (tag gpu): tiny-gpt-oss (sliding and full layers with per-head sinks, YaRN rotary,
 * top-k softmax routing, experts with biases through grouped_gemm, the clamped SwiGLU) with dense experts, then with
 * MXFP4 experts (mxfp4_dequant feeding grouped_gemm): greedy generate = the CPU backend batched, alone = batched, and
 * with CUDA-graph decode (engine-cuda-parity.ts). Runs with `dist/gpu-host/run-gpu-tests gpt-oss-engine`.
 */
import { describe, it } from 'vitest';
import tinyGptOss from '../packages/model-zoo/fixtures/tiny-gpt-oss/config.json' with { type: 'json' };
import { checkEngineOnCuda } from './engine-cuda-parity.js';

const G = { tags: ['gpu'], timeout: 600_000 };

describe('gpt-oss on the CUDA engine', () => {
  it('dense experts: greedy generate = the CPU backend; alone = batched; graph decode', G, () => {
    checkEngineOnCuda('tiny-gpt-oss', { ...tinyGptOss, initializer_range: 0.5 });
  });

  it('MXFP4 experts: the same', G, () => {
    checkEngineOnCuda('tiny-gpt-oss-mxfp4', { ...tinyGptOss, initializer_range: 0.5, quantization_config: { quant_method: 'mxfp4' } });
  });
});
