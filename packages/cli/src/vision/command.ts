/**
 * What detect and classify share: their flags, the checks before the model loads (images, --out, --batch), loading
 * a vision model of the right kind into the vision runner, the run's report fields, and writing the report (also when
 * a bad file stopped the run: the images done are written, then the bad file is the command's error).
 */
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { VisionRunner, loadModelFolderConfig, loadVisionModel, metaBackend, type LoadedModel, type VisionModel } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import type { z } from 'zod';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import type { ImageRun } from './run-images.js';
import type { RunFields } from './report.js';
import { imageSource, type ImageSource } from './sources.js';

export interface VisionArgs {
  model: string;
  image?: string;
  images?: string;
  out?: string;
  batch: number;
  backend: string;
  dtype?: string;
  initSeed: number;
  json?: boolean;
  progress?: boolean;
}

const DTYPES: Record<string, DType> = { f32: 'f32', bf16: 'bf16', f16: 'f16' };

export function visionOptions(y: Argv) {
  return y
    .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ model.safetensors; seeded random weights without)' })
    .option('image', { type: 'string', describe: 'one PNG or JPEG image' })
    .option('images', { type: 'string', describe: 'a folder: its PNG / JPEG files, in name order' })
    .option('out', { type: 'string', describe: 'write the results as JSON to this file' })
    .option('batch', { type: 'number', default: 8, describe: 'images per forward (one CUDA graph per batch size on the GPU)' })
    .option('backend', { type: 'string', default: 'auto', describe: 'cpu, cuda or auto' })
    .option('dtype', { type: 'string', choices: Object.keys(DTYPES), describe: "model dtype (default: the config's, else bf16)" })
    .option('init-seed', { type: 'number', default: 0, describe: 'seed of the random weights of a folder without safetensors' })
    .option('json', { type: 'boolean', default: false, describe: 'print the results as one JSON document on stdout' })
    .option('progress', { type: 'boolean', describe: 'show the progress bar even when stderr is not a terminal' });
}

export interface VisionSession {
  readonly loaded: LoadedModel<unknown, VisionModel>;
  readonly backend: Backend;
  readonly runner: VisionRunner;
  readonly source: ImageSource;
  readonly batch: number;
  readonly loadS: number;
  dispose(): void;
}

/** Check the flags and files, then load the model (a detector for detect, a classifier for classify) into a runner. */
export function openVision(argv: VisionArgs, command: 'detect' | 'classify'): VisionSession {
  const batch = intFlag('batch', argv.batch, 1, 1024);
  const seed = intFlag('init-seed', argv.initSeed, 0, 2 ** 32 - 1);
  const source = imageSource(argv);
  if (argv.out !== undefined && existsSync(argv.out) && statSync(argv.out).isDirectory()) throw new UserError(`${argv.out} is a folder`, { field: '--out', fix: 'pass a file name, e.g. --out results.json' });
  const backend = selectBackend(environment(), argv.backend);
  const registry = environment().registry;
  checkKind(argv.model, command, registry);
  const t0 = performance.now();
  const loaded = loadVisionModel(argv.model, { backend, registry, initSeed: seed, ...(argv.dtype ? { dtype: DTYPES[argv.dtype]! } : {}) });
  try {
    const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: batch });
    const loadS = (performance.now() - t0) / 1000;
    return { loaded, backend, runner, source, batch, loadS, dispose: () => (runner.dispose(), loaded.model.dispose()) };
  } catch (e) {
    loaded.model.dispose();
    throw e;
  }
}

/**
 * A vision folder of the other kind (a classifier given to detect, a detector to classify) is a UserError before any
 * weight is read or calibrated: the tree built on the meta backend tells whether the model detects.
 */
function checkKind(dir: string, command: 'detect' | 'classify', registry: ModuleRegistry): void {
  const { architecture: arch, config } = loadModelFolderConfig(dir);
  if (arch.runner !== 'vision') return; // loadVisionModel names it
  const probe = arch.build({ backend: metaBackend(), device: 0, dtype: 'f32', registry }, config) as Partial<VisionModel>;
  const isDetector = typeof probe.detect === 'function';
  if (command === 'detect' && !isDetector) throw new UserError(`${dir} is an image classifier (${arch.name}): it gives class scores, not boxes`, { field: '--model', fix: `run \`fastkernels classify --model ${dir}\` on it, or pass a detector folder (YOLOv10)` });
  if (command === 'classify' && isDetector) throw new UserError(`${dir} is an object detector (${arch.name}): it gives boxes, not one class per image`, { field: '--model', fix: `run \`fastkernels detect --model ${dir}\` on it, or pass a classifier folder (ConvNeXt-V2)` });
}

/** The report's run fields (model, backend, timings, the bad file if any). */
export function runFields(argv: VisionArgs, s: VisionSession, run: ImageRun<unknown>): RunFields {
  const st = s.runner.stats;
  return {
    model: argv.model,
    architecture: s.loaded.architecture.name,
    backend: s.backend.name,
    dtype: s.loaded.ctx.dtype,
    weights: s.loaded.weights,
    image_size: s.runner.imageSize,
    batch: s.batch,
    error: run.failed ? { file: run.failed.file, message: run.failed.error.message } : null,
    timings: {
      load_s: s.loadS,
      total_s: run.seconds,
      images_per_s: run.results.length / Math.max(run.seconds, 1e-9),
      forward_ms: st.forwardMs,
      forward_images_per_s: st.images / Math.max(st.forwardMs / 1000, 1e-9),
      graph_captures: st.captures,
      graph_replays: st.graphReplays,
    },
  };
}

export interface FinishOptions<S extends z.ZodType<{ images: unknown[] }>> {
  readonly schema: S;
  readonly report: z.input<S>;
  readonly run: ImageRun<unknown>;
  readonly source: ImageSource;
  /** Lines for stdout when neither --json nor --out is given. */
  readonly human: () => string;
  /** One line for stderr: counts and speed. */
  readonly summary: string;
}

/** Validate and emit the report (--out, --json or readable lines), then raise the bad file when the run stopped at one. */
export function finishReport<S extends z.ZodType<{ images: unknown[] }>>(argv: VisionArgs, io: Io, o: FinishOptions<S>): void {
  const doc = o.schema.parse(o.report);
  const done = doc.images.length;
  if (done || !o.run.failed) {
    const text = JSON.stringify(doc, null, 2) + '\n';
    if (argv.out !== undefined) {
      try {
        mkdirSync(dirname(argv.out), { recursive: true });
        writeFileSync(argv.out, text);
      } catch (e) {
        throw new UserError(`cannot write ${argv.out}: ${(e as Error).message}`, { field: '--out', fix: 'pass a writable file path' });
      }
    }
    if (argv.json) io.out(text);
    else if (argv.out === undefined) io.out(o.human());
    io.err(`${o.summary}${argv.out !== undefined ? `; wrote ${argv.out}` : ''}\n`);
  }
  const failed = o.run.failed;
  if (!failed) return;
  const total = o.source.files.length;
  const kept = done ? `; the ${done} image${done > 1 ? 's' : ''} before it ran and ${argv.out !== undefined ? `are in ${argv.out}` : 'are printed above'}` : '';
  const where = total > 1 ? ` (image ${done + 1} of ${total}: the run stopped there${kept})` : '';
  throw new UserError(`${failed.error.message}${where}`, { field: o.source.flag, fix: failed.error.details.fix ?? 'pass PNG or JPEG images' });
}
