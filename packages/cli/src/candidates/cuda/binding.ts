/**
 * Resolves a CUDA candidate's manifest against its task and its .cu source, before anything runs: every kernel named
 * exists as an `extern "C" __global__` function for every dtype it serves, each argument fits its parameter (a tensor
 * for a pointer, an expression for a scalar), every name an expression reads is known. The result is the plan the
 * module (module.ts) executes per forward call. Errors are UserErrors naming the manifest and the field.
 */
import { DTYPES, F, UserError, nearest, type DType, type TaskDefinition } from '@fastkernels/core';
import { parseSignature, type ArgType } from '@fastkernels/backend-cuda';
import { ExprError, checkExpr, parseExpr, type Expr, type Scope } from './expr.js';
import { isKernelStep, type CudaManifest, type TensorDecl } from './manifest.js';

export interface PlannedTensor {
  /** How steps refer to it: `out.<name>` for outputs, the bare name for scratch. */
  readonly ref: string;
  readonly shape: readonly Expr[];
  /** A dtype, 'act', or an input whose dtype it copies. */
  readonly dtype: string;
  readonly when: Expr | undefined;
  readonly zero: boolean;
}

export type PlannedArg = { readonly tensor: string } | { readonly nullPtr: true } | { readonly expr: Expr; readonly type: ArgType };

export interface PlannedKernel {
  readonly kind: 'kernel';
  readonly field: string;
  /** The entry per dtype the candidate serves ({dtype} replaced). */
  readonly entries: ReadonlyMap<DType, string>;
  readonly grid: readonly Expr[];
  readonly block: readonly Expr[];
  readonly sharedBytes: Expr;
  readonly args: readonly PlannedArg[];
  readonly when: Expr | undefined;
}

export type PlannedOpArg = { readonly tensor: string } | { readonly expr: Expr } | { readonly options: Readonly<Record<string, { expr: Expr } | { literal: boolean | null }>> };

export interface PlannedOp {
  readonly kind: 'op';
  readonly field: string;
  readonly fn: string;
  readonly args: readonly PlannedOpArg[];
  readonly out: string;
  readonly when: Expr | undefined;
}

export interface CudaPlan {
  readonly task: TaskDefinition;
  readonly dtypes: readonly DType[];
  readonly lets: readonly (readonly [string, Expr])[];
  readonly when: Expr | undefined;
  readonly fallback: 'baseline' | 'error';
  readonly outputs: readonly PlannedTensor[];
  readonly scratch: readonly PlannedTensor[];
  readonly steps: readonly (PlannedKernel | PlannedOp)[];
  readonly returns: readonly string[] | undefined;
  /** Symbolic dims bound from the inputs' shapes (the names the task's cases use). */
  readonly dims: readonly string[];
}

export interface BindingFiles {
  /** The manifest, as messages name it. */
  readonly manifest: string;
  /** The .cu, as messages name it. */
  readonly source: string;
}

/** The `__global__` function names a source defines (comments stripped). */
export function globalFunctions(source: string): string[] {
  const clean = source.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/.*$/gm, ' ').replace(/__launch_bounds__\s*\([^)]*\)/g, ' ');
  return [...clean.matchAll(/__global__\s+(?:[\w:<>,*&\s]+?\s+)?(\w+)\s*\(/g)].map((m) => m[1]!);
}

/** Is `entry` declared with C linkage (`extern "C" __global__` or inside an `extern "C" { }` block)? */
function hasCLinkage(source: string, entry: string): boolean {
  const clean = source.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/.*$/gm, ' ');
  if (new RegExp(`extern\\s+"C"[^;{}]*__global__[^;{}]*\\b${entry}\\s*\\(`).test(clean)) return true;
  const block = /extern\s+"C"\s*\{/g;
  for (let m = block.exec(clean); m; m = block.exec(clean)) {
    let depth = 1;
    let i = m.index + m[0].length;
    while (i < clean.length && depth > 0) {
      const c = clean[i++];
      if (c === '{') depth++;
      else if (c === '}') depth--;
    }
    if (new RegExp(`__global__[^;{}]*\\b${entry}\\s*\\(`).test(clean.slice(m.index, i))) return true;
  }
  return false;
}

/**
 * Plan a manifest for its task. `parameters` are the baseline module's parameter names (tensors a kernel may take).
 */
export function planCudaCandidate(m: CudaManifest, task: TaskDefinition, source: string, parameters: readonly string[], files: BindingFiles): CudaPlan {
  const err = (field: string, message: string, fix: string): never => {
    throw new UserError(`${field}: ${message}`, { file: files.manifest, field, fix });
  };
  const expr = (field: string, src: string | number, scope: Scope): Expr => {
    try {
      const e = parseExpr(src);
      checkExpr(e, scope);
      return e;
    } catch (e) {
      if (!(e instanceof ExprError)) throw e;
      return err(field, `${JSON.stringify(src)} ${e.message}`, 'write an expression over the dims, constructor parameters and let names (README: "Writing a candidate")');
    }
  };

  if (m.task !== task.id) err('task', `says ${m.task}, but the file is the candidate for ${task.id}`, `set "task": "${task.id}", or move the files to ${m.task.replace('/', '/')}.cu(.json)`);

  // ---- names ----
  const dims = [...new Set(task.inputs.flatMap((s) => s.shape.filter((d): d is string => typeof d === 'string')))];
  const values = new Set<string>([...dims, ...task.init.map((p) => p.name), 'dtype']);
  const outputRefs = task.outputs.map((o) => `out.${o.name}`);
  const tensors = new Set<string>([...task.inputs.map((s) => s.name), ...parameters, ...outputRefs]);
  for (const k of Object.keys(m.scratch)) {
    if (tensors.has(k)) err(`scratch.${k}`, `'${k}' is already a tensor of the task (an input or parameter)`, 'give the scratch buffer another name');
    tensors.add(k);
  }
  const lets: [string, Expr][] = [];
  for (const [name, src] of Object.entries(m.let)) {
    if (values.has(name) || tensors.has(name)) err(`let.${name}`, `'${name}' is already defined (a dim, constructor parameter or tensor)`, 'give it another name');
    lets.push([name, expr(`let.${name}`, src, { values, tensors })]);
    values.add(name);
  }
  const scope: Scope = { values, tensors };

  // ---- dtypes, condition ----
  const caseDtypes = [...new Set([...task.cases.ci, ...task.cases.production].map((c) => c.dtype))];
  const dtypes = m.dtypes ?? caseDtypes;
  const when = m.when ? expr('when', m.when, scope) : undefined;

  // ---- outputs and scratch ----
  const decl = (field: string, ref: string, d: TensorDecl): PlannedTensor => {
    if (!(DTYPES as readonly string[]).includes(d.dtype) && d.dtype !== 'act' && !task.inputs.some((s) => s.name === d.dtype)) {
      err(`${field}.dtype`, `'${d.dtype}' is no dtype`, `a dtype (${DTYPES.join(', ')}), 'act', or an input name (${task.inputs.map((s) => s.name).join(', ')}) to copy its dtype`);
    }
    return {
      ref,
      shape: d.shape.map((s, i) => expr(`${field}.shape[${i}]`, s, scope)),
      dtype: d.dtype,
      when: d.when ? expr(`${field}.when`, d.when, scope) : undefined,
      zero: d.zero,
    };
  };
  for (const k of Object.keys(m.outputs)) {
    if (!task.outputs.some((o) => o.name === k)) err(`outputs.${k}`, `${task.id} has no output '${k}'`, `its outputs: ${task.outputs.map((o) => o.name).join(', ')}`);
  }
  const outputs = task.outputs.map((o) => {
    const given = m.outputs[o.name];
    if (given) {
      if (o.optional && !given.when) err(`outputs.${o.name}.when`, `the task's output '${o.name}' is optional: say when the call produces it`, `add "when", e.g. "has(${task.inputs.find((s) => s.optional)?.name ?? 'x'})"`);
      return decl(`outputs.${o.name}`, `out.${o.name}`, given);
    }
    const unbound = o.shape.filter((d): d is string => typeof d === 'string' && !values.has(d));
    if (unbound.length) {
      err(`outputs.${o.name}`, `the output's shape [${o.shape.join(', ')}] uses ${unbound.join(', ')}, which no input's shape gives`, `add "let": {"${unbound[0]}": "<expression>"} or "outputs": {"${o.name}": {"shape": [...]}}`);
    }
    if (o.optional) err(`outputs.${o.name}`, `the task's output '${o.name}' is optional: say when the call produces it`, `add "outputs": {"${o.name}": {"shape": [${o.shape.map((d) => JSON.stringify(d)).join(', ')}], "when": "has(...)"}}`);
    return { ref: `out.${o.name}`, shape: o.shape.map((d) => parseExpr(typeof d === 'number' ? d : d)), dtype: o.dtype, when: undefined, zero: false };
  });
  const scratch = Object.entries(m.scratch).map(([k, d]) => decl(`scratch.${k}`, k, d));

  // ---- steps ----
  const known = globalFunctions(source);
  const steps = m.steps.map((s, i): PlannedKernel | PlannedOp => {
    const field = `steps[${i}]`;
    const stepWhen = s.when ? expr(`${field}.when`, s.when, scope) : undefined;
    if (!isKernelStep(s)) {
      const fn = s.op.slice(2);
      if (typeof (F as Record<string, unknown>)[fn] !== 'function') {
        const near = nearest(fn, Object.keys(F));
        err(`${field}.op`, `F has no function '${fn}'`, near ? `did you mean F.${near}? (docs/ops.md lists the ops)` : 'see docs/ops.md for the op vocabulary');
      }
      const args = s.args.map((a, j): PlannedOpArg => {
        if (typeof a === 'string' && tensors.has(a)) return { tensor: a };
        if (typeof a === 'object') {
          return { options: Object.fromEntries(Object.entries(a).map(([k, v]) => [k, typeof v === 'boolean' || v === null ? { literal: v } : { expr: expr(`${field}.args[${j}].${k}`, v, scope) }])) };
        }
        return { expr: expr(`${field}.args[${j}]`, a, scope) };
      });
      if (s.out.startsWith('out.') ? !outputRefs.includes(s.out) : tensors.has(s.out)) {
        err(`${field}.out`, s.out.startsWith('out.') ? `${task.id} has no output '${s.out.slice(4)}'` : `'${s.out}' is already a tensor`, `bind the result to a new name, or to one of ${outputRefs.join(', ')}`);
      }
      tensors.add(s.out);
      return { kind: 'op', field, fn, args, out: s.out, when: stepWhen };
    }
    const entries = new Map<DType, string>();
    let signature: ArgType[] | undefined;
    for (const dt of dtypes) {
      const entry = s.kernel.replaceAll('{dtype}', dt);
      if (!/^[A-Za-z_]\w*$/.test(entry)) err(`${field}.kernel`, `'${s.kernel}' is not a C identifier`, 'name an extern "C" __global__ function; {dtype} is replaced by bf16, f16, f32, ...');
      if (!known.includes(entry)) {
        const near = nearest(entry, known);
        err(`${field}.kernel`, `no __global__ function '${entry}' in ${files.source}${s.kernel.includes('{dtype}') ? ` (for dtype ${dt})` : ''} (it defines: ${known.join(', ') || 'none'})`, near ? `did you mean ${near}? or narrow "dtypes"` : `define it, or narrow "dtypes" to those the kernels handle`);
      }
      if (!hasCLinkage(source, entry)) err(`${field}.kernel`, `'${entry}' is not declared extern "C" in ${files.source} (a C++ name is mangled and cannot be found)`, `declare it \`extern "C" __global__ void ${entry}(...)\``);
      let sig: ArgType[];
      try {
        sig = parseSignature(source, entry);
      } catch (e) {
        return err(`${field}.kernel`, `${(e as Error).message}`, 'use pointers and int / long long / unsigned / float / double parameters');
      }
      if (signature && sig.map(String).join() !== signature.map(String).join()) {
        err(`${field}.kernel`, `the kernels for different dtypes take different parameters (${[...entries.values()][0]}: ${signature.join(', ')}; ${entry}: ${sig.join(', ')})`, 'give every dtype variant the same parameter list');
      }
      signature = sig;
      entries.set(dt, entry);
    }
    const sig = signature ?? [];
    if (s.args.length !== sig.length) {
      err(`${field}.args`, `${[...entries.values()][0]} takes ${sig.length} parameter${sig.length === 1 ? '' : 's'} (${sig.map((t) => (typeof t === 'string' ? t : 'struct')).join(', ')}), args lists ${s.args.length}`, 'give one arg per kernel parameter, in order');
    }
    const args = s.args.map((a, j): PlannedArg => {
      const t = sig[j]!;
      const f = `${field}.args[${j}]`;
      if (t === 'ptr') {
        if (a === 0) return { nullPtr: true };
        if (typeof a !== 'string' || !tensors.has(a)) {
          err(f, `parameter ${j} is a pointer, but ${JSON.stringify(a)} names no tensor`, `name a tensor: inputs ${task.inputs.map((x) => x.name).join(', ')}; parameters ${parameters.join(', ') || '(none)'}; outputs ${outputRefs.join(', ')}${Object.keys(m.scratch).length ? `; scratch ${Object.keys(m.scratch).join(', ')}` : ''} (or 0 for a null pointer)`);
        }
        return { tensor: a as string };
      }
      if (typeof t !== 'string') err(f, 'struct parameters cannot be bound from a manifest', 'take the fields as separate scalar parameters, or write the candidate in TypeScript with cudaKernel({ source, entry, signature })');
      if (typeof a === 'string' && tensors.has(a)) err(f, `parameter ${j} is a scalar (${t}), but '${a}' is a tensor`, `pass a pointer parameter for it, or an expression such as numel(${a})`);
      return { expr: expr(f, a, scope), type: t };
    });
    const dim3 = (name: 'grid' | 'block', xs: readonly (string | number)[]) => xs.map((x, j) => expr(`${field}.${name}[${j}]`, x, scope));
    return { kind: 'kernel', field, entries, grid: dim3('grid', s.grid), block: dim3('block', s.block), sharedBytes: expr(`${field}.sharedBytes`, s.sharedBytes, scope), args, when: stepWhen };
  });

  for (const [i, r] of (m.returns ?? []).entries()) {
    if (!tensors.has(r)) err(`returns[${i}]`, `'${r}' names no tensor`, `return outputs (${outputRefs.join(', ')}), inputs, or op results`);
  }
  return { task, dtypes, lets, when, fallback: m.fallback, outputs, scratch, steps, returns: m.returns, dims };
}
