/**
 * `fastkernels generate-image --model DIR --prompt "..." --steps 28 --size 1024 --seed 0 --out a.png`: a text-to-image
 * pipeline folder (diffusers' layout, e.g. FLUX.1: model_index.json, transformer/, vae/, text_encoder/, ...) through
 * the model registry and the pipeline runner, a progress bar over the denoising steps on stderr, the image written as
 * an 8-bit RGB PNG (fast-png, pure JS). --json prints the run's record (sizes, timings) on stdout.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { UserError, type DType } from '@fastkernels/core';
import { loadPipelineModel } from '@fastkernels/model-zoo';
import { encode } from 'fast-png';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { Progress } from '../output/progress.js';

export interface GenerateImageArgs {
  model: string;
  prompt: string;
  steps: number;
  size: number;
  height?: number;
  width?: number;
  seed: number;
  guidance: number;
  maxSequenceLength: number;
  out: string;
  backend: string;
  dtype?: string;
  initSeed: number;
  json?: boolean;
  progress?: boolean;
  graphs?: boolean;
}

const DTYPES: Record<string, DType> = { bf16: 'bf16', f16: 'f16', f32: 'f32' };

/** "[#####-----]" of `done` out of `total`, `width` cells. */
export function progressBar(done: number, total: number, width = 24): string {
  const full = Math.round((done / total) * width);
  return `[${'#'.repeat(full)}${'-'.repeat(width - full)}]`;
}

export function generateImageCommand(io: Io) {
  return {
    command: 'generate-image',
    describe: 'Generate an image with a text-to-image pipeline folder (FLUX.1) and write it as PNG',
    builder: (y: Argv) =>
      y
        .option('model', { type: 'string', demandOption: true, describe: 'pipeline folder: model_index.json + component folders (safetensors; random weights without)' })
        .option('prompt', { type: 'string', demandOption: true, describe: 'the text prompt' })
        .option('steps', { type: 'number', default: 28, describe: 'denoising steps' })
        .option('size', { type: 'number', default: 1024, describe: 'square image size in pixels (a multiple of 16 for FLUX)' })
        .option('height', { type: 'number', describe: 'image height (default --size)' })
        .option('width', { type: 'number', describe: 'image width (default --size)' })
        .option('seed', { type: 'number', default: 0, describe: 'seed of the initial noise' })
        .option('guidance', { type: 'number', default: 3.5, describe: 'distilled guidance scale (FLUX.1-dev)' })
        .option('max-sequence-length', { type: 'number', default: 512, describe: 'T5 prompt tokens (FluxPipeline: at most 512)' })
        .option('out', { type: 'string', default: 'image.png', describe: 'the PNG to write' })
        .option('backend', { type: 'string', default: 'auto', describe: 'cpu, cuda or auto' })
        .option('dtype', { type: 'string', choices: Object.keys(DTYPES), describe: "model dtype (default: the configs', else bf16)" })
        .option('init-seed', { type: 'number', default: 0, describe: 'seed of the random weights of components without safetensors' })
        .option('json', { type: 'boolean', default: false, describe: 'print the run record (sizes, timings) as JSON on stdout' })
        .option('progress', { type: 'boolean', describe: 'show the progress bar even when stderr is not a terminal' })
        .option('graphs', { type: 'boolean', default: true, describe: 'replay the transformer step from a CUDA graph (captured on the first step; CUDA only). --no-graphs: eager every step' })
        .example('$0 generate-image --model FLUX.1-dev --prompt "a red fox in the snow" --steps 28 --size 1024 --seed 0 --out fox.png', 'FLUX.1-dev, 28 steps at 1024²')
        .example('$0 generate-image --model packages/model-zoo/fixtures/tiny-flux --prompt "a cat" --size 32 --steps 2 --backend cpu --out cat.png', 'the tiny fixture on the CPU (random weights: noise)'),
    handler: (argv: GenerateImageArgs) => runGenerateImage(argv, io),
  };
}

/** The command's body (tests call it with a captured Io). */
export function runGenerateImage(argv: GenerateImageArgs, io: Io, progressStream?: NodeJS.WriteStream): void {
  const steps = intFlag('steps', argv.steps, 1, 1000);
  const height = intFlag(argv.height !== undefined ? 'height' : 'size', argv.height ?? argv.size, 1, 1 << 14);
  const width = intFlag(argv.width !== undefined ? 'width' : 'size', argv.width ?? argv.size, 1, 1 << 14);
  const seed = intFlag('seed', argv.seed, 0, Number.MAX_SAFE_INTEGER);
  const maxSequenceLength = intFlag('max-sequence-length', argv.maxSequenceLength, 1, 512);
  if (!Number.isFinite(argv.guidance) || argv.guidance < 0) throw new UserError(`must be a number >= 0, got ${argv.guidance}`, { field: '--guidance' });
  if (!String(argv.prompt).trim()) throw new UserError('the prompt is empty', { field: '--prompt' });
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const t0 = performance.now();
  const loaded = loadPipelineModel(argv.model, { backend, registry: env.registry, initSeed: argv.initSeed, ...(argv.dtype ? { dtype: DTYPES[argv.dtype]! } : {}) });
  try {
    const loadS = (performance.now() - t0) / 1000;
    const random = Object.entries(loaded.weights).filter(([, w]) => w === 'random').map(([k]) => k);
    if (!argv.json) io.err(`model ${argv.model}: ${loaded.architecture.describe?.(loaded.config) ?? loaded.architecture.name}, ${loaded.ctx.dtype} on ${backend.name}${random.length ? `; random weights (init seed ${argv.initSeed}) for ${random.join(', ')}` : ''}; loaded in ${loadS.toFixed(1)} s\n`);
    const progress = new Progress({ force: Boolean(argv.progress), ...(progressStream ? { stream: progressStream } : {}) });
    const started = performance.now();
    progress.update(`denoising ${progressBar(0, steps)} 0/${steps}`, '0');
    const { images, timings } = loaded.model.generateImage({ prompt: String(argv.prompt), height, width, steps, seed, guidanceScale: argv.guidance, maxSequenceLength, graphs: argv.graphs !== false }, (i, n) => {
      const perStep = (performance.now() - started) / 1000 / i;
      progress.update(`denoising ${progressBar(i, n)} ${i}/${n}, ${perStep.toFixed(2)} s/step`, String(i));
    });
    progress.clear();
    const img = images[0]!;
    const png = encode({ width: img.width, height: img.height, data: img.rgb, channels: 3, depth: 8 });
    try {
      mkdirSync(dirname(argv.out), { recursive: true });
      writeFileSync(argv.out, png);
    } catch (e) {
      throw new UserError(`cannot write ${argv.out}: ${(e as Error).message}`, { field: '--out' });
    }
    const totalS = (performance.now() - started) / 1000;
    const stepMean = timings.stepMs.reduce((a, b) => a + b, 0) / Math.max(1, timings.stepMs.length);
    if (argv.json) {
      io.out(JSON.stringify({
        model: argv.model, architecture: loaded.architecture.name, backend: backend.name, dtype: loaded.ctx.dtype, weights: loaded.weights,
        prompt: String(argv.prompt), width: img.width, height: img.height, steps, seed, guidance: argv.guidance, max_sequence_length: maxSequenceLength,
        graphs: argv.graphs !== false && backend.capabilities.graphs,
        out: argv.out, png_bytes: png.length,
        timings: { load_s: loadS, encode_ms: timings.encodeMs, step_ms: timings.stepMs, mean_step_ms: stepMean, decode_ms: timings.decodeMs, total_s: totalS, images_per_s: 1 / totalS },
      }, null, 2) + '\n');
    } else {
      io.err(`wrote ${argv.out} (${img.width}x${img.height}, ${png.length} bytes): ${steps} steps at ${stepMean.toFixed(1)} ms/step, text encoders ${timings.encodeMs.toFixed(0)} ms, VAE decode ${timings.decodeMs.toFixed(0)} ms, ${totalS.toFixed(2)} s in all\n`);
    }
  } finally {
    loaded.model.dispose();
  }
}
