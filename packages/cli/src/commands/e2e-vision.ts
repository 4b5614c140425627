/**
 * `fastkernels e2e` on a vision folder (runner 'vision': YOLOv10, ConvNeXt-V2): model-zoo's visionE2e over the baseline
 * and the candidate set (or the baseline again, --self-test) on --images seeded noise images (--seed) at the model's
 * input size, run through the vision runner at each of --batch-sizes: the raw head output and the top-k detections /
 * top-5 classes against the baseline's, images/s and per-batch latency with intervals. A candidate that cannot be
 * captured into a CUDA graph turns the graphs off on both sides (graphs: false, graphsReason in the record). Prints a
 * summary; --out / --json write the result.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { loadModelFolderConfig, visionE2e, type CandidateOverride, type Estimate } from '@fastkernels/model-zoo';
import { intFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';

export interface VisionE2eArgs {
  model: string | string[];
  selfTest?: boolean;
  graphs: boolean;
  warmups: number;
  repeats: number;
  out?: string;
  json?: boolean;
  /** Batch sizes, comma-separated (default 1,32). */
  batchSizes?: string;
  /** Images in one timed pass (default 64). */
  images?: number;
  seed?: number;
}

/** Whether a folder holds a vision model (config.json whose architecture's runner is 'vision'). */
export function isVisionFolder(dir: string): boolean {
  return existsSync(join(dir, 'config.json')) && loadModelFolderConfig(dir).architecture.runner === 'vision';
}

/** --batch-sizes: positive integers, comma-separated. */
export function batchSizesFlag(value: string | undefined): number[] {
  const sizes = listFlag(value ?? '1,32').map((s) => intFlag('batch-sizes', Number(s), 1, 1024));
  if (!sizes.length) throw new UserError('names no batch size', { field: '--batch-sizes', fix: 'pass e.g. --batch-sizes 1,32' });
  return sizes;
}

const fmt = (e: Estimate, digits = 1) => `${e.mean.toFixed(digits)} [${e.ci95[0].toFixed(digits)}, ${e.ci95[1].toFixed(digits)}]`;

export function runVisionE2e(argv: VisionE2eArgs, io: Io, on: { readonly backend: Backend; readonly baseline: ModuleRegistry; readonly set: readonly CandidateOverride[]; readonly dtype?: DType }): void {
  const models = Array.isArray(argv.model) ? argv.model : [argv.model];
  if (models.length !== 1) throw new UserError('e2e takes one vision folder at a time', { field: '--model' });
  const dir = models[0]!;
  const batchSizes = batchSizesFlag(argv.batchSizes);
  const images = intFlag('images', argv.images ?? 64, 1, 1 << 16);
  const seed = intFlag('seed', argv.seed ?? 0, 0, Number.MAX_SAFE_INTEGER);
  const candidate = on.baseline.child('candidate');
  for (const c of on.set) candidate.override(c.taskId, c.cls);
  const log = (l: string) => io.err(`${l}\n`);
  const r = visionE2e(on.baseline, candidate, {
    dir, backend: on.backend, batchSizes, images, seed, graphs: argv.graphs !== false, candidateSet: on.set, log,
    warmups: intFlag('warmups', argv.warmups, 1, 1000), repeats: intFlag('repeats', argv.repeats, 1, 1000), ...(on.dtype ? { dtype: on.dtype } : {}),
  });
  const record = { model: dir, mode: argv.selfTest ? 'self-test' : 'composed', gpu: on.backend.devices()[0]?.name ?? on.backend.name, candidates: on.set.map((c) => c.taskId), ...r };
  const text = JSON.stringify(record, null, 2) + '\n';
  if (argv.out) {
    mkdirSync(dirname(resolve(argv.out)), { recursive: true });
    writeFileSync(argv.out, text);
  }
  if (argv.json) return io.out(text);
  const c = r.correctness;
  io.out(`${dir}: ${images} image${images === 1 ? '' : 's'} at ${r.imageSize}x${r.imageSize} (${r.kind}, head [${r.headShape.join(', ')}]), ${r.usedGraphs ? 'CUDA graphs' : `eager${r.graphsReason ? ` (${r.graphsReason})` : ''}`}; candidates: ${on.set.map((s) => s.taskId).join(', ') || 'none (the baseline)'}\n`);
  for (const s of r.bySize) {
    io.out(`  batch ${String(s.batch).padStart(4)}  images/s  baseline ${fmt(s.baseline.imagesPerS)}  candidate ${fmt(s.candidate.imagesPerS)}  speedup ${fmt(s.speedup.imagesPerS, 3)}\n`);
    io.out(`              batch ms  baseline ${fmt(s.baseline.batchMs, 2)}  candidate ${fmt(s.candidate.batchMs, 2)}  speedup ${fmt(s.speedup.batchLatency, 3)}\n`);
  }
  io.out(`  correct    ${c.passed ? 'yes' : `no: ${c.reason}`}; head max rel err ${c.maxHeadError.toExponential(2)}; top-k equal ${c.topKAgree}/${c.topKTotal}\n`);
}
