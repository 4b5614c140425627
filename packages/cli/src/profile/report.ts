/**
 * What `fastkernels profile --json` prints: one JSON document per run, checked against this schema before it leaves
 * the process. Milliseconds are per forward (the mean over the profiled forwards); self times may dip a hair below
 * zero where a device timer's resolution (about 0.5 us on CUDA events) is coarser than a module's own work.
 */
import { z } from 'zod';
import { formatMs, formatPercent, renderTable } from '../output/table.js';
import type { ProfileTotals } from './profiler.js';

const ms = z.number().nonnegative();
const count = z.number().nonnegative();

const TimingSchema = z.strictObject({ mean_ms: ms, min_ms: ms, runs: z.number().int().positive() });
export type Timing = z.infer<typeof TimingSchema>;

export const ProfileRowSchema = z.strictObject({
  task: z.string(),
  /** With --by-shape: the input tensors' shapes, then the module's own weight's ('32x64x80x80 | w 128x64x3x3'). */
  shape: z.string().nullable(),
  /** Calls per forward. */
  calls: count,
  inclusive_ms: ms,
  self_ms: z.number(),
  /** self_ms / the whole profiled forward. */
  self_share: z.number(),
  /** inclusive_ms / calls. */
  ms_per_call: ms,
  /** Self time on the host clock (the JS launching the module's own work). */
  host_self_ms: z.number(),
});
export type ProfileRow = z.infer<typeof ProfileRowSchema>;

export const ProfileReportSchema = z.strictObject({
  schema_version: z.literal(1),
  task: z.literal('profile'),
  model: z.string(),
  architecture: z.string(),
  /** The runner the folder's architecture uses. */
  kind: z.enum(['vision', 'encoder', 'llm']),
  backend: z.string(),
  device: z.string(),
  dtype: z.string(),
  weights: z.enum(['checkpoint', 'random', 'random-device']),
  /** What one forward is. */
  workload: z.strictObject({
    batch: z.number().int().positive(),
    /** Vision: the model's input size. */
    image_size: z.number().int().positive().optional(),
    /** Encoder: the sequences' length range and the packed forward's tokens. */
    lengths: z.tuple([z.number().int().positive(), z.number().int().positive()]).optional(),
    /** Encoder: the packed forward's tokens; causal LM: the step's tokens (prefill: the prompt; decode: one a sequence). */
    tokens: z.number().int().positive().optional(),
    /** Causal LM: the engine step profiled, and the prompt length (decode: each sequence's context before the steps). */
    phase: z.enum(['prefill', 'decode']).optional(),
    prompt_tokens: z.number().int().positive().optional(),
    seed: z.number().int().nonnegative(),
    description: z.string(),
  }),
  warmups: z.number().int().nonnegative(),
  repeats: z.number().int().positive(),
  by_shape: z.boolean(),
  /** The backend timer: device events (CUDA) or the host clock (CPU). */
  timer: z.enum(['device events', 'host clock']),
  /** Profiled forwards always run eagerly (a graph replay calls no module forward). */
  profiled_graphs: z.literal(false),
  forward: z.strictObject({
    /** The instrumented forward, as profiled (every module wrapped and timed). */
    profiled: TimingSchema,
    /** The same batch on the model built from the plain registry, eagerly. */
    eager: TimingSchema,
    /** And replayed as a CUDA graph, where the runner captures graphs on this backend; else null and why. */
    graphs: TimingSchema.nullable(),
    graphs_note: z.string().optional(),
  }),
  /**
   * The head start queued before each profiled forward (CUDA vision): its device ms, and in how many forwards the
   * device was still busy with it when the host had launched the whole forward (module times free of launch gaps).
   */
  queue_ahead: z.strictObject({ lead_ms: ms, held: z.number().int().nonnegative(), of: z.number().int().positive() }).nullable(),
  /** The profiled forward's time no module covers (the runner's glue, the top model's own ops). */
  unattributed_ms: z.number(),
  unattributed_share: z.number(),
  /** Every task (or task and shape), by self time, largest first. */
  tasks: z.array(ProfileRowSchema),
});
export type ProfileReport = z.infer<typeof ProfileReportSchema>;

/** The report's rows from the profiler's totals (shares of the whole profiled forward). */
export function profileRows(p: ProfileTotals): ProfileRow[] {
  const whole = Math.max(p.forwardMs, Number.MIN_VALUE);
  return p.tasks.map((t) => ({
    task: t.task,
    shape: t.shape,
    calls: t.calls,
    inclusive_ms: Math.max(0, t.inclusiveMs),
    self_ms: t.selfMs,
    self_share: t.selfMs / whole,
    ms_per_call: t.calls ? Math.max(0, t.inclusiveMs) / t.calls : 0,
    host_self_ms: t.hostSelfMs,
  }));
}

const fmtCalls = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));
const fmtTiming = (t: Timing) => `${formatMs(t.mean_ms)} ms (min ${formatMs(t.min_ms)})`;

/** The readable report: what ran, the forward times, then the `top` rows by self time and one row for the rest. */
export function renderProfile(r: ProfileReport, top: number): string {
  const lines: string[] = [];
  lines.push(`${r.model}: ${r.architecture} (${r.kind}), ${r.dtype}, ${r.weights === 'checkpoint' ? 'checkpoint weights' : 'random weights'}, on ${r.device} (${r.backend})`);
  lines.push(`  one forward: ${r.workload.description}; ${r.warmups} warm-up${r.warmups === 1 ? '' : 's'}, ${r.repeats} profiled`);
  lines.push(`  profiled EAGERLY (CUDA graphs off), every module wrapped and timed by the ${r.timer}; ms are per forward`);
  const q = r.queue_ahead;
  if (q) {
    lines.push(`  each profiled forward queued behind ${formatMs(q.lead_ms)} ms of matmuls: ${q.held === q.of ? 'module times are device time, no launch gaps' : `held in ${q.held} of ${q.of} forwards (the others include launch gaps)`}`);
  } else if (r.timer === 'device events') lines.push('  launched as eager code launches (no head start): a module\'s device time includes any gap waiting for its launch');
  lines.push(`  forward  profiled ${fmtTiming(r.forward.profiled)}  |  un-instrumented eager ${fmtTiming(r.forward.eager)}  |  graphs ${r.forward.graphs ? fmtTiming(r.forward.graphs) : `- (${r.forward.graphs_note ?? 'none'})`}`);
  const overhead = r.forward.profiled.mean_ms / Math.max(r.forward.eager.mean_ms, Number.MIN_VALUE);
  lines.push(`  profiling overhead: the profiled forward takes ${overhead.toFixed(2)}x the un-instrumented eager one`);
  lines.push('');
  const shown = r.tasks.slice(0, top);
  const rest = r.tasks.slice(top);
  const row = (name: string, shape: string | null, calls: number | null, incl: number | null, self: number, share: number, perCall: number | null, host: number | null) => [
    name, ...(r.by_shape ? [shape ?? ''] : []), calls === null ? '-' : fmtCalls(calls), formatMs(incl), formatMs(self), formatPercent(share), formatMs(perCall), formatMs(host),
  ];
  const rows = shown.map((t) => row(t.task, t.shape, t.calls, t.inclusive_ms, t.self_ms, t.self_share, t.ms_per_call, t.host_self_ms));
  if (rest.length) {
    const sum = (f: (t: ProfileRow) => number) => rest.reduce((a, t) => a + f(t), 0);
    rows.push(row(`other (${rest.length} row${rest.length === 1 ? '' : 's'})`, null, sum((t) => t.calls), null, sum((t) => t.self_ms), sum((t) => t.self_share), null, sum((t) => t.host_self_ms)));
  }
  rows.push(row('(outside modules)', null, null, null, r.unattributed_ms, r.unattributed_share, null, null));
  const selfSum = r.tasks.reduce((a, t) => a + t.self_ms, 0) + r.unattributed_ms;
  rows.push(row('total', null, r.tasks.reduce((a, t) => a + t.calls, 0), r.forward.profiled.mean_ms, selfSum, selfSum / Math.max(r.forward.profiled.mean_ms, Number.MIN_VALUE), null, null));
  const columns = [
    { header: 'task' }, ...(r.by_shape ? [{ header: 'input shapes' }] : []), { header: 'calls', align: 'right' as const }, { header: 'incl ms', align: 'right' as const },
    { header: 'self ms', align: 'right' as const }, { header: 'self %', align: 'right' as const }, { header: 'ms/call', align: 'right' as const }, { header: 'host self ms', align: 'right' as const },
  ];
  lines.push(renderTable(columns, rows, '  ').trimEnd());
  lines.push('');
  lines.push('  read it: self = the module less its children; a layer that fuses its children (runsOwnForward) runs them unfused here,');
  lines.push('  so its children carry the time and the un-instrumented forward shows what the fusion saves. host self ms is the');
  lines.push("  module's launch cost; without a head start, host self ms near or above self ms marks a launch-bound module.");
  return lines.join('\n') + '\n';
}
