/**
 * `fastkernels capture` for a pipeline folder (runner 'pipeline', e.g. FLUX.1): the pipeline loaded from the
 * instrumented registry (CaptureRecorder), text-to-image requests run through generateImage with the denoiser step
 * eager (a graph replay calls no forward, so only eager steps are seen), and every registry-built module's init
 * arguments and forward shapes written as the CaptureIndex `fastkernels bench --captures` reads: the text encoders'
 * at the padded prompt lengths, the transformer blocks' at the image's latent tokens (one call per step each), the
 * VAE's at the latent grid.
 */
import type { Backend, CaptureIndex, DType, ModuleRegistry } from '@fastkernels/core';
import { loadPipelineModel } from '../models/load-pipeline.js';
import { CaptureRecorder } from './capture.js';
import type { ImageRequest } from './pipeline-model.js';

export interface PipelineCaptureOptions {
  readonly baseline: ModuleRegistry;
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  /** Seed of the random weights of components without safetensors. */
  readonly initSeed?: number;
  /** The requests to run (graphs forced off). */
  readonly requests: readonly ImageRequest[];
  readonly outDir: string;
  /** The model's name in the index (default: the folder). */
  readonly model?: string;
}

export interface PipelineCaptureResult {
  readonly path: string;
  readonly index: CaptureIndex;
  readonly images: number;
  readonly steps: number;
}

/** The index's workload name of a request list: `images:N:HxW:S steps` (the first request's size and steps). */
export function pipelineWorkloadName(requests: readonly ImageRequest[]): string {
  const r = requests[0]!;
  return `images:${requests.length}:${r.height}x${r.width}:${r.steps}`;
}

export function capturePipeline(o: PipelineCaptureOptions): PipelineCaptureResult {
  if (!o.requests.length) throw new RangeError('capturePipeline: no requests');
  const recorder = new CaptureRecorder(o.baseline);
  const loaded = loadPipelineModel(o.dir, { backend: o.backend, registry: recorder.registry, ...(o.dtype ? { dtype: o.dtype } : {}), ...(o.initSeed !== undefined ? { initSeed: o.initSeed } : {}) });
  let steps = 0;
  try {
    for (const req of o.requests) {
      loaded.model.generateImage({ ...req, graphs: false });
      steps += req.steps;
    }
  } finally {
    loaded.model.dispose();
  }
  const model = o.model ?? o.dir;
  const workload = pipelineWorkloadName(o.requests);
  const path = recorder.write(o.outDir, model, workload);
  return { path, index: recorder.index(model, workload), images: o.requests.length, steps };
}
