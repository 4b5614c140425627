import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { UserError } from '@fastkernels/core';
import { MacroEvalConfigSchema, type MacroEvalConfig } from './config.js';
import { buildLeaderboard, normalizeMode, agentKeyOf, type EntryInput, type InputFile } from './board.js';
import { E2eReportSchema, type E2eModelRecord } from './e2e-record.js';
import { BenchReportInputSchema, identityFromCandidates, isBenchReport, MinimalReportInputSchema, type KernelCase } from './kernel-input.js';
import type { Leaderboard } from './leaderboard-schema.js';
import { loadJson, loadRawJson, validate } from './read-input.js';

/**
 * `fastkernels score --kernel FILE... --e2e FILE... --out leaderboard.json`: read kernel bench reports and
 * e2e reports, group them into entries (agent × mode), score and write the board.
 *
 * A file is tied to its entry by a `AGENT:MODE=` prefix on the command line (`--kernel KDA:ind=k.json`) or,
 * without one, by the `agent` and `mode` fields inside it, or (bench reports) by the candidate folder's name
 * when it reads `<agent>-<mode>` (e.g. `runs/kda-ind`).
 */
export interface ScoreOptions {
  readonly kernel: readonly string[];
  readonly e2e: readonly string[];
  readonly out: string;
  readonly config?: string;
  /** GPU name when the inputs do not record one. */
  readonly gpu?: string;
  /** Fixed timestamp (ISO 8601); else SOURCE_DATE_EPOCH, else now. */
  readonly generatedAt?: string;
  /** Folder to run `git rev-parse HEAD` in (default: the current one). */
  readonly cwd?: string;
}

export interface ScoreResult {
  readonly board: Leaderboard;
  readonly out: string;
}

export interface FileSpec {
  readonly path: string;
  readonly agent?: string;
  readonly mode?: string;
}

/** `KDA:ind=path/to/file.json` → {agent 'KDA', mode 'ind', path}; a bare path stays a path. */
export function parseFileSpec(spec: string): FileSpec {
  const m = /^([^=:/\\]+):([^=:/\\]+)=(.+)$/.exec(spec);
  if (m) return { agent: m[1]!.trim(), mode: m[2]!.trim(), path: m[3]! };
  return { path: spec };
}

const KERNEL_FIX = 'pass the JSON written by `fastkernels bench --json FILE` (an object with a "results" array of cases {task, status, speedup})';
const E2E_FIX = 'pass the JSON written by `fastkernels e2e` (an object with a "models" array of per-model records)';

interface Group {
  agent: string;
  mode: string;
  /** The agent name came from a candidate folder's name (lower-cased, say): a name written in a file wins. */
  weakName: boolean;
  kernelCases?: KernelCase[];
  kernelFiles: InputFile[];
  e2eRecords?: E2eModelRecord[];
  e2eFiles: InputFile[];
  gpu: string | null;
  openWeights: boolean | null;
  cost: Record<string, unknown> | null;
}

function identity(spec: FileSpec, fromFile: { agent?: string | undefined; mode?: string | undefined }, flag: string): { agent: string; mode: string } {
  const agent = spec.agent ?? fromFile.agent;
  const mode = spec.mode ?? fromFile.mode;
  if (!agent || !mode) {
    throw new UserError(`cannot tell which agent and mode this file belongs to`, {
      file: spec.path,
      field: !agent ? 'agent' : 'mode',
      fix: `prefix it on the command line (${flag} 'KDA:ind=${spec.path}') or add "agent" and "mode" fields to the file`,
    });
  }
  return { agent, mode: normalizeMode(mode) };
}

export function loadConfig(path: string | undefined): MacroEvalConfig {
  if (!path) return MacroEvalConfigSchema.parse({});
  return loadJson(path, MacroEvalConfigSchema, 'MacroEval config', 'a JSON object with keys such as tau, g_quantile, g_floor, g_cap, g_fallback, f, f_default, lambdas, sensitivity_scales (all optional)').data;
}

export function loadEntries(kernel: readonly string[], e2e: readonly string[]): { entries: EntryInput[]; gpus: string[]; versions: Record<string, string>; gpuCount: number | null; warnings: string[] } {
  const groups = new Map<string, Group>();
  const gpus: string[] = [];
  const versions: Record<string, string> = {};
  const warnings: string[] = [];
  let gpuCount: number | null = null;
  const group = (agent: string, mode: string, weakName = false): Group => {
    const key = `${agentKeyOf(agent)}/${mode}`;
    let g = groups.get(key);
    if (!g) {
      const named = weakName ? [...groups.values()].find((o) => !o.weakName && agentKeyOf(o.agent) === agentKeyOf(agent)) : undefined;
      if (named) {
        agent = named.agent;
        weakName = false;
      }
      g = { agent, mode, weakName, kernelFiles: [], e2eFiles: [], gpu: null, openWeights: null, cost: null };
      groups.set(key, g);
    } else if (g.weakName && !weakName) {
      g.agent = agent;
      g.weakName = false;
    }
    // Every mode of an agent shows the same name.
    if (!weakName) for (const other of groups.values()) if (agentKeyOf(other.agent) === agentKeyOf(agent) && other.weakName) { other.agent = agent; other.weakName = false; }
    return g;
  };
  for (const arg of kernel) {
    const spec = parseFileSpec(arg);
    const raw = loadRawJson(spec.path, 'kernel bench report', KERNEL_FIX);
    const input = isBenchReport(raw.data)
      ? validate(spec.path, raw.data, BenchReportInputSchema, 'kernel bench report', KERNEL_FIX)
      : validate(spec.path, raw.data, MinimalReportInputSchema, 'kernel bench report', KERNEL_FIX);
    const explicit = spec.agent ?? input.agent;
    const { agent, mode } = identity(spec, { ...identityFromCandidates(input.candidates), ...dropUndefined({ agent: input.agent, mode: input.mode }) }, '--kernel');
    const g = group(agent, mode, explicit === undefined);
    (g.kernelCases ??= []).push(...input.cases);
    g.kernelFiles.push({ path: raw.path, sha256: raw.sha256 });
    if (input.gpu) {
      g.gpu ??= input.gpu;
      gpus.push(input.gpu);
    }
    for (const [k, v] of Object.entries(input.versions ?? {})) versions[k] ??= v;
    if (!input.complete) warnings.push(`${raw.path}: the bench run did not complete (complete: false); its missing tasks count as not benched.`);
  }
  for (const raw of e2e) {
    const spec = parseFileSpec(raw);
    const file = loadJson(spec.path, E2eReportSchema, 'e2e report', E2E_FIX);
    const { agent, mode } = identity(spec, file.data, '--e2e');
    const g = group(agent, mode);
    const records = (g.e2eRecords ??= []);
    file.data.models.forEach((m, i) => {
      if (records.some((r) => r.model === m.model)) {
        throw new UserError(`model ${m.model} appears twice for ${agent} (${mode})`, {
          file: spec.path,
          field: `models[${i}].model`,
          fix: 'keep one record per model and entry (the last drop-and-retry run)',
        });
      }
      records.push(m);
    });
    g.e2eFiles.push({ path: file.path, sha256: file.sha256 });
    if (file.data.gpu) {
      g.gpu ??= file.data.gpu;
      gpus.push(file.data.gpu);
    }
    if (file.data.gpu_count) gpuCount = Math.max(gpuCount ?? 0, file.data.gpu_count);
    if (file.data.open_weights !== undefined) g.openWeights = file.data.open_weights;
    if (file.data.cost) g.cost = file.data.cost;
    for (const [k, v] of Object.entries(file.data.versions ?? {})) versions[k] ??= v;
  }
  const entries = [...groups.values()].map((g) => ({
    agent: g.agent,
    mode: g.mode,
    openWeights: g.openWeights,
    ...(g.kernelCases ? { kernelCases: g.kernelCases } : {}),
    kernelFiles: g.kernelFiles,
    ...(g.e2eRecords ? { e2eRecords: g.e2eRecords } : {}),
    e2eFiles: g.e2eFiles,
    gpu: g.gpu,
    cost: g.cost,
  }));
  return { entries, gpus, versions, gpuCount, warnings };
}

function dropUndefined<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export function gitCommit(cwd: string = process.cwd()): string | null {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || null;
  } catch {
    return null;
  }
}

export function packageVersion(): string {
  // src/ and dist/ both sit one folder below the package root.
  return (createRequire(import.meta.url)('../package.json') as { version: string }).version;
}

export function generatedAt(fixed?: string): string {
  if (fixed) return fixed;
  const epoch = process.env.SOURCE_DATE_EPOCH;
  if (epoch && /^\d+$/.test(epoch)) return new Date(Number(epoch) * 1000).toISOString();
  return new Date().toISOString();
}

/** Score the inputs and write the board; returns it. */
export function runScore(opts: ScoreOptions): ScoreResult {
  if (opts.kernel.length === 0 && opts.e2e.length === 0) {
    throw new UserError('nothing to score', { field: '--kernel / --e2e', fix: 'give at least one --kernel or --e2e file' });
  }
  const config = loadConfig(opts.config);
  const { entries, gpus, versions, gpuCount, warnings } = loadEntries(opts.kernel, opts.e2e);
  const distinct = [...new Set(gpus)];
  const board = buildLeaderboard(entries, {
    config,
    generatedAt: generatedAt(opts.generatedAt),
    version: packageVersion(),
    commit: gitCommit(opts.cwd),
    node: process.versions.node,
    gpu: opts.gpu ?? (distinct.length ? distinct.join(' + ') : null),
    gpuCount,
    versions,
    warnings,
  });
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(opts.out, JSON.stringify(board, null, 2) + '\n');
  return { board, out: opts.out };
}
