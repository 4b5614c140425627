import { z } from 'zod';
import { STATUSES } from '../status.js';
import { DTypeSchema } from '../task.js';
import type { CaseResult } from './bench.js';
import type { BenchSummary } from './summary.js';
import { MachineProfileSchema } from './floor.js';

export const RunEnvironmentSchema = z.object({
  device: z.string(),
  deviceIndex: z.number().int().nonnegative(),
  versions: z.record(z.string(), z.string()),
  /** GPU clocks when known (nvidia-smi, or the device's rated clocks). */
  clocks: z.record(z.string(), z.union([z.string(), z.number()])).optional(),
  profile: MachineProfileSchema.optional(),
});
export type RunEnvironment = z.infer<typeof RunEnvironmentSchema>;


/** The JSON report `fastkernels bench --json FILE` writes (validated before every write). */
export const BENCH_REPORT_VERSION = 1;

const num = z.number().nullable();
const StatusSchema = z.enum(STATUSES);

export const GoldenCheckSchema = z.object({
  status: StatusSchema,
  maxAbsError: num,
  maxRelError: num,
  matchedRatio: z.number().min(0).max(1),
  detail: z.string().optional(),
});

export const CaseResultSchema = z.object({
  task: z.string().regex(/^L[1-9]\/[a-z0-9_]+$/),
  level: z.number().int().min(1),
  case: z.string(),
  dtype: DTypeSchema,
  status: StatusSchema,
  maxAbsError: num,
  maxRelError: num,
  matchedRatio: z.number().min(0).max(1).nullable(),
  baselineMs: num,
  candidateMs: num,
  speedup: num,
  ciLow: num,
  ciHigh: num,
  rounds: z.number().int().nonnegative(),
  iters: z.number().int().nonnegative(),
  detail: z.string().optional(),
  golden: z.object({ baseline: GoldenCheckSchema, candidate: GoldenCheckSchema }).optional(),
  /** Median host-timed milliseconds of the candidate's calls, device-synchronised (escape check). */
  hostMs: num.optional(),
  /** The physical floor of one call on this machine (work / measured rates). */
  floorMs: num.optional(),
  /** Timed calls whose outputs were re-verified against the baseline's on the same inputs. */
  verified: z.number().int().nonnegative().optional(),
  /** Which hardening checks ran for this case. */
  checks: z.array(z.string()).optional(),
  /** Wall-clock milliseconds the case took, build, compiles and checks included. */
  wallMs: z.number().nonnegative().optional(),
});

const LevelSummarySchema = z.object({
  level: z.number().int().nonnegative(),
  benched: z.number().int().nonnegative(),
  correct: z.number().int().nonnegative(),
  fast1: z.number().int().nonnegative(),
  fast2: z.number().int().nonnegative(),
  geomeanSpeedup: num,
});

export const BenchSummarySchema = z.object({
  tasks: z.array(z.object({
    task: z.string(),
    level: z.number().int(),
    status: StatusSchema,
    correct: z.boolean(),
    cases: z.number().int().nonnegative(),
    speedup: num,
    ciLow: num,
    ciHigh: num,
    fast1: z.boolean(),
    fast2: z.boolean(),
  })),
  levels: z.array(LevelSummarySchema),
  total: LevelSummarySchema.extend({
    fast1Ratio: z.number().min(0).max(1),
    fast2Ratio: z.number().min(0).max(1),
    skipped: z.number().int().nonnegative(),
  }),
});

export const BenchReportSchema = z.object({
  version: z.literal(BENCH_REPORT_VERSION),
  createdAt: z.iso.datetime(),
  /** false while the run is going on, or when it stopped early (see `error`). */
  complete: z.boolean(),
  error: z.string().optional(),
  candidates: z.string(),
  backend: z.string(),
  device: z.object({
    index: z.number().int().nonnegative(),
    name: z.string(),
    totalMemory: z.number().nonnegative(),
    multiprocessors: z.number().int().nonnegative(),
    computeCapability: z.string().optional(),
  }),
  versions: z.record(z.string(), z.string()),
  options: z.object({
    rounds: z.number().int().positive(),
    iters: z.number().int().nonnegative(),
    warmup: z.number().int().nonnegative(),
    warmupMs: z.number().nonnegative().optional(),
    seed: z.number().int(),
    shapes: z.string(),
    maxShapes: z.number().int().positive().optional(),
    captures: z.string().optional(),
    flushBytes: z.number().int().nonnegative().nullable().optional(),
    shard: z.object({ index: z.number().int().nonnegative(), count: z.number().int().positive() }).optional(),
    gpus: z.array(z.number().int().nonnegative()).optional(),
    selfTest: z.boolean().optional(),
    /** Ranks of the process group the group tasks (L1/allreduce) ran in (`bench --tp N`, or under `fastkernels launch`). */
    processGroup: z.number().int().positive().optional(),
  }),
  /** Devices, driver/library versions, clocks and measured rates of the workers. */
  machine: z.array(RunEnvironmentSchema).optional(),
  /** `bench --resume`: the results file continued, the tasks taken from it, and the bytes of a cut last line removed. */
  resumed: z.object({ file: z.string(), reusedTasks: z.number().int().nonnegative(), repairedBytes: z.number().int().nonnegative() }).optional(),
  /** Tasks found twice with different outcomes when result files were merged. */
  conflicts: z.array(z.object({ task: z.string(), files: z.array(z.string()), detail: z.string() })).optional(),
  results: z.array(CaseResultSchema),
  summary: BenchSummarySchema,
});
export type BenchReport = z.infer<typeof BenchReportSchema>;

// Compile-time checks that the runtime types and the schemas agree.
type DeepMutable<T> = T extends readonly (infer U)[] ? DeepMutable<U>[] : T extends object ? { -readonly [K in keyof T]: DeepMutable<T[K]> } : T;
type Assignable<A, B extends A> = B;
export type _CaseResultMatches = Assignable<z.input<typeof CaseResultSchema>, DeepMutable<CaseResult>>;
export type _SummaryMatches = Assignable<z.input<typeof BenchSummarySchema>, DeepMutable<BenchSummary>>;
