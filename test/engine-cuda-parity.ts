/**
 * The engine-on-CUDA check the tiny LLM fixtures share (the GLA engine GPU test's conventions): a seeded random f32
 * checkpoint with wide weights (clear greedy choices), prompts of 1 to 90 tokens (chunked prefill by the token budget),
 * then greedy `generate` on CUDA, token for token against the CPU backend (float64 math):
 * - batched, eager decode = the CPU backend;
 * - each request alone (one sequence at a time) = the batched run;
 * - batched with CUDA-graph decode = the CPU backend, with graph steps taken.
 * The GPU host has the bundle and no checkout, so callers import the fixture's config.json (bundled with the test).
 * Why exact tokens are expected: on the CPU (2026-12-06) the smallest top-1 / top-2 logprob gap over every generated
 * token of these prompts was 2.4e-2 (gpt-oss), 1.7e-2 (MXFP4), 4.9e-3 (Qwen3-Next), 3.9e-3 (Kimi-Linear) at
 * initializer_range 0.5, and an f32-rounded CPU run gave the float64 run's tokens; f32 kernels differ by ~1e-6.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { CudaBackend, CudaRuntime } from '@fastkernels/backend-cuda';
import type { Backend } from '@fastkernels/core';
import { LLMEngine, baselineRegistry, loadModel, writeRandomModelCheckpoint, type GraphRuntime } from '@fastkernels/model-zoo';
import { expect } from 'vitest';
import { tokenDiff } from './tp/gpu-fixture.js';

export interface EngineParityResult {
  readonly graphSteps: number;
}

/** The device side of the check: CUDA by default; a CPU stand-in (cuda-coverage-backend.ts) checks the plumbing here. */
export interface ParityDevice {
  readonly backend: Backend;
  /** the engine's `graphs` option for the graph-decode run (true: the backend's own CUDA graphs) */
  readonly graphs: true | GraphRuntime;
}

/** Runs the three comparisons for one model config on CUDA; throws (with the first differing tokens) on a mismatch. */
export function checkEngineOnCuda(name: string, raw: Record<string, unknown>): EngineParityResult {
  if (!(CudaRuntime.probe().deviceCount ?? 0)) throw new Error('this test needs a GPU');
  return checkEngineParity(name, raw, { backend: new CudaBackend(), graphs: true });
}

export function checkEngineParity(name: string, raw: Record<string, unknown>, device: ParityDevice): EngineParityResult {
  const tmp = mkdtempSync(join(tmpdir(), `fk-${name}-engine-`));
  try {
    const dir = join(tmp, name);
    writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), seed: 7, dtype: 'f32' });
    const vocab = raw.vocab_size as number;
    const lens = [1, 90, 5, 23, 2, 70, 12, 40];
    // ids below the fixture's vocabulary: the engine rejects any past it
    const reqs = lens.map((n, i) => ({ promptIds: Array.from({ length: n }, (_, j) => (i * 37 + j * 11 + 3) % vocab), params: { maxTokens: 4 + ((i * 5) % 9) } }));
    const run = (backend: Backend, opts: { graphs: boolean | GraphRuntime; maxNumSeqs?: number }) => {
      const m = loadModel(dir, { backend, registry: baselineRegistry(), dtype: 'f32' });
      const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: opts.maxNumSeqs ?? 8, maxNumBatchedTokens: 64, graphs: opts.graphs });
      try {
        return { out: e.generate(reqs).map((o) => o.tokenIds), graphSteps: e.runner.stats.graphSteps };
      } finally {
        e.dispose();
        m.model.dispose();
      }
    };
    const want = run(new CpuBackend(), { graphs: false }).out;
    expect(new Set(want.flat()).size, 'the continuations are not one token').toBeGreaterThan(3);
    const cuda = device.backend;
    const eager = run(cuda, { graphs: false }).out;
    expect(tokenDiff(want, eager), `${name} eager, batched vs the CPU backend:\n${tokenDiff(want, eager)}`).toBe('');
    const alone = run(cuda, { graphs: false, maxNumSeqs: 1 }).out;
    expect(tokenDiff(eager, alone), `${name} alone vs batched on CUDA:\n${tokenDiff(eager, alone)}`).toBe('');
    const graphed = run(cuda, { graphs: device.graphs });
    expect(graphed.graphSteps, `${name}: decode steps replayed from CUDA graphs`).toBeGreaterThan(5);
    expect(tokenDiff(want, graphed.out), `${name} graph decode vs the CPU backend:\n${tokenDiff(want, graphed.out)}`).toBe('');
    return { graphSteps: graphed.graphSteps };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
