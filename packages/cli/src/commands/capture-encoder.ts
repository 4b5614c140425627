/**
 * `fastkernels capture` on an encoder folder (runner 'encoder': BGE-M3, ColBERTv2): --documents seeded sequences with
 * lengths over --lengths embedded through the encoder runner's packed path with every registry-built module
 * instrumented (model-zoo's captureEncoder), written as OUT/index.json (+ values.safetensors) for
 * `fastkernels bench --captures`.
 */
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';
import { captureEncoder, documentsFor, documentsWorkloadName, parseLengthRange } from '@fastkernels/model-zoo';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';

export interface EncoderCaptureArgs {
  model: string;
  out: string;
  documents?: number;
  lengths?: string;
  seed?: number;
  maxNumBatchedTokens: number;
  json?: boolean;
}

export function runEncoderCapture(argv: EncoderCaptureArgs, io: Io, backend: Backend, baseline: ModuleRegistry, dtype?: DType): void {
  const spec = {
    count: intFlag('documents', argv.documents ?? 64, 1, 1 << 20),
    lengths: parseLengthRange(argv.lengths ?? 'U[32, 512]'),
    seed: intFlag('seed', argv.seed ?? 0, 0, Number.MAX_SAFE_INTEGER),
  };
  const t0 = performance.now();
  const r = captureEncoder({
    baseline, dir: argv.model, backend, documents: documentsFor(argv.model, spec), workload: documentsWorkloadName(spec), outDir: argv.out, model: argv.model,
    maxNumBatchedTokens: intFlag('max-num-batched-tokens', argv.maxNumBatchedTokens, 1, 1 << 20), ...(dtype ? { dtype } : {}),
  });
  const tasks = Object.entries(r.index.tasks);
  if (argv.json) {
    io.out(JSON.stringify({ index: r.path, model: argv.model, workload: r.index.workload, tasks: Object.fromEntries(tasks.map(([k, t]) => [k, { init: t.init.length, shapes: t.forward.length, calls: t.forward.reduce((a, f) => a + f.count, 0) }])) }, null, 2) + '\n');
    return;
  }
  io.out(`captured ${r.documents} documents (${r.tokens} tokens, ${r.batches} packed batches) in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${tasks.length} tasks\n`);
  for (const [id, t] of tasks) io.out(`  ${id.padEnd(30)} ${String(t.init.length).padStart(3)} init  ${String(t.forward.length).padStart(5)} shapes  ${String(t.forward.reduce((a, f) => a + f.count, 0)).padStart(7)} calls\n`);
  io.out(`wrote ${r.path}\n`);
}
