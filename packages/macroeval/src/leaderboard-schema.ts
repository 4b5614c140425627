import { z } from 'zod';
import { MacroEvalConfigSchema } from './config.js';
import { DROP_CATEGORIES, OUTCOMES } from './e2e-record.js';

/**
 * leaderboard.json, schema_version 1: the original's layout (reference/fastkernels.md §6.3) with
 * snake_case keys; `boards.models` is out of scope. `fastkernels score` writes it,
 * `fastkernels leaderboard` reads it back through this schema.
 */
const num = z.number();
const perLambda = <T extends z.ZodType>(t: T) => z.object({ blend: t, thr: t, lat: t }).strict();

export const LevelSummarySchema = z
  .object({ benched: num, correct: num, geomean: num.nullable(), fast_1: num, fast_2: num, winners: num })
  .strict();

export const CompositionDeltaSchema = z
  .object({ n: num, from: num.nullable(), to: num.nullable(), ratio: num.nullable(), broke: num })
  .strict();

export const FamilyScoreSchema = z
  .object({ n: num, n_valid: num, C_f: num, coverage_f: num, S_f: perLambda(num.nullable()) })
  .strict();

export const MacroScoreSchema = z
  .object({
    n_items: num,
    n_valid: num,
    coverage_macro: num,
    C_macro: num,
    S_macro: perLambda(num.nullable()),
    score: perLambda(num),
    n_families: num,
    n_families_valid: num,
    families: z.record(z.string(), FamilyScoreSchema),
  })
  .strict();

export const DropsSummarySchema = z
  .object({
    /** (model, kernel) pairs requested, kept after drop-and-retry, and the kept fraction. */
    requested: num.nullable(),
    kept: num.nullable(),
    kept_fraction: num.nullable(),
    dropped_unique_kernels: num,
    dropped_by_category: z.record(z.enum(DROP_CATEGORIES), num),
    /** Models per deployable outcome. */
    status: z.record(z.enum(OUTCOMES), num),
  })
  .strict();

const outcome = z.enum(OUTCOMES);

export const PerModelSchema = z
  .object({
    model: z.string(),
    label: z.string(),
    family: z.string(),
    outcome,
    detail: z.string().nullable(),
    valid: z.boolean(),
    C: num,
    s: perLambda(num).nullable(),
    mean_d: num.nullable(),
    g: num.nullable(),
    n_items: num,
    n_dropped: num,
    as_is: z.object({ outcome, detail: z.string().nullable(), valid: z.boolean(), C: num, s: perLambda(num).nullable() }).strict().nullable(),
  })
  .strict();

export const SensitivitySchema = z.record(z.string(), z.object({ score: num, rank: num, of: num }).strict());

export const E2eBlockSchema = z
  .object({
    deployable: MacroScoreSchema,
    all_winners: MacroScoreSchema.nullable(),
    drops: DropsSummarySchema,
    per_model: z.array(PerModelSchema),
    sensitivity: SensitivitySchema,
  })
  .strict();

export const InputFileSchema = z.object({ path: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/) }).strict();

export const RowSchema = z
  .object({
    agent: z.string(),
    agent_key: z.string(),
    mode: z.string(),
    mode_label: z.string(),
    open_weights: z.boolean().nullable(),
    /** Keyed `L1`, `L2`, ... plus `all` (every level pooled). Null without a kernel bench file. */
    kernel: z.record(z.string(), LevelSummarySchema).nullable(),
    /** The agent's composition deltas (`ind_to_comp_L2`, `comp_to_seq_L3`, ...), the same on each of its rows. */
    composition: z.record(z.string(), CompositionDeltaSchema),
    e2e: E2eBlockSchema.nullable(),
    cost: z.record(z.string(), z.unknown()).nullable(),
    provenance: z
      .object({ kernel_files: z.array(InputFileSchema), e2e_files: z.array(InputFileSchema), gpu: z.string().nullable() })
      .strict(),
  })
  .strict();

export const LeaderboardSchema = z
  .object({
    schema_version: z.literal(1),
    generated_at: z.string(),
    generated_by: z.object({ tool: z.string(), version: z.string(), commit: z.string().nullable() }).strict(),
    metric: z.object({ score: z.string(), lambda: num, tau: num, reference: z.string(), note: z.string() }).strict(),
    environment: z
      .object({
        gpu: z.string().nullable(),
        gpu_count: num.nullable(),
        node: z.string(),
        fastkernels: z.string(),
        versions: z.record(z.string(), z.string()),
        macroeval_universe: z.object({ mode: z.string(), models: z.array(z.string()), families: z.array(z.string()) }).strict(),
        macroeval_config: MacroEvalConfigSchema,
      })
      .strict(),
    universe: z
      .object({
        n_models: num,
        n_families: num,
        families: z.array(z.string()),
        models: z.array(z.object({ id: z.string(), label: z.string(), family: z.string() }).strict()),
      })
      .strict(),
    agent_info: z.record(z.string(), z.object({ name: z.string(), open_weights: z.boolean().nullable(), modes: z.array(z.string()) }).strict()),
    targets_per_level: z.record(z.string(), num),
    excluded_stems: z.array(z.string()),
    boards: z.object({ agents: z.object({ rows: z.array(RowSchema) }).strict() }).strict(),
    known_gaps: z.array(z.string()),
  })
  .strict();

export type Leaderboard = z.output<typeof LeaderboardSchema>;
export type LeaderboardRow = z.output<typeof RowSchema>;
export type E2eBlock = z.output<typeof E2eBlockSchema>;
export type PerModel = z.output<typeof PerModelSchema>;
