/**
 * GLA on the engine on CUDA (tag gpu): the tiny-gla fixture with seeded wide random weights (clear greedy choices),
 * prompts from 1 to 90 tokens (the longer ones prefill through chunk_gla, chunked across steps by the token budget;
 * decode through fused_recurrent_gla over the state pool) give the CPU backend's greedy tokens, token for token, in
 * eager decode and with CUDA-graph decode (the state update replayed inside the graph, padding rows -1).
 * Runs with `dist/gpu-host/run-gpu-tests gla-engine`: the GPU host has the bundle and no checkout, so the fixture's
 * config is imported (bundled with the test), not read from packages/model-zoo/fixtures.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { CudaBackend, CudaRuntime } from '@fastkernels/backend-cuda';
import type { Backend } from '@fastkernels/core';
import { LLMEngine, baselineRegistry, loadModel, writeRandomModelCheckpoint } from '@fastkernels/model-zoo';
import { afterAll, describe, expect, it } from 'vitest';
import tinyGlaConfig from '../packages/model-zoo/fixtures/tiny-gla/config.json' with { type: 'json' };
import { tokenDiff } from './tp/gpu-fixture.js';

const G = { tags: ['gpu'], timeout: 600_000 };
const tmp = mkdtempSync(join(tmpdir(), 'fk-gla-engine-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('GLA on the CUDA engine', () => {
  it('greedy generate = the CPU backend, eager and with graph decode', G, () => {
    if (!(CudaRuntime.probe().deviceCount ?? 0)) throw new Error('this test needs a GPU');
    const dir = join(tmp, 'tiny-gla');
    const raw: Record<string, unknown> = { ...tinyGlaConfig, initializer_range: 0.5 };
    writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), seed: 7, dtype: 'f32' });
    const lens = [1, 90, 5, 23, 2, 70, 12, 40];
    // ids below the fixture's vocabulary (64): the engine rejects any past it
    const reqs = lens.map((n, i) => ({ promptIds: Array.from({ length: n }, (_, j) => (i * 37 + j * 11 + 3) % tinyGlaConfig.vocab_size), params: { maxTokens: 4 + ((i * 5) % 9) } }));
    const run = (backend: Backend, graphs: boolean) => {
      const m = loadModel(dir, { backend, registry: baselineRegistry(), dtype: 'f32' });
      const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: 8, maxNumBatchedTokens: 64, graphs });
      try {
        return { out: e.generate(reqs).map((o) => o.tokenIds), graphSteps: e.runner.stats.graphSteps };
      } finally {
        e.dispose();
        m.model.dispose();
      }
    };
    const want = run(new CpuBackend(), false).out;
    expect(new Set(want.flat()).size, 'the continuations are not one token').toBeGreaterThan(3);
    const cuda = new CudaBackend();
    const eager = run(cuda, false);
    expect(tokenDiff(want, eager.out), tokenDiff(want, eager.out)).toBe('');
    const graphed = run(cuda, true);
    expect(graphed.graphSteps).toBeGreaterThan(5);
    expect(tokenDiff(want, graphed.out), tokenDiff(want, graphed.out)).toBe('');
  });
});
