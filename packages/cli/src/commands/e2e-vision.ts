/**
 * `fastkernels e2e` on a vision folder (runner 'vision': YOLOv10, ConvNeXt-V2): model-zoo's visionE2e over the baseline
 * and the candidate set (or the baseline again, --self-test) on --images seeded noise images (--seed) at the model's
 * input size, run through the vision runner at each of --batch-sizes: the raw head output and the top-k detections /
 * top-5 classes against the baseline's, images/s and per-batch latency with intervals. A candidate that cannot be
 * captured into a CUDA graph turns the graphs off on both sides (graphs: false, graphsReason in the record). Prints a
 * summary; --out / --json write the result.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { loadModelFolderConfig, visionE2e } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { intFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';
import {
  candidateNames, candidateRegistry, emitRecord, formatEstimate as fmt, recordHead, seedFlag, singleFolder, timingCounts, type E2eCommonArgs, type E2eSides,
} from './e2e-common.js';

export interface VisionE2eArgs extends E2eCommonArgs {
  graphs: boolean;
  /** Batch sizes, comma-separated (default 1,32). */
  batchSizes?: string;
  /** Images in one timed pass (default 64). */
  images?: number;
}

/** Whether a folder holds a vision model (config.json whose architecture's runner is 'vision'). */
export function isVisionFolder(dir: string): boolean {
  return existsSync(join(dir, 'config.json')) && loadModelFolderConfig(dir).architecture.runner === 'vision';
}

/** The vision folders' e2e flags with their help (capture's --batch-sizes means one batch at each: capture-vision.ts). */
export function visionE2eFlags<T>(y: Argv<T>) {
  return y
    .option('batch-sizes', { type: 'string', describe: 'vision folders (YOLOv10, ConvNeXt-V2): batch sizes, comma-separated [default: 1,32]' })
    .option('images', { type: 'number', describe: 'vision folders: seeded noise images (from --seed) in one timed pass [default: 64]' });
}

/** --batch-sizes: positive integers, comma-separated. */
export function batchSizesFlag(value: string | undefined): number[] {
  const sizes = listFlag(value ?? '1,32').map((s) => intFlag('batch-sizes', Number(s), 1, 1024));
  if (!sizes.length) throw new UserError('names no batch size', { field: '--batch-sizes', fix: 'pass e.g. --batch-sizes 1,32' });
  return sizes;
}

export function runVisionE2e(argv: VisionE2eArgs, io: Io, on: E2eSides): void {
  const dir = singleFolder(argv, 'vision');
  const batchSizes = batchSizesFlag(argv.batchSizes);
  const images = intFlag('images', argv.images ?? 64, 1, 1 << 16);
  const seed = seedFlag(argv.seed);
  const candidate = candidateRegistry(on);
  const log = (l: string) => io.err(`${l}\n`);
  const r = visionE2e(on.baseline, candidate, {
    dir, backend: on.backend, batchSizes, images, seed, graphs: argv.graphs !== false, candidateSet: on.set, log,
    ...timingCounts(argv, 1), ...(on.dtype ? { dtype: on.dtype } : {}),
  });
  if (emitRecord(argv, io, { ...recordHead(dir, argv, on), ...r })) return;
  const c = r.correctness;
  io.out(`${dir}: ${images} image${images === 1 ? '' : 's'} at ${r.imageSize}x${r.imageSize} (${r.kind}, head [${r.headShape.join(', ')}]), ${r.usedGraphs ? 'CUDA graphs' : `eager${r.graphsReason ? ` (${r.graphsReason})` : ''}`}; candidates: ${candidateNames(on)}\n`);
  for (const s of r.bySize) {
    io.out(`  batch ${String(s.batch).padStart(4)}  images/s  baseline ${fmt(s.baseline.imagesPerS, 1)}  candidate ${fmt(s.candidate.imagesPerS, 1)}  speedup ${fmt(s.speedup.imagesPerS, 3)}\n`);
    io.out(`              batch ms  baseline ${fmt(s.baseline.batchMs, 2)}  candidate ${fmt(s.candidate.batchMs, 2)}  speedup ${fmt(s.speedup.batchLatency, 3)}\n`);
  }
  io.out(`  correct    ${c.passed ? 'yes' : `no: ${c.reason}`}; head max rel err ${c.maxHeadError.toExponential(2)}; top-k equal ${c.topKAgree}/${c.topKTotal}\n`);
}
