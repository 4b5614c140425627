/**
 * The engine's sampled decode on CUDA (tag gpu): requests that draw (temperature > 0, top-k / top-p) mixed with greedy
 * ones, served with CUDA-graph decode, give exactly the tokens of the eager engine. The batch sizes pass through the
 * sampler's two launch paths (one CTA per row below SAMPLER_TUNING.multiCtaMinSampledRows drawing rows, split rows
 * from there), so the decode graphs of buckets >= 8 are captured twice (Ops.samplePath) and each step replays the
 * variant its drawing rows pick. Runs with `dist/gpu-host/run-gpu-tests engine-sampling`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CudaBackend, CudaRuntime } from '@fastkernels/backend-cuda';
import { DEFAULT_SAMPLING, LLMEngine, baselineRegistry, loadLlamaModel, type SamplingParams } from '@fastkernels/model-zoo';
import { describe, expect, it } from 'vitest';
import { tokenDiff, writeTinyTpModel } from './tp/gpu-fixture.js';

const G = { tags: ['gpu'], timeout: 600_000 };

describe('sampled decode through CUDA graphs (sampler path variants)', () => {
  it('12 requests, 10 drawing: graph decode = eager decode, token for token; both sampler paths replayed', G, () => {
    if (!(CudaRuntime.probe().deviceCount ?? 0)) throw new Error('this test needs a GPU');
    const model = join(mkdtempSync(join(tmpdir(), 'fk-engine-sampling-')), 'model');
    writeTinyTpModel(model);
    const backend = new CudaBackend();
    const params = (i: number): SamplingParams =>
      i < 10 ? { ...DEFAULT_SAMPLING, temperature: 0.9, topK: i % 2 ? 40 : 0, topP: i % 3 ? 0.95 : 1, seed: 1000 + i, maxTokens: 6 + 2 * i } : { ...DEFAULT_SAMPLING, maxTokens: 40 };
    const reqs = Array.from({ length: 12 }, (_, i) => ({ promptIds: Array.from({ length: 3 + i }, (_, j) => (i * 37 + j * 11) % 500), params: params(i) }));
    const run = (graphs: boolean) => {
      const m = loadLlamaModel(model, { backend, registry: baselineRegistry(), dtype: 'f32' });
      const e = new LLMEngine(m.model, m.ctx, m.config, { maxModelLen: 256, maxNumSeqs: 16, maxNumBatchedTokens: 512, numKvBlocks: 128, graphs });
      try {
        const out = e.generate(reqs).map((o) => o.tokenIds);
        return { out, graphSteps: e.runner.stats.graphSteps };
      } finally {
        e.dispose();
        m.model.dispose();
      }
    };
    // the per-call choice (not SAMPLER_TUNING.multiCta's forced path): buckets >= multiCtaMinSampledRows have a second graph: 10 drawing rows take it, the greedy tail does not
    expect(backend.ops.samplePath!(16, 512, { sampledRows: 10 })).not.toBe(backend.ops.samplePath!(16, 512, { sampledRows: 0 }));
    const eager = run(false);
    const graphed = run(true);
    expect(graphed.graphSteps).toBeGreaterThan(10);
    const diff = tokenDiff(eager.out, graphed.out);
    expect(diff, diff).toBe('');
  });
});
