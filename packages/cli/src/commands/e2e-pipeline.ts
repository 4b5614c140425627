/**
 * `fastkernels e2e` on a pipeline folder (model_index.json: FLUX.1): model-zoo's pipelineE2e over the baseline and the
 * candidate set (or the baseline again, --self-test) on one image per --prompt at --size / --steps, seeds --seed,
 * --seed + 1, ...: per-step latents and the images' PSNR against the baseline's, images/s and per-step latency with
 * intervals. Prints a summary; --out / --json write the result (PSNR null where the images are equal).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { UserError, setCaptureBlocker } from '@fastkernels/core';
import { pipelineE2e, type ImageRequest } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import {
  candidateNames, candidateRegistry, emitRecord, formatEstimate as fmt, recordHead, seedFlag, singleFolder, timingCounts, type E2eCommonArgs, type E2eSides,
} from './e2e-common.js';

/** The options of a pipeline folder's requests, in e2e and capture alike (--seed is a common flag). */
export interface PipelineRequestArgs {
  prompt?: string[];
  size?: number;
  steps?: number;
  seed?: number;
  maxSequenceLength?: number;
}

export interface PipelineE2eArgs extends E2eCommonArgs, PipelineRequestArgs {
  graphs: boolean;
}

/** Whether a folder holds a pipeline (model_index.json: FLUX.1). */
export function isPipelineFolder(dir: string): boolean {
  return existsSync(join(dir, 'model_index.json'));
}

/** The pipeline folders' flags with their help (e2e and capture). */
export function pipelineFlags<T>(y: Argv<T>) {
  return y
    .option('prompt', { type: 'string', array: true, describe: 'pipeline folders (model_index.json, FLUX.1): one image per prompt [default: one prompt]' })
    .option('size', { type: 'number', describe: 'pipeline folders: square image size in pixels [default: 1024]' })
    .option('steps', { type: 'number', describe: 'pipeline folders: denoising steps [default: 28]' })
    .option('max-sequence-length', { type: 'number', describe: 'pipeline folders: T5 prompt tokens [default: 512]' });
}

const DEFAULT_PROMPT = 'a red fox in the snow';

/** The requests the pipeline flags ask for: one a --prompt, all at --size / --steps, seeds --seed, --seed + 1, ... */
export function pipelineRequests(argv: PipelineRequestArgs): { prompts: string[]; size: number; steps: number; requests: ImageRequest[] } {
  const prompts = argv.prompt?.length ? argv.prompt.map(String) : [DEFAULT_PROMPT];
  if (prompts.some((p) => !p.trim())) throw new UserError('a prompt is empty', { field: '--prompt' });
  const size = intFlag('size', argv.size ?? 1024, 1, 1 << 14);
  const steps = intFlag('steps', argv.steps ?? 28, 1, 1000);
  const seed = seedFlag(argv.seed);
  const maxSequenceLength = intFlag('max-sequence-length', argv.maxSequenceLength ?? 512, 1, 512);
  return { prompts, size, steps, requests: prompts.map((prompt, i) => ({ prompt, height: size, width: size, steps, seed: seed + i, maxSequenceLength })) };
}

export function runPipelineE2e(argv: PipelineE2eArgs, io: Io, on: E2eSides): void {
  const dir = singleFolder(argv, 'pipeline');
  const { prompts, size, steps, requests } = pipelineRequests(argv);
  const candidate = candidateRegistry(on);
  const log = (l: string) => io.err(`${l}\n`);
  // As the LLM e2e: a candidate that cannot be recorded into a CUDA graph (a PyTorch worker's) turns the step's graph
  // off on both sides, so the comparison stays like with like (a captured step would replay without calling it)
  const wouldCapture = argv.graphs !== false && on.backend.capabilities.graphs;
  const graphsReason = wouldCapture ? setCaptureBlocker(on.set) : undefined;
  if (graphsReason) log(`CUDA graphs off on both sides (the transformer step runs eagerly, baseline included): ${graphsReason}`);
  const r = pipelineE2e(on.baseline, candidate, {
    dir, backend: on.backend, requests, graphs: argv.graphs !== false && !graphsReason, log, ...timingCounts(argv, 1), ...(on.dtype ? { dtype: on.dtype } : {}),
  });
  const record = { ...recordHead(dir, argv, on), size, steps, prompts: prompts.length, ...(graphsReason ? { graphs: false, graphsReason } : {}), ...r };
  if (emitRecord(argv, io, record)) return;
  const c = r.correctness;
  io.out(`${dir}: ${prompts.length} image${prompts.length === 1 ? '' : 's'} at ${size}x${size}, ${steps} steps; candidates: ${candidateNames(on)}\n`);
  io.out(`  images/s   baseline ${fmt(r.baseline.imagesPerS, 3)}  candidate ${fmt(r.candidate.imagesPerS, 3)}  speedup ${fmt(r.speedup.imagesPerS, 2)}\n`);
  io.out(`  step ms    baseline ${fmt(r.baseline.stepMs, 1)}  candidate ${fmt(r.candidate.stepMs, 1)}  speedup ${fmt(r.speedup.stepLatency, 2)}\n`);
  io.out(`  correct    ${c.passed ? 'yes' : `no: ${c.reason}`}; latents max rel err ${c.maxStepError.toExponential(2)}; image PSNR min ${Math.min(...c.psnr).toFixed(1)} dB\n`);
}
