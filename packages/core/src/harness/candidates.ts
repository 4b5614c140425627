import { Module, type ModuleClass } from '../module.js';
import { UserError } from '../errors.js';
import type { TaskDefinition } from '../task.js';

/**
 * The candidate-set contract. A candidate set is a folder of `L<k>/<stem>.ts|.js` files, each
 * exporting a class named like the baseline (`RMSNorm` for L1/rms_norm) that extends Module and
 * takes the same constructor and forward arguments, or of CUDA C++ candidates `L<k>/<stem>.cu` with their
 * binding `L<k>/<stem>.cu.json` (a .cu beside a .ts of the same stem is that class's kernel source instead). Files and folders whose name starts with `_`
 * or `.` are helpers and are not candidates; `.d.ts` files are ignored.
 *
 * Core holds the types and the validation; the CLI holds the loader (esbuild transpiles and
 * bundles each file against the running CLI's own packages).
 */

/** One file of a candidate set, before it is loaded. */
export interface CandidateFile {
  /** Absolute path. */
  readonly path: string;
  /** Path relative to the set's folder, with '/' separators (what messages show). */
  readonly relPath: string;
  readonly level: number;
  readonly stem: string;
  /** `L<level>/<stem>`. */
  readonly taskId: string;
}

/** A loaded, validated candidate. */
export interface LoadedCandidate {
  readonly file: CandidateFile;
  readonly task: TaskDefinition;
  readonly cls: ModuleClass;
}

/** A file that failed to load or validate, with the error a user can act on. */
export interface CandidateLoadFailure {
  readonly file: CandidateFile;
  readonly error: UserError;
}

export interface CandidateSet {
  readonly dir: string;
  readonly candidates: readonly LoadedCandidate[];
  readonly failures: readonly CandidateLoadFailure[];
}

/** What loads a candidate folder (implemented by the CLI). */
export interface CandidateLoader {
  load(dir: string, tasks: ReadonlyMap<string, TaskDefinition>): Promise<CandidateSet>;
}

const CANDIDATE_PATH = /^L([1-9])\/([a-z0-9_]+)\.(ts|mts|js|mjs|cu|py)$/;

/** Is this relative path (with '/') a candidate file? Returns its level and stem, or undefined. */
export function parseCandidatePath(relPath: string): { level: number; stem: string } | undefined {
  const m = CANDIDATE_PATH.exec(relPath);
  if (!m || relPath.endsWith('.d.ts')) return undefined;
  return { level: Number(m[1]), stem: m[2]! };
}

/** Is this a helper file/folder name (skipped by the loader)? */
export function isHelperName(name: string): boolean {
  return name.startsWith('_') || name.startsWith('.') || name.endsWith('.d.ts') || name.endsWith('.map');
}

/** What a candidate for this task must look like. */
export interface ExpectedSignature {
  readonly className: string;
  /** Constructor parameters the baseline declares, and how many are required. */
  readonly initParams: readonly string[];
  readonly requiredInit: number;
  /** forward() arguments the harness passes, and how many are required. */
  readonly forwardParams: readonly string[];
  readonly requiredForward: number;
}

export function expectedSignature(task: TaskDefinition): ExpectedSignature {
  return {
    className: task.className,
    initParams: task.init.map((p) => p.name),
    requiredInit: task.init.filter((p) => !p.optional).length,
    forwardParams: [...task.inputs.map((s) => s.name), ...task.hostInputs.map((h) => h.name)],
    requiredForward: task.inputs.filter((s) => !s.optional).length,
  };
}

/** `RMSNorm(hiddenSize, eps?)`. */
export function formatConstructor(task: TaskDefinition): string {
  return `${task.className}(${task.init.map((p) => (p.optional ? `${p.name}?` : p.name)).join(', ')})`;
}

/** `forward(x, residual?)`; host inputs (always optional) after the tensors: `forward(logits, ..., hint?)`. */
export function formatForward(task: TaskDefinition): string {
  return `forward(${[...task.inputs.map((s) => (s.optional ? `${s.name}?` : s.name)), ...task.hostInputs.map((h) => `${h.name}?`)].join(', ')})`;
}

/** Does a function's source start with a rest parameter (then Function.length says nothing)? */
function hasRestParam(fn: Function): boolean {
  const src = Function.prototype.toString.call(fn);
  const open = src.indexOf('(');
  return open >= 0 && /^\(\s*\.\.\./.test(src.slice(open));
}

/**
 * Check a module namespace exported by a candidate file. Returns the class, or throws a
 * UserError naming the file, the class and what differs.
 *
 * Arity: a JS function's `length` counts parameters before the first one with a default, so a
 * candidate's constructor length must lie within [required, declared] init parameters of the
 * task, and forward's length within [required, declared] forward inputs (a rest parameter passes).
 */
export function validateCandidateExports(file: CandidateFile, task: TaskDefinition, exports: Readonly<Record<string, unknown>>): ModuleClass {
  const sig = expectedSignature(task);
  const where = { file: file.relPath };
  const cls = exports[sig.className];
  if (cls === undefined) {
    const classes = Object.entries(exports).filter(([, v]) => typeof v === 'function').map(([k]) => k);
    const found = classes.length ? `it exports ${classes.join(', ')}` : 'it exports no class';
    throw new UserError(`no export named '${sig.className}' (${found})`, {
      ...where,
      fix: `export the candidate as \`export class ${sig.className} extends Module { ... }\` (the baseline's class name for ${task.id})`,
    });
  }
  if (typeof cls !== 'function' || !cls.prototype) {
    throw new UserError(`'${sig.className}' is a ${typeof cls}, not a class`, { ...where, fix: `export class ${sig.className} extends Module` });
  }
  if (!(cls.prototype instanceof Module)) {
    throw new UserError(`class ${sig.className} does not extend Module`, {
      ...where,
      fix: `write \`import { Module } from '@fastkernels/core'\` and \`class ${sig.className} extends Module\``,
    });
  }
  const ctorLen = (cls as Function).length;
  const declared = sig.initParams.length;
  if (!hasRestParam(cls as Function) && (ctorLen > declared || ctorLen < sig.requiredInit)) {
    const want = sig.requiredInit === declared ? `${declared}` : `${sig.requiredInit} to ${declared}`;
    throw new UserError(`class ${sig.className}: constructor takes ${ctorLen} required parameter${ctorLen === 1 ? '' : 's'}, the baseline takes ${want}: ${formatConstructor(task)}`, {
      ...where,
      fix: `declare the constructor as constructor(${sig.initParams.map((n, i) => (i < sig.requiredInit ? n : `${n} = <default>`)).join(', ')})`,
    });
  }
  const fwd = (cls.prototype as { forward?: unknown }).forward;
  if (typeof fwd !== 'function') {
    throw new UserError(`class ${sig.className} has no forward() method`, { ...where, fix: `add ${formatForward(task)}` });
  }
  const fwdLen = fwd.length;
  const fwdDeclared = sig.forwardParams.length;
  if (!hasRestParam(fwd) && (fwdLen > fwdDeclared || (fwdLen < sig.requiredForward && fwdLen !== 0))) {
    throw new UserError(`class ${sig.className}: forward takes ${fwdLen} parameter${fwdLen === 1 ? '' : 's'}, the task passes ${fwdDeclared}: ${formatForward(task)}`, {
      ...where,
      fix: `declare forward(${sig.forwardParams.join(', ')}) (optional inputs may have defaults)`,
    });
  }
  return cls as ModuleClass;
}

/** The error for a path that names no task, with the nearest task id as a hint. */
export function unknownTaskError(file: CandidateFile, known: Iterable<string>): UserError {
  const near = nearest(file.taskId, known);
  return new UserError(`no task ${file.taskId} (candidate files are named L<level>/<task stem>.ts)`, {
    file: file.relPath,
    fix: near ? `rename it to ${near}${file.relPath.slice(file.relPath.lastIndexOf('.'))} (run \`fastkernels list\` for every task id)` : 'run `fastkernels list` for the task ids',
  });
}

/** The closest string by edit distance (or undefined when nothing is close). */
export function nearest(target: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = editDistance(target, c);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best !== undefined && bestD <= Math.max(3, Math.floor(target.length / 2)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!;
      prev[j] = Math.min(up + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length]!;
}
