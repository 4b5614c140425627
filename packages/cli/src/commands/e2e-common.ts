/**
 * What every `fastkernels e2e` runner takes alike (the LLM runner in e2e.ts, and the pipeline, vision and encoder
 * folder runners): the folder, the candidate set or --self-test, the timing counts, the seed of generated inputs and
 * where the result goes. Their flags with help, their checks, and the parts of a folder runner's record and summary
 * that are the same for every kind of folder. Each runner's own options stay in its file.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import type { CandidateOverride, Estimate } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';

export interface E2eCommonArgs {
  /** Model folder(s): the LLM runner takes several, the folder runners one. */
  model: string | string[];
  candidates?: string;
  selfTest?: boolean;
  keepGoing?: boolean;
  warmups: number;
  repeats: number;
  /** Seed of generated inputs (images, noise, documents); LLM requests carry theirs in --requests. */
  seed?: number;
  out?: string;
  json?: boolean;
}

/** --seed: e2e and capture generate the same inputs from it. */
export const SEED_OPTION = {
  type: 'number',
  describe: "seed of the generated inputs: pipeline folders' noise of the first image (then +1 each), vision folders' noise images, encoder folders' documents [default: 0]",
} as const;

/** The common flags with their help (the defaults are the LLM runner's; the folder runners read them the same way). */
export function e2eCommonFlags<T>(y: Argv<T>) {
  return y
    .option('model', { type: 'string', demandOption: true, describe: 'model folder(s): config.json (+ safetensors); repeat for several' })
    .option('candidates', { type: 'string', describe: 'candidate folder: L<level>/<task stem>.ts|.js|.cu|.py' })
    .option('self-test', { type: 'boolean', describe: 'the baselines as the candidate (expect 100% agreement, speedups ~1)' })
    .option('keep-going', { type: 'boolean', describe: 'candidate files that fail to load are dropped (category import) instead of stopping with exit 2' })
    .option('warmups', { type: 'number', default: 3, describe: 'untimed runs before the timed ones (pipeline, vision and encoder folders: at least 1)' })
    .option('repeats', { type: 'number', default: 5, describe: 'timed latency runs (median; 2+ give a bootstrap interval of the latency speedup); pipeline, vision and encoder folders: timed passes over their inputs' })
    .option('seed', SEED_OPTION)
    .option('out', { type: 'string', describe: 'write the result JSON here: for LLMs the E2eReport (MacroEval input), updated after each model; for other folders their record' })
    .option('json', { type: 'boolean', describe: 'print the result as JSON (LLMs: the report and details)' });
}

/** --model as a list. */
export function modelFolders(argv: Pick<E2eCommonArgs, 'model'>): string[] {
  return Array.isArray(argv.model) ? argv.model : [argv.model];
}

/** The checks of the common flags before anything loads: the candidates come from --candidates or --self-test. */
export function checkE2eCommonArgs(argv: E2eCommonArgs): void {
  if (argv.selfTest && argv.candidates) throw new UserError('--self-test runs the baselines as the candidate; it takes no --candidates', { field: '--self-test' });
  if (!argv.selfTest && !argv.candidates) throw new UserError('missing --candidates', { field: '--candidates', fix: 'pass --candidates DIR, or --self-test' });
}

/** --warmups and --repeats; the LLM latency runs take 0 warm-ups, the folder runners at least 1. */
export function timingCounts(argv: Pick<E2eCommonArgs, 'warmups' | 'repeats'>, minWarmups: 0 | 1): { warmups: number; repeats: number } {
  return { warmups: intFlag('warmups', argv.warmups, minWarmups, 1000), repeats: intFlag('repeats', argv.repeats, 1, 1000) };
}

/** --seed (default 0). */
export function seedFlag(seed: number | undefined): number {
  return intFlag('seed', seed ?? 0, 0, Number.MAX_SAFE_INTEGER);
}

/** What a folder runner runs on: the backend, the baseline registry, the candidate set (empty under --self-test), the dtype. */
export interface E2eSides {
  readonly backend: Backend;
  readonly baseline: ModuleRegistry;
  readonly set: readonly CandidateOverride[];
  readonly dtype?: DType;
}

/** A folder runner: checks its own options, runs baseline against candidate, writes and prints the result. */
export type FolderE2eRunner<A> = (argv: A, io: Io, on: E2eSides) => void;

/** The one folder a folder runner takes. */
export function singleFolder(argv: Pick<E2eCommonArgs, 'model'>, kind: string): string {
  const models = modelFolders(argv);
  if (models.length !== 1) throw new UserError(`e2e takes one ${kind} folder at a time`, { field: '--model' });
  return models[0]!;
}

/** The candidate side: the baseline registry with the set's overrides. */
export function candidateRegistry(on: E2eSides): ModuleRegistry {
  const candidate = on.baseline.child('candidate');
  for (const c of on.set) candidate.override(c.taskId, c.cls);
  return candidate;
}

/** The head of a folder runner's record: which folder, which mode, which GPU, which candidates. */
export function recordHead(dir: string, argv: Pick<E2eCommonArgs, 'selfTest'>, on: E2eSides) {
  return { model: dir, mode: argv.selfTest ? 'self-test' : 'composed', gpu: on.backend.devices()[0]?.name ?? on.backend.name, candidates: on.set.map((c) => c.taskId) };
}

/** Writes a folder runner's record to --out and prints it under --json; true when printed (no summary then). */
export function emitRecord(argv: Pick<E2eCommonArgs, 'out' | 'json'>, io: Io, record: object): boolean {
  const text = JSON.stringify(record, null, 2) + '\n';
  if (argv.out) {
    mkdirSync(dirname(resolve(argv.out)), { recursive: true });
    writeFileSync(argv.out, text);
  }
  if (argv.json) io.out(text);
  return Boolean(argv.json);
}

/** The summary line's candidate list. */
export function candidateNames(on: E2eSides): string {
  return on.set.map((s) => s.taskId).join(', ') || 'none (the baseline)';
}

/** An estimate with its 95% interval: `mean [lo, hi]`. */
export function formatEstimate(e: Estimate, digits: number): string {
  return `${e.mean.toFixed(digits)} [${e.ci95[0].toFixed(digits)}, ${e.ci95[1].toFixed(digits)}]`;
}
