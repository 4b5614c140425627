/**
 * The engine's sampled decode on CUDA (tag gpu): requests that draw (temperature > 0, top-k / top-p) mixed with greedy
 * ones, served with CUDA-graph decode, give exactly the tokens of the eager engine. The batch sizes pass through the
 * sampler's two launch paths (one CTA per row below the tuning's sampler.multiCtaMinSampledRows drawing rows, split rows
 * from there; and, for all-greedy steps of up to sampler.greedySplitMaxRows rows, the greedy split), so some
 * buckets' decode graphs are captured twice (Ops.samplePath) and each step replays the variant its drawing rows pick
 * (the test sets the route's threshold to 8 drawing rows). The same with chained decode
 * (EngineOptions.chainDecode). Runs with `dist/gpu-host/run-gpu-tests engine-sampling`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CudaBackend, CudaRuntime, cudaTuning, withTuning } from '@fastkernels/backend-cuda';
import { DEFAULT_SAMPLING, LLMEngine, baselineRegistry, loadModel, type SamplingParams } from '@fastkernels/model-zoo';
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
    // at a threshold of 8 drawing rows, so that steps take both sampler paths
    const run = (graphs: boolean, chainDecode = false) => withTuning('sampler', { multiCtaMinSampledRows: 8 }, () => {
      const m = loadModel(model, { backend, registry: baselineRegistry(), dtype: 'f32' });
      const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 256, maxNumSeqs: 16, maxNumBatchedTokens: 512, numKvBlocks: 128, graphs, chainDecode });
      try {
        const out = e.generate(reqs).map((o) => o.tokenIds);
        return { out, graphSteps: e.runner.stats.graphSteps, graphs: e.runner.graphCount, buckets: e.runner.graphBuckets, chain: { ...e.chainStats } };
      } finally {
        e.dispose();
        m.model.dispose();
      }
    });
    const eager = run(false);
    const graphed = run(true);
    // one capture per sampler path of each bucket (at the test's threshold of 8 drawing rows): buckets 8 and 16 twice
    // (10 drawing rows take the split-row variant, the greedy tail the other), and buckets up to
    // sampler.greedySplitMaxRows twice (an all-greedy step takes the greedy split)
    const greedySplit = graphed.buckets.filter((bs) => bs <= cudaTuning().sampler.greedySplitMaxRows).length;
    expect(graphed.buckets).toEqual([1, 2, 4, 8, 16]);
    expect(graphed.graphs).toBe(graphed.buckets.length + 2 + greedySplit);
    expect(graphed.graphSteps).toBeGreaterThan(10);
    const diff = tokenDiff(eager.out, graphed.out);
    expect(diff, diff).toBe('');
    // chained decode (each graph step launched before the previous step's tokens are read, input ids copied on the
    // device, tokens downloaded behind an event): the same tokens, and the steps launched ahead were used
    const chained = run(true, true);
    expect(chained.chain.used).toBeGreaterThan(5);
    const diffChained = tokenDiff(eager.out, chained.out);
    expect(diffChained, diffChained).toBe('');
  });
});
