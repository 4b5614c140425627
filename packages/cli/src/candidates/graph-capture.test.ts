import { join, relative, resolve } from 'node:path';
import { graphCaptureBlocker } from '@fastkernels/core';
import { E2eReportSchema } from '@fastkernels/macroeval';
import { describe, expect, it } from 'vitest';
import { environment } from '../env.js';
import { EsbuildCandidateLoader } from './loader.js';
import type { TorchWorkerProcess } from './torch/channel.js';
import { torchCandidateClass } from './torch/module.js';

/**
 * Which candidate languages can be captured into a CUDA graph (e2e turns graph decode off for a set holding one that
 * cannot; model-zoo's e2e.test.ts tests that policy): .py runs in its worker process (no), .cu launches its kernels on
 * the current stream (yes), .ts runs in this process (yes, unless it marks itself).
 */
const ROOT = resolve(__dirname, '../../../..');
const examples = (set: string) => relative(process.cwd(), join(ROOT, 'examples/candidates', set));

describe('candidate languages and CUDA-graph capture', () => {
  it('a PyTorch candidate class is marked not capturable, naming why', () => {
    const task = environment().taskMap.get('L1/rms_norm')!;
    const cls = torchCandidateClass(task, {} as TorchWorkerProcess); // the worker is used only by instances
    expect(graphCaptureBlocker(cls)).toMatch(/^a PyTorch candidate \(runs in its worker process/);
  });

  it('CUDA C++ and TypeScript candidates are capturable', async () => {
    const tasks = environment().taskMap;
    const cu = await new EsbuildCandidateLoader({ compileCuda: async () => {}, filter: (f) => f.taskId === 'L1/l2_norm' }).load(examples('cuda-demo'), tasks);
    const ts = await new EsbuildCandidateLoader().load(examples('cpu-demo'), tasks);
    expect(cu.candidates).toHaveLength(1);
    expect(ts.candidates.length).toBeGreaterThan(0);
    for (const c of [...cu.candidates, ...ts.candidates]) expect(graphCaptureBlocker(c.cls), c.file.relPath).toBeUndefined();
  });

  it('the e2e record carries the policy: graphs false and the reason', () => {
    const model = { model: 'm', family: 'f', outcome: 'ok', throughputSpeedup: 1, discrepancies: [0], graphs: false, graphsReason: 'L1/rms_norm: a PyTorch candidate (...): not capturable' };
    expect(E2eReportSchema.parse({ models: [model] }).models[0]!.graphsReason).toMatch(/not capturable/);
  });
});
