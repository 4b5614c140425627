/**
 * The tuning in force: the device's file (tuning/<device>.json, chosen by the CUDA device name through each file's
 * `match` list; generic.json otherwise), with FASTKERNELS_TUNING's file laid over it for A/B runs. Nothing is read at
 * import: the first cudaTuning() call resolves it (without a device yet: generic.json), and the CUDA runtime re-resolves
 * it for its device when it starts (activateDeviceTuning). The result is one plain object, so the launch path reads a
 * knob as cudaTuning().linear.gemvMaxRows: a call and a property load, no parsing.
 */
import { readFileSync } from 'node:fs';
import { UserError, setting, type Environment } from '@fastkernels/core';
import { TUNING_FILES } from './files.generated.js';
import { removedVariablesError } from './removed-variables.js';
import { DeviceTuningFileSchema, OverrideTuningFileSchema, SECTION_NAMES, type DeviceTuningFile, type OverrideTuningFile, type Tuning, type TuningSection } from './schema.js';

export const GENERIC_TUNING_FILE = 'generic.json';

export interface EffectiveTuning {
  readonly tuning: Tuning;
  /** The device name it was resolved for (undefined: before any device was known). */
  readonly device: string | undefined;
  /** The embedded device file used (tuning/<name>). */
  readonly deviceFile: string;
  /** FASTKERNELS_TUNING's file, when set. */
  readonly overrideFile: string | undefined;
  /** `section.key` -> where its value came from (`tuning/h200.json` or the override file's path). */
  readonly sources: Readonly<Record<string, string>>;
}

/** `linear.gemvMaxRows` from a zod issue path. */
function issuePath(path: ReadonlyArray<PropertyKey>): string {
  return path.map(String).join('.') || '(top level)';
}

function firstIssue(error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string; code: string; keys?: readonly string[] }> }): { field: string; message: string } {
  const issue = error.issues[0]!;
  if (issue.code === 'unrecognized_keys' && issue.keys?.length) {
    const at = issue.path.length ? `${issuePath(issue.path)}.` : '';
    return { field: issue.keys.map((k) => at + k).join(', '), message: `unknown key${issue.keys.length > 1 ? 's' : ''} (docs/tuning.md lists the keys)` };
  }
  return { field: issuePath(issue.path), message: issue.message };
}

let deviceFilesCache: ReadonlyMap<string, DeviceTuningFile> | undefined;

/** The embedded device files, validated (a bad one is a build error: tuning-files.test.ts checks them all). */
export function deviceTuningFiles(): ReadonlyMap<string, DeviceTuningFile> {
  if (deviceFilesCache) return deviceFilesCache;
  const out = new Map<string, DeviceTuningFile>();
  for (const [name, raw] of Object.entries(TUNING_FILES)) {
    const p = DeviceTuningFileSchema.safeParse(raw);
    if (!p.success) {
      const { field, message } = firstIssue(p.error);
      throw new Error(`packages/backend-cuda/tuning/${name}: ${field}: ${message}`);
    }
    out.set(name, p.data);
  }
  if (!out.has(GENERIC_TUNING_FILE)) throw new Error(`packages/backend-cuda/tuning/${GENERIC_TUNING_FILE} is missing: it is the fallback of every device`);
  deviceFilesCache = out;
  return out;
}

/** The device file for a CUDA device name: the first (by file name) whose `match` has a substring of it, else generic. */
export function deviceTuningFileFor(deviceName: string | undefined): string {
  const name = (deviceName ?? '').toLowerCase();
  if (name) {
    for (const [file, data] of deviceTuningFiles()) {
      if (data.match.some((m) => name.includes(m.toLowerCase()))) return file;
    }
  }
  return GENERIC_TUNING_FILE;
}

/** Read and validate an override file; every problem is a UserError naming FASTKERNELS_TUNING, the file and the key. */
export function readOverrideFile(path: string): OverrideTuningFile {
  const fix = 'fix the file, or unset FASTKERNELS_TUNING for the device\'s tuning (`fastkernels tuning derive --set section.key=value` writes a valid file)';
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(`FASTKERNELS_TUNING names a file that ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? String(e)})`}`, { file: path, fix });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UserError(`the FASTKERNELS_TUNING file is not valid JSON (${(e as Error).message})`, { file: path, fix });
  }
  return parseOverride(raw, path);
}

/** Validate an override object (from a file at `where`). */
export function parseOverride(raw: unknown, where: string): OverrideTuningFile {
  const p = OverrideTuningFileSchema.safeParse(raw);
  if (!p.success) {
    const { field, message } = firstIssue(p.error);
    throw new UserError(`tuning override: ${message}`, { file: where, field, fix: 'use the keys and values docs/tuning.md lists (`fastkernels tuning show` prints them all)' });
  }
  return p.data;
}

/** The device file with an override laid over it, and where each value came from. */
export function mergeTuning(deviceFile: string, override: OverrideTuningFile | undefined, overrideName?: string): { tuning: Tuning; sources: Record<string, string> } {
  const base = deviceTuningFiles().get(deviceFile);
  if (!base) throw new Error(`no embedded tuning file ${deviceFile}`);
  const tuning = {} as Record<TuningSection, Record<string, unknown>>;
  const sources: Record<string, string> = {};
  for (const s of SECTION_NAMES) {
    const over = (override?.[s] ?? {}) as Record<string, unknown>;
    tuning[s] = { ...(base[s] as Record<string, unknown>) };
    for (const k of Object.keys(tuning[s])) {
      if (over[k] !== undefined) {
        tuning[s][k] = over[k];
        sources[`${s}.${k}`] = overrideName ?? 'override';
      } else sources[`${s}.${k}`] = `tuning/${deviceFile}`;
    }
  }
  return { tuning: tuning as unknown as Tuning, sources };
}

/** Resolve the tuning for a device name (undefined: not known yet) from `env` (FASTKERNELS_TUNING). */
export function resolveTuning(device: string | undefined, env: Environment = process.env): EffectiveTuning {
  const removed = removedVariablesError(env);
  if (removed) throw removed;
  const deviceFile = deviceTuningFileFor(device);
  const overrideFile = setting('FASTKERNELS_TUNING', env);
  const override = overrideFile === undefined ? undefined : readOverrideFile(overrideFile);
  const { tuning, sources } = mergeTuning(deviceFile, override, overrideFile);
  return { tuning, device, deviceFile, overrideFile, sources };
}

let active: EffectiveTuning | undefined;

/** The tuning in force (resolved on the first call). The objects are live: withTuning patches them for a test. */
export function cudaTuning(): Tuning {
  return (active ??= resolveTuning(undefined)).tuning;
}

/** The tuning in force with its provenance (for `fastkernels tuning show` and the benches' JSON). */
export function effectiveTuning(): EffectiveTuning {
  cudaTuning();
  return active!;
}

/** `section.key`s a withTuning call holds now (a runtime started inside it must not undo the patch). */
const held = new Map<string, number>();

/**
 * Called when the CUDA runtime starts on a device: the tuning for its name. The section objects stay the same objects
 * (values are copied into them), and keys a withTuning call holds keep their patched value until it ends.
 */
export function activateDeviceTuning(deviceName: string): EffectiveTuning {
  if (active && active.deviceFile === deviceTuningFileFor(deviceName)) {
    if (active.device === undefined) active = { ...active, device: deviceName };
    return active;
  }
  const next = resolveTuning(deviceName);
  if (active) {
    for (const s of SECTION_NAMES) {
      const into = active.tuning[s] as Record<string, unknown>;
      for (const [k, v] of Object.entries(next.tuning[s])) if (!held.has(`${s}.${k}`)) into[k] = v;
    }
    active = { ...next, tuning: active.tuning };
  } else active = next;
  return active;
}

/** Forget the resolved tuning (tests: the next cudaTuning() resolves again from the environment). */
export function resetTuning(): void {
  active = undefined;
}

/** Run fn with some keys of one section patched, then put back the values they had (tests, labs). */
export function withTuning<S extends TuningSection, R>(section: S, patch: Partial<Tuning[S]>, fn: () => R): R {
  const table = cudaTuning()[section] as Record<string, unknown>;
  const keys = Object.keys(patch).map((k) => `${section}.${k}`);
  const before = Object.fromEntries(Object.keys(patch).map((k) => [k, table[k]]));
  Object.assign(table, patch);
  for (const k of keys) held.set(k, (held.get(k) ?? 0) + 1);
  try {
    return fn();
  } finally {
    for (const k of keys) held.get(k) === 1 ? held.delete(k) : held.set(k, held.get(k)! - 1);
    Object.assign(table, before);
  }
}
