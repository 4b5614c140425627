/**
 * `fastkernels capture` on a pipeline folder (model_index.json: FLUX.1): text-to-image requests run eagerly with every
 * registry-built module instrumented (model-zoo's capturePipeline), written as OUT/index.json (+ values.safetensors)
 * for `fastkernels bench --captures`. One request per --prompt, all at --size / --steps, seeds --seed, --seed + 1, ...
 */
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';
import { capturePipeline } from '@fastkernels/model-zoo';
import type { Io } from '../io.js';
import { printCaptureSummary, type CaptureCommonArgs } from './capture-common.js';
import { pipelineRequests, type PipelineRequestArgs } from './e2e-pipeline.js';

export interface PipelineCaptureArgs extends CaptureCommonArgs, PipelineRequestArgs {}

export function runPipelineCapture(argv: PipelineCaptureArgs, io: Io, backend: Backend, baseline: ModuleRegistry, dtype?: DType): void {
  const { requests } = pipelineRequests(argv);
  const startedAt = performance.now();
  const r = capturePipeline({ baseline, dir: argv.model, backend, requests, outDir: argv.out, model: argv.model, ...(dtype ? { dtype } : {}) });
  const what = `${r.images} image${r.images === 1 ? '' : 's'} (${r.steps} denoising steps)`;
  printCaptureSummary(io, argv, r, { model: argv.model, workload: r.index.workload, what, startedAt });
}
