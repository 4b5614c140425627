import { z } from 'zod';

/**
 * MacroEval parameters, spelled as the original's `environment.macroeval_config` in leaderboard.json
 * (reference/fastkernels.md §6.1), so a config file and the board's copy of it read the same.
 */
export const LambdasSchema = z
  .object({
    /** Weight of the throughput speedup in s = thr^λ · lat^(1−λ). */
    blend: z.number().min(0).max(1).default(0.5),
    thr: z.number().min(0).max(1).default(1),
    lat: z.number().min(0).max(1).default(0),
  })
  .strict();

export const MacroEvalConfigSchema = z
  .object({
    /** A model is valid when it ran and its calibrated correctness C ≥ tau. */
    tau: z.number().min(0).max(1).default(0.9),
    /** Noise floor g = this quantile of the baseline-vs-baseline discrepancies... */
    g_quantile: z.number().min(0).max(1).default(0.95),
    /** ...clamped to [g_floor, g_cap]... */
    g_floor: z.number().nonnegative().default(0.001),
    g_cap: z.number().positive().default(0.5),
    /** ...or this when the model has no noise run. */
    g_fallback: z.number().nonnegative().default(0.02),
    /** Zero credit at f × the unrelated-output distance, per family (f_default where a family is absent). */
    f: z.record(z.string(), z.number().positive().max(1)).default({}),
    f_default: z.number().positive().max(1).default(0.5),
    lambdas: LambdasSchema.default({ blend: 0.5, thr: 1, lat: 0 }),
    /** An `ok` run whose C falls below this is reported as `broken` (wrong outputs). */
    broken_threshold: z.number().min(0).max(1).default(0.5),
    /** A run that produced no items: `invalid` (C = 0, not valid) or `exclude` (left out of its family). */
    empty_policy: z.enum(['invalid', 'exclude']).default('invalid'),
    /** The discrepancy thresholds (g and f) are scaled by each of these for the sensitivity ranks. */
    sensitivity_scales: z.array(z.number().positive()).min(1).default([0.5, 1, 2]),
    /** Kernel winner gate: all cases correct and per-op speedup ≥ this. */
    winner_min_speedup: z.number().positive().default(1),
  })
  .strict()
  .refine((c) => c.g_floor <= c.g_cap, { message: 'g_floor must not exceed g_cap', path: ['g_floor'] });

export type MacroEvalConfig = z.output<typeof MacroEvalConfigSchema>;
export type MacroEvalConfigInput = z.input<typeof MacroEvalConfigSchema>;
export type LambdaKey = 'blend' | 'thr' | 'lat';
export const LAMBDA_KEYS: readonly LambdaKey[] = ['blend', 'thr', 'lat'];

export const DEFAULT_CONFIG: MacroEvalConfig = MacroEvalConfigSchema.parse({});

export function resolveConfig(input: MacroEvalConfigInput = {}): MacroEvalConfig {
  return MacroEvalConfigSchema.parse(input);
}

/** f for a family. */
export function fFor(config: MacroEvalConfig, family: string): number {
  return config.f[family] ?? config.f_default;
}
