import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { UserError, type DType } from '@fastkernels/core';
import { captureWorkload, checkWorkload, loadModelFolderConfig, resolveWorkload } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import type { Io } from '../io.js';
import { runPipelineCapture, type PipelineCaptureArgs } from './capture-pipeline.js';
import { runVisionCapture, type VisionCaptureArgs } from './capture-vision.js';
import { isVisionFolder } from './e2e-vision.js';
import { runEncoderCapture, type EncoderCaptureArgs } from './capture-encoder.js';
import { isEncoderFolder } from './e2e-encoder.js';
import { engineFlags, engineOptions, modelSource, type EngineArgs } from './e2e.js';

export interface CaptureArgs extends EngineArgs, PipelineCaptureArgs, VisionCaptureArgs, EncoderCaptureArgs {
  model: string;
  workload: string;
  out: string;
  json?: boolean;
}

const DTYPES: Record<string, DType> = { bf16: 'bf16', f16: 'f16', f32: 'f32' };

/**
 * `fastkernels capture`: run a workload through the engine (eagerly) with every registry-built module
 * instrumented, and write OUT/index.json (core's CaptureIndexSchema) + OUT/values.safetensors — the cases
 * `fastkernels bench --captures OUT` times.
 */
export function runCapture(argv: CaptureArgs, io: Io): void {
  if (existsSync(argv.out) && !statSync(argv.out).isDirectory()) throw new UserError(`${argv.out} exists and is not a folder`, { field: '--out' });
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  // a pipeline folder (FLUX.1): text-to-image requests instead of an LLM workload
  if (existsSync(join(argv.model, 'model_index.json'))) return runPipelineCapture(argv, io, backend, env.registry, argv.dtype ? DTYPES[argv.dtype] : undefined);
  // a vision folder (YOLOv10, ConvNeXt-V2): one batch of seeded noise images per --batch-sizes
  if (isVisionFolder(argv.model)) return runVisionCapture(argv, io, backend, env.registry, argv.dtype ? DTYPES[argv.dtype] : undefined);
  // an encoder folder (BGE-M3, ColBERTv2): seeded documents through the packed encoder runner
  if (isEncoderFolder(argv.model)) return runEncoderCapture(argv, io, backend, env.registry, argv.dtype ? DTYPES[argv.dtype] : undefined);
  const log = (l: string) => io.err(`${l}\n`);
  const engine = engineOptions({ ...argv, graphs: false }, log);
  const src = modelSource(argv.model, backend, argv);
  const g = loadModelFolderConfig(argv.model).geometry;
  const workload = resolveWorkload(argv.workload, g.vocabSize);
  checkWorkload(workload, g.vocabSize, engine.maxModelLen ?? Math.min(g.maxPositionEmbeddings, 4096));
  const t0 = performance.now();
  const r = captureWorkload({ baseline: env.registry, load: (reg) => src.load(reg), workload, engine, outDir: argv.out, model: src.name });
  const tasks = Object.entries(r.index.tasks);
  if (argv.json) {
    io.out(JSON.stringify({ index: r.path, model: src.name, workload: workload.name, tasks: Object.fromEntries(tasks.map(([k, t]) => [k, { init: t.init.length, shapes: t.forward.length, calls: t.forward.reduce((a, f) => a + f.count, 0) }])) }, null, 2) + '\n');
    return;
  }
  io.out(`captured ${workload.requests.length} requests (${r.outputTokens} output tokens) in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${tasks.length} tasks\n`);
  for (const [id, t] of tasks) io.out(`  ${id.padEnd(30)} ${String(t.init.length).padStart(3)} init  ${String(t.forward.length).padStart(5)} shapes  ${String(t.forward.reduce((a, f) => a + f.count, 0)).padStart(7)} calls\n`);
  io.out(`wrote ${r.path}\n`);
}

export function captureCommand(io: Io) {
  return {
    command: 'capture',
    describe: 'Record every module\'s init args, forward shapes (with counts) and data-dependent input values from a real engine run: the cases bench reads',
    builder: (y: Argv) =>
      engineFlags(y)
        .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ safetensors)' })
        .option('workload', { type: 'string', default: 'synthetic:64:100-1024:16-128:0', describe: 'a JSONL file ({"prompt_ids": [...], "output_len": N} per line) or synthetic:N:IN_LO-IN_HI:OUT_LO-OUT_HI:SEED' })
        .option('out', { type: 'string', demandOption: true, describe: 'output folder: index.json + values.safetensors' })
        .option('json', { type: 'boolean', describe: 'print a summary as JSON' })
        .option('prompt', { type: 'string', array: true, describe: 'pipeline folders (FLUX.1): one image per prompt [default: one prompt]' })
        .option('size', { type: 'number', describe: 'pipeline folders: square image size in pixels [default: 1024]' })
        .option('steps', { type: 'number', describe: 'pipeline folders: denoising steps [default: 28]' })
        .option('seed', { type: 'number', describe: 'pipeline folders: noise seed of the first image (then +1 each) [default: 0]' })
        .option('max-sequence-length', { type: 'number', describe: 'pipeline folders: T5 prompt tokens [default: 512]' })
        .option('batch-sizes', { type: 'string', describe: 'vision folders (YOLOv10, ConvNeXt-V2): one batch of seeded noise images (--seed) at each size, comma-separated [default: 1,32]' })
        .option('documents', { type: 'number', describe: 'encoder folders (BGE-M3, ColBERTv2): seeded token-id documents (--seed), packed by --max-num-batched-tokens [default: 64]' })
        .option('lengths', { type: 'string', describe: 'encoder folders: document lengths, uniform: LO-HI or U[LO, HI] [default: U[32, 512]]' })
        .example('$0 capture --model ./llama3-8b --out captures/llama3-8b', 'the default synthetic workload')
        .example('$0 capture --model ./tiny --backend cpu --workload synthetic:4:8-32:4-8:0 --out /tmp/cap', 'a small capture on the CPU')
        .example('$0 capture --model ./bge-m3 --documents 64 --lengths 32-512 --out captures/bge-m3', 'an encoder folder: the tasks of packed embedding batches')
        .example('$0 capture --model packages/model-zoo/fixtures/tiny-flux --backend cpu --size 32 --steps 2 --out /tmp/cap-flux', 'a FLUX pipeline folder: the tasks of a text-to-image run'),
    handler: (argv: CaptureArgs) => runCapture(argv, io),
  };
}
