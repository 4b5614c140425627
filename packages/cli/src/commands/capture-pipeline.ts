/**
 * `fastkernels capture` on a pipeline folder (model_index.json: FLUX.1): text-to-image requests run eagerly with every
 * registry-built module instrumented (model-zoo's capturePipeline), written as OUT/index.json (+ values.safetensors)
 * for `fastkernels bench --captures`. One request per --prompt, all at --size / --steps, seeds --seed, --seed + 1, ...
 */
import { UserError } from '@fastkernels/core';
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';
import { capturePipeline } from '@fastkernels/model-zoo';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';

export interface PipelineCaptureArgs {
  model: string;
  out: string;
  prompt?: string[];
  size?: number;
  steps?: number;
  seed?: number;
  maxSequenceLength?: number;
  json?: boolean;
}

export const DEFAULT_CAPTURE_PROMPT = 'a red fox in the snow';

export function runPipelineCapture(argv: PipelineCaptureArgs, io: Io, backend: Backend, baseline: ModuleRegistry, dtype?: DType): void {
  const prompts = argv.prompt?.length ? argv.prompt.map(String) : [DEFAULT_CAPTURE_PROMPT];
  if (prompts.some((p) => !p.trim())) throw new UserError('a prompt is empty', { field: '--prompt' });
  const size = intFlag('size', argv.size ?? 1024, 1, 1 << 14);
  const steps = intFlag('steps', argv.steps ?? 28, 1, 1000);
  const seed = intFlag('seed', argv.seed ?? 0, 0, Number.MAX_SAFE_INTEGER);
  const maxSequenceLength = intFlag('max-sequence-length', argv.maxSequenceLength ?? 512, 1, 512);
  const requests = prompts.map((prompt, i) => ({ prompt, height: size, width: size, steps, seed: seed + i, maxSequenceLength }));
  const t0 = performance.now();
  const r = capturePipeline({ baseline, dir: argv.model, backend, requests, outDir: argv.out, model: argv.model, ...(dtype ? { dtype } : {}) });
  const tasks = Object.entries(r.index.tasks);
  if (argv.json) {
    io.out(JSON.stringify({ index: r.path, model: argv.model, workload: r.index.workload, tasks: Object.fromEntries(tasks.map(([k, t]) => [k, { init: t.init.length, shapes: t.forward.length, calls: t.forward.reduce((a, f) => a + f.count, 0) }])) }, null, 2) + '\n');
    return;
  }
  io.out(`captured ${r.images} image${r.images === 1 ? '' : 's'} (${r.steps} denoising steps) in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${tasks.length} tasks\n`);
  for (const [id, t] of tasks) io.out(`  ${id.padEnd(30)} ${String(t.init.length).padStart(3)} init  ${String(t.forward.length).padStart(5)} shapes  ${String(t.forward.reduce((a, f) => a + f.count, 0)).padStart(7)} calls\n`);
  io.out(`wrote ${r.path}\n`);
}
