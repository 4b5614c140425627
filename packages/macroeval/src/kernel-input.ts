import { BenchReportSchema, STATUSES, type Status } from '@fastkernels/core';
import { z } from 'zod';

/**
 * Kernel results scoring reads.
 *
 * A file with a `version` key is a `fastkernels bench --json FILE` report and is checked against core's
 * `BenchReportSchema` in full. Anything else is read through the minimal schema below: a `results` array
 * of cases {task, status, speedup} (unknown keys pass), for results produced by other tools or by hand.
 */
export const KernelCaseSchema = z
  .object({
    /** Task id, `L<k>/<stem>` (e.g. `L1/rms_norm`). */
    task: z.string().regex(/^L\d+\/[A-Za-z0-9_.-]+$/, 'expected a task id such as "L1/rms_norm"'),
    level: z.union([z.number().int().min(1), z.string().regex(/^L?\d+$/)]).optional(),
    case: z.union([z.string(), z.number()]).optional(),
    status: z.enum(STATUSES),
    /** baseline time / candidate time; absent or null when the case did not run. */
    speedup: z.number().nullable().optional(),
  })
  .loose();

export const KernelReportSchema = z
  .object({
    results: z.array(KernelCaseSchema),
    /** Optional identity of the candidate set, used when the command line gives none. */
    agent: z.string().optional(),
    mode: z.string().optional(),
    gpu: z.string().optional(),
  })
  .loose();

export type KernelCase = z.output<typeof KernelCaseSchema>;
export type KernelReport = z.output<typeof KernelReportSchema>;

/** Level of a case: its `level` field when given, else the `L<k>` prefix of its task id. */
export function caseLevel(c: Pick<KernelCase, 'task' | 'level'>): number {
  if (typeof c.level === 'number') return c.level;
  if (typeof c.level === 'string') return Number(c.level.replace(/^L/, ''));
  return Number(/^L(\d+)\//.exec(c.task)![1]);
}

export function isPassed(s: Status): boolean {
  return s === 'PASSED';
}

/** Either report, reduced to what scoring needs. */
export interface KernelInput {
  readonly cases: readonly KernelCase[];
  readonly agent?: string;
  readonly mode?: string;
  /** The candidate set folder a bench report names (its basename may carry agent and mode). */
  readonly candidates?: string;
  readonly gpu?: string;
  readonly versions?: Readonly<Record<string, string>>;
  /** false when a bench run stopped early. */
  readonly complete: boolean;
}

/** A bench report (it has `version`) through core's schema, anything else through the minimal one. */
export function isBenchReport(raw: unknown): boolean {
  return typeof raw === 'object' && raw !== null && !Array.isArray(raw) && 'version' in raw;
}

export const BenchReportInputSchema = BenchReportSchema.transform((r): KernelInput => ({
  cases: r.results,
  candidates: r.candidates,
  gpu: r.device.name,
  versions: r.versions,
  complete: r.complete,
}));

export const MinimalReportInputSchema = KernelReportSchema.transform((r): KernelInput => ({
  cases: r.results,
  ...(r.agent ? { agent: r.agent } : {}),
  ...(r.mode ? { mode: r.mode } : {}),
  ...(r.gpu ? { gpu: r.gpu } : {}),
  complete: true,
}));

/** `runs/kda-ind` → {agent 'kda', mode 'ind'}: a candidate folder named `<agent>-<mode>` (or `_`). */
export function identityFromCandidates(candidates: string | undefined): { agent: string; mode: string } | undefined {
  if (!candidates) return undefined;
  const base = candidates.replace(/[\\/]+$/, '').split(/[\\/]/).pop() ?? '';
  const m = /^(.+?)[-_](ind|comp|seq|independent|composed|sequential)$/i.exec(base);
  return m ? { agent: m[1]!, mode: m[2]!.toLowerCase() } : undefined;
}
