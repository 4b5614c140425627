import type { MacroEvalConfig } from './config.js';
import { DROP_CATEGORIES, OUTCOMES, type DropCategory, type E2eModelRecord, type E2eReport, type Outcome } from './e2e-record.js';
import { scoreRun, type ModelScore } from './e2e-score.js';
import { compositionDeltas, summarizeKernels, type KernelSummary, type ModeKey, type OpResult } from './kernel-aggregate.js';
import type { KernelCase } from './kernel-input.js';
import type { E2eBlock, Leaderboard, LeaderboardRow, PerModel } from './leaderboard-schema.js';
import { macroEval, MISSING, universeFromRecords, type Universe } from './macroeval.js';

/** Several entries (agents × modes) merged into one board. */
export interface InputFile {
  readonly path: string;
  readonly sha256: string;
}

export interface EntryInput {
  readonly agent: string;
  readonly mode: string;
  readonly agentKey?: string;
  readonly openWeights?: boolean | null;
  /** Kernel bench cases of the entry (all its bench files together); absent without a bench file. */
  readonly kernelCases?: readonly KernelCase[];
  readonly kernelFiles?: readonly InputFile[];
  /** Per-model e2e records of the entry (all its e2e files together); absent without one. */
  readonly e2eRecords?: readonly E2eModelRecord[];
  readonly e2eFiles?: readonly InputFile[];
  readonly gpu?: string | null;
  readonly cost?: Record<string, unknown> | null;
}

export interface BoardContext {
  readonly config: MacroEvalConfig;
  readonly generatedAt: string;
  readonly version: string;
  readonly commit: string | null;
  readonly node: string;
  readonly gpu: string | null;
  readonly gpuCount: number | null;
  readonly versions: Readonly<Record<string, string>>;
  /** Notes on the inputs (incomplete runs...), added to the board's known gaps. */
  readonly warnings?: readonly string[];
  /** Universe of models; the union of the entries' e2e records when absent. */
  readonly universe?: Universe;
}

const MODE_ALIASES: Record<string, ModeKey> = {
  ind: 'ind', independent: 'ind', comp: 'comp', composed: 'comp', seq: 'seq', sequential: 'seq',
};
const MODE_LABELS: Record<string, string> = { ind: 'Independent', comp: 'Composed', seq: 'Sequential' };

/** `ind`, `comp`, `seq` for the known modes (and their long names), the lower-cased name otherwise. */
export function normalizeMode(mode: string): string {
  const m = mode.trim().toLowerCase();
  return MODE_ALIASES[m] ?? m;
}

export function agentKeyOf(agent: string): string {
  return agent.trim().toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'agent';
}

export const KNOWN_GAPS: readonly string[] = [
  'Calibrated correctness uses the piecewise-linear ramp reconstructed from the original leaderboard (reference §6.1); the original code is unpublished.',
  'Sensitivity ranks scale the discrepancy thresholds (noise floor g and the zero-credit point f) by each factor; the original does not say which thresholds it scales.',
  'A model measured on one kind of workload (throughput or latency only) uses that speedup for every λ.',
  'boards.models (per-model boards) is not produced.',
];

export function buildLeaderboard(entries: readonly EntryInput[], ctx: BoardContext): Leaderboard {
  const { config } = ctx;
  const seen = new Set<string>();
  const normalized = entries.map((e) => {
    const mode = normalizeMode(e.mode);
    const agentKey = e.agentKey ?? agentKeyOf(e.agent);
    const key = `${agentKey}/${mode}`;
    if (seen.has(key)) throw new Error(`two entries for agent ${e.agent}, mode ${mode}: merge their files into one entry`);
    seen.add(key);
    const kernels = e.kernelCases ? summarizeKernels(e.kernelCases, config.winner_min_speedup) : null;
    return { ...e, mode, agentKey, kernels };
  });

  const universe = ctx.universe ?? universeFromRecords(normalized.flatMap((e) => e.e2eRecords ?? []));

  // Composition deltas per agent, from the kernel results of its modes.
  const opsByAgent = new Map<string, Partial<Record<ModeKey, readonly OpResult[]>>>();
  for (const e of normalized) {
    if (!e.kernels || !(e.mode in MODE_LABELS)) continue;
    const modes = opsByAgent.get(e.agentKey) ?? {};
    modes[e.mode as ModeKey] = e.kernels.ops;
    opsByAgent.set(e.agentKey, modes);
  }

  const rows: LeaderboardRow[] = normalized.map((e) => ({
    agent: e.agent,
    agent_key: e.agentKey,
    mode: e.mode,
    mode_label: MODE_LABELS[e.mode] ?? e.mode,
    open_weights: e.openWeights ?? null,
    kernel: e.kernels ? kernelBlock(e.kernels) : null,
    composition: compositionDeltas(opsByAgent.get(e.agentKey) ?? {}),
    e2e: e.e2eRecords ? e2eBlock(e.e2eRecords, universe, config) : null,
    cost: e.cost ?? null,
    provenance: { kernel_files: [...(e.kernelFiles ?? [])], e2e_files: [...(e.e2eFiles ?? [])], gpu: e.gpu ?? null },
  }));

  addSensitivity(rows, normalized.map((e) => e.e2eRecords), universe, config);
  rows.sort(compareRows);

  const targets: Record<string, number> = {};
  for (const r of rows) {
    for (const [level, s] of Object.entries(r.kernel ?? {})) {
      if (level === 'all') continue;
      const k = level.replace(/^L/, '');
      targets[k] = Math.max(targets[k] ?? 0, s.benched);
    }
  }

  const agentInfo: Leaderboard['agent_info'] = {};
  for (const r of rows) {
    const info = (agentInfo[r.agent_key] ??= { name: r.agent, open_weights: r.open_weights, modes: [] });
    if (!info.modes.includes(r.mode)) info.modes.push(r.mode);
  }

  return {
    schema_version: 1,
    generated_at: ctx.generatedAt,
    generated_by: { tool: 'fastkernels score', version: ctx.version, commit: ctx.commit },
    metric: {
      score: 'S_macro × C_macro × Coverage_macro',
      lambda: config.lambdas.blend,
      tau: config.tau,
      reference: 'FastKernels MacroEval (arXiv 2605.23215), leaderboard schema_version 1',
      note: 'Per model s = thr^λ · lat^(1−λ); C = calibrated correctness; valid when the model ran and C ≥ τ; per family mean C, coverage and geometric-mean s over valid models; macro means over families (S over families with a valid model).',
    },
    environment: {
      gpu: ctx.gpu,
      gpu_count: ctx.gpuCount,
      node: ctx.node,
      fastkernels: ctx.version,
      versions: { ...ctx.versions },
      macroeval_universe: {
        mode: ctx.universe ? 'given' : 'union of the e2e inputs',
        models: universe.models.map((m) => m.id),
        families: [...universe.families],
      },
      macroeval_config: config,
    },
    universe: {
      n_models: universe.models.length,
      n_families: universe.families.length,
      families: [...universe.families],
      models: universe.models.map((m) => ({ ...m })),
    },
    agent_info: agentInfo,
    targets_per_level: targets,
    excluded_stems: [],
    boards: { agents: { rows } },
    known_gaps: [...KNOWN_GAPS, ...(ctx.warnings ?? [])],
  };
}

function kernelBlock(k: KernelSummary): Record<string, KernelSummary['overall']> {
  return { ...k.levels, all: k.overall };
}

/** Rows with an end-to-end score first (by blend Score, highest first), then by agent and mode. */
function compareRows(a: LeaderboardRow, b: LeaderboardRow): number {
  const sa = a.e2e?.deployable.score.blend ?? -1;
  const sb = b.e2e?.deployable.score.blend ?? -1;
  if (sa !== sb) return sb - sa;
  return a.agent.localeCompare(b.agent) || modeOrder(a.mode) - modeOrder(b.mode);
}

function modeOrder(m: string): number {
  const i = ['ind', 'comp', 'seq'].indexOf(m);
  return i < 0 ? 3 : i;
}

export function e2eBlock(records: readonly E2eModelRecord[], universe: Universe, config: MacroEvalConfig): E2eBlock {
  const byModel = new Map(records.map((r) => [r.model, r]));
  const deployable = new Map<string, ModelScore>();
  const asIs = new Map<string, ModelScore>();
  let asIsKnown = true;
  for (const r of records) {
    deployable.set(r.model, scoreRun(r, r.family, r.noiseDiscrepancies, config));
    // With nothing dropped the deployable run is the as-is run.
    const run = r.asIs ?? (r.drops.length === 0 ? r : undefined);
    if (run) asIs.set(r.model, scoreRun(run, r.family, r.noiseDiscrepancies, config));
    else asIsKnown = false;
  }
  const perModel: PerModel[] = universe.models.map((m) => {
    const score = deployable.get(m.id) ?? MISSING;
    const rec = byModel.get(m.id);
    const ai = asIs.get(m.id);
    return {
      model: m.id,
      label: m.label,
      family: m.family,
      outcome: score.outcome,
      detail: score.detail,
      valid: score.valid,
      C: score.C,
      s: score.s ? { ...score.s } : null,
      mean_d: score.mean_d,
      g: Number.isFinite(score.g) ? score.g : null,
      n_items: score.n_items,
      n_dropped: rec?.drops.length ?? 0,
      as_is: ai ? { outcome: ai.outcome, detail: ai.detail, valid: ai.valid, C: ai.C, s: ai.s ? { ...ai.s } : null } : null,
    };
  });
  return {
    deployable: macroEval(universe, deployable),
    all_winners: asIsKnown ? macroEval(universe, asIs) : null,
    drops: dropsSummary(records, universe, deployable),
    per_model: perModel,
    sensitivity: {},
  };
}

function dropsSummary(records: readonly E2eModelRecord[], universe: Universe, scores: ReadonlyMap<string, ModelScore>): E2eBlock['drops'] {
  const withRequested = records.filter((r) => r.requested);
  const requested = withRequested.length ? withRequested.reduce((a, r) => a + r.requested!.length, 0) : null;
  const droppedPairs = withRequested.reduce((a, r) => a + r.drops.length, 0);
  const kept = requested === null ? null : requested - droppedPairs;
  const byCategory = Object.fromEntries(DROP_CATEGORIES.map((c) => [c, 0])) as Record<DropCategory, number>;
  const unique = new Set<string>();
  for (const r of records) {
    for (const d of r.drops) {
      byCategory[d.category]++;
      unique.add(d.task);
    }
  }
  const status = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>;
  for (const m of universe.models) status[(scores.get(m.id) ?? MISSING).outcome]++;
  return {
    requested,
    kept,
    kept_fraction: requested ? kept! / requested : null,
    dropped_unique_kernels: unique.size,
    dropped_by_category: byCategory,
    status,
  };
}

/** Score at each sensitivity scale (λ = blend), ranked among the rows with an end-to-end score. */
function addSensitivity(rows: LeaderboardRow[], records: ReadonlyArray<readonly E2eModelRecord[] | undefined>, universe: Universe, config: MacroEvalConfig): void {
  const scored = rows.map((r, i) => ({ row: r, records: records[i] })).filter((x) => x.row.e2e && x.records);
  for (const scale of config.sensitivity_scales) {
    const key = `${scale}x`;
    const scores = scored.map((x) => {
      const m = new Map<string, ModelScore>();
      for (const r of x.records!) m.set(r.model, scoreRun(r, r.family, r.noiseDiscrepancies, config, scale));
      return macroEval(universe, m).score.blend;
    });
    scored.forEach((x, i) => {
      const rank = 1 + scores.filter((s) => s > scores[i]!).length;
      x.row.e2e!.sensitivity[key] = { score: scores[i]!, rank, of: scores.length };
    });
  }
}

/** Rank (1 = best, ties share) of each row by a value; rows without one get null. */
export function ranks(values: ReadonlyArray<number | null>): Array<number | null> {
  return values.map((v) => (v === null ? null : 1 + values.filter((w) => w !== null && w > v).length));
}

