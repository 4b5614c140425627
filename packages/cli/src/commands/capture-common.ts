/**
 * What every `fastkernels capture` runner takes alike (the LLM workload in capture.ts, and the pipeline, vision and
 * encoder folder runners): the folder, the output folder, --json and the seed of generated inputs; their flags with
 * help, and the summary each prints of what it wrote. Each runner's own options stay in its file.
 */
import type { Backend, CaptureIndex, DType, ModuleRegistry } from '@fastkernels/core';
import type { Argv } from 'yargs';
import type { Io } from '../io.js';
import { SEED_OPTION } from './e2e-common.js';

export interface CaptureCommonArgs {
  model: string;
  out: string;
  json?: boolean;
  /** Seed of generated inputs (images, noise, documents); LLM requests carry theirs in --workload. */
  seed?: number;
}

/** The common flags with their help. */
export function captureCommonFlags<T>(y: Argv<T>) {
  return y
    .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ safetensors)' })
    .option('out', { type: 'string', demandOption: true, describe: 'output folder: index.json + values.safetensors' })
    .option('json', { type: 'boolean', describe: 'print a summary as JSON' })
    .option('seed', SEED_OPTION);
}

/** A folder runner: checks its own options, captures on the baseline registry, prints the summary. */
export type FolderCaptureRunner<A> = (argv: A, io: Io, backend: Backend, baseline: ModuleRegistry, dtype?: DType) => void;

/**
 * What a capture wrote: under --json the index path, model, workload and each task's counts; else
 * `captured <what> in S s: N tasks`, a row a task and the index path.
 */
export function printCaptureSummary(io: Io, argv: Pick<CaptureCommonArgs, 'json'>, r: { readonly path: string; readonly index: CaptureIndex }, o: { model: string; workload: string; what: string; startedAt: number }): void {
  const tasks = Object.entries(r.index.tasks);
  const calls = (t: CaptureIndex['tasks'][string]) => t.forward.reduce((a, f) => a + f.count, 0);
  if (argv.json) {
    io.out(JSON.stringify({ index: r.path, model: o.model, workload: o.workload, tasks: Object.fromEntries(tasks.map(([k, t]) => [k, { init: t.init.length, shapes: t.forward.length, calls: calls(t) }])) }, null, 2) + '\n');
    return;
  }
  io.out(`captured ${o.what} in ${((performance.now() - o.startedAt) / 1000).toFixed(1)} s: ${tasks.length} tasks\n`);
  for (const [id, t] of tasks) io.out(`  ${id.padEnd(30)} ${String(t.init.length).padStart(3)} init  ${String(t.forward.length).padStart(5)} shapes  ${String(calls(t)).padStart(7)} calls\n`);
  io.out(`wrote ${r.path}\n`);
}
