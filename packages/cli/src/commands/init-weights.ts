import { existsSync, statSync } from 'node:fs';
import { UserError, type DType } from '@fastkernels/core';
import { baselineRegistry, modelRegistry, writeInitCheckpoint } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';

export interface InitWeightsArgs {
  config: string;
  out: string;
  seed: number;
  dtype: string;
  tiled?: boolean;
  backend?: string;
  json?: boolean;
}

const DTYPES: Record<string, DType> = { bf16: 'bf16', f16: 'f16', f32: 'f32' };

export function runInitWeights(argv: InitWeightsArgs, io: Io): void {
  const seed = intFlag('seed', argv.seed, 0, 2 ** 32 - 1);
  const dtype = DTYPES[argv.dtype];
  if (!dtype) throw new UserError(`unknown dtype '${argv.dtype}'`, { field: '--dtype', fix: 'use bf16, f16 or f32' });
  if (existsSync(argv.out) && !statSync(argv.out).isDirectory()) throw new UserError(`${argv.out} exists and is not a folder`, { field: '--out' });
  // vision models whose random weights need data statistics (YOLOv10's BatchNorms) are calibrated before writing,
  // so the checkpoint runs like `--model` on config.json alone; other models never touch this backend
  const calibrateOn = selectBackend(environment(), argv.backend ?? 'cpu');
  const r = writeInitCheckpoint(argv.config, argv.out, { seed, dtype, registry: baselineRegistry(), calibrateOn, ...(argv.tiled ? { tiled: true } : {}) });
  if (argv.json) {
    io.out(JSON.stringify({ out: argv.out, files: r.files, tensors: r.tensors, bytes: r.bytes, seed, dtype, tiled: Boolean(argv.tiled), model_type: r.modelType }, null, 2) + '\n');
    return;
  }
  io.out(`wrote ${r.tensors} tensors (${(r.bytes / 2 ** 20).toFixed(2)} MiB, ${dtype}, seed ${seed}) in HF naming:\n${r.files.map((f) => `  ${f}`).join('\n')}\n`);
}

export function initWeightsCommand(io: Io) {
  return {
    command: 'init-weights',
    describe: `Write a seeded random checkpoint for an HF config.json (${modelRegistry.list().flatMap((m) => m.modelTypes).join(', ')}): config.json + model.safetensors, loadable by transformers`,
    builder: (y: Argv) =>
      y
        .option('config', { type: 'string', demandOption: true, describe: 'an HF config.json' })
        .option('out', { type: 'string', demandOption: true, describe: 'output folder (created)' })
        .option('seed', { type: 'number', default: 0, describe: 'seed of the weights (generate on a folder with config.json alone uses 0)' })
        .option('dtype', { type: 'string', choices: Object.keys(DTYPES), default: 'bf16', describe: 'dtype of the written tensors' })
        .option('tiled', { type: 'boolean', default: false, describe: 'tile each tensor from three seeded pools of 4M values (the weights `--random-init device` draws): a Llama-3-8B checkpoint in about a minute instead of several; values repeat with that period' })
        .option('backend', { type: 'string', default: 'cpu', describe: "where a vision model's random BatchNorm statistics are calibrated (YOLOv10: one forward over seeded noise images); cpu gives the same values everywhere" })
        .option('json', { type: 'boolean', describe: 'print what was written as JSON' })
        .example('$0 init-weights --config tiny/config.json --out /tmp/tiny --seed 1', 'a random tiny model to run generate on')
        .example('$0 init-weights --config llama3-8b/config.json --out /data/l8b --tiled', 'a full-size random checkpoint fast (for timing and TP runs)')
        .example('$0 init-weights --config packages/model-zoo/fixtures/tiny-yolov10/config.json --out /tmp/yolo --dtype f32', 'a random detector, BatchNorms calibrated, to run detect on'),
    handler: (argv: InitWeightsArgs) => runInitWeights(argv, io),
  };
}
