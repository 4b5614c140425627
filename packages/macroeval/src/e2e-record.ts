import { z } from 'zod';

/**
 * What `fastkernels e2e` writes per entry (one candidate set run through the model universe): for every
 * model, the deployable run (after drop-and-retry), optionally the as-is run (every winner, no drops),
 * the per-item discrepancies against the same-session baseline and those of the baseline-vs-baseline
 * noise run that calibrates them (reference/fastkernels.md §5.4, §6.1).
 */
export const OUTCOMES = ['ok', 'crash', 'broken', 'timeout', 'incomplete'] as const;
export type Outcome = (typeof OUTCOMES)[number];

export const DROP_CATEGORIES = ['compile', 'runtime', 'timeout', 'import', 'incorrect'] as const;
export type DropCategory = (typeof DROP_CATEGORIES)[number];

const speedup = z.number().positive().refine(Number.isFinite, 'must be finite');

const runShape = {
  outcome: z.enum(OUTCOMES),
  /** What went wrong (`runtime`, `compile`, a message), for crash/timeout/incomplete. */
  detail: z.string().optional(),
  /** Candidate / baseline on the throughput workloads (geometric mean over them). */
  throughputSpeedup: speedup.optional(),
  /** Baseline / candidate on the latency workloads (geometric mean over them). */
  latencySpeedup: speedup.optional(),
  /** 95% bootstrap interval of throughputSpeedup [low, high], from repeated timed passes (informative). */
  throughputSpeedupCi: z.tuple([speedup, speedup]).optional(),
  /** 95% bootstrap interval of latencySpeedup [low, high], from the latency repeats (informative). */
  latencySpeedupCi: z.tuple([speedup, speedup]).optional(),
  /** Per item (request, image, clip, ...): distance of the candidate's output to the baseline's. */
  discrepancies: z.array(z.number().nonnegative()).default([]),
  /** Distance of an unrelated output in the same units; discrepancies are usually normalized so it is 1. */
  unrelatedDistance: z.number().positive().default(1),
};

const needsSpeed = {
  message: 'an ok run needs throughputSpeedup or latencySpeedup',
  path: ['throughputSpeedup'],
};
const hasSpeed = (r: { outcome: string; throughputSpeedup?: number | undefined; latencySpeedup?: number | undefined }) =>
  r.outcome !== 'ok' || r.throughputSpeedup !== undefined || r.latencySpeedup !== undefined;

/** One run of a model with candidate kernels. */
export const E2eRunSchema = z.object(runShape).strict().refine(hasSpeed, needsSpeed);

export const DropSchema = z
  .object({
    task: z.string().min(1),
    category: z.enum(DROP_CATEGORIES),
    detail: z.string().optional(),
  })
  .strict();

/** One model of an entry: its deployable run (after drop-and-retry) flat, the as-is run nested. */
export const E2eModelRecordSchema = z
  .object({
    model: z.string().min(1),
    label: z.string().optional(),
    family: z.string().min(1),
    ...runShape,
    /** Per item discrepancies of the baseline-vs-baseline noise run. */
    noiseDiscrepancies: z.array(z.number().nonnegative()).default([]),
    /** Kernels (task ids) requested for this model: the winners it uses. */
    requested: z.array(z.string()).optional(),
    /** Kernels dropped (with why) before the deployable run. */
    drops: z.array(DropSchema).default([]),
    /** The as-is run: every winner deployed, nothing dropped. */
    asIs: E2eRunSchema.optional(),
    /**
     * false when CUDA-graph decode was asked for but every run of this model (baseline included) decoded eagerly,
     * because a candidate cannot be captured (a PyTorch candidate runs in another process); absent otherwise.
     */
    graphs: z.boolean().optional(),
    /** Why graphs were off, naming the candidates. */
    graphsReason: z.string().optional(),
  })
  .strict()
  .refine(hasSpeed, needsSpeed);

export const E2eReportSchema = z
  .object({
    schema_version: z.literal(1).default(1),
    agent: z.string().min(1).optional(),
    agent_key: z.string().min(1).optional(),
    mode: z.string().min(1).optional(),
    open_weights: z.boolean().optional(),
    gpu: z.string().optional(),
    gpu_count: z.number().int().positive().optional(),
    /** Free-form versions (driver, CUDA, fastkernels...). */
    versions: z.record(z.string(), z.string()).optional(),
    /** Optional agent cost block, copied to the board as is. */
    cost: z.record(z.string(), z.unknown()).optional(),
    models: z.array(E2eModelRecordSchema).min(1),
  })
  .strict();

export type E2eRun = z.output<typeof E2eRunSchema>;
export type E2eModelRecord = z.output<typeof E2eModelRecordSchema>;
export type E2eModelRecordInput = z.input<typeof E2eModelRecordSchema>;
export type E2eReport = z.output<typeof E2eReportSchema>;
export type E2eReportInput = z.input<typeof E2eReportSchema>;
