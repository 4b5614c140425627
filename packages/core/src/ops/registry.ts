/**
 * The op registry: every op is declared once here in core (name, inputs, zod attrs, shape/dtype inference,
 * optionally a decomposition into other ops); backends register the kernels they have in an OpKernelTable;
 * callOp validates a call, picks the inputs' backend and runs its kernel, else the op's decomposition.
 * See docs/ops.md for the contract.
 */
import type { z } from 'zod';
import type { Backend } from '../backend.js';
import { DTYPE_INFO, type DType } from '../dtype.js';
import type { Ops } from '../ops.js';
import { formatShape, shapesEqual, type Shape } from '../shape.js';
import type { Tensor } from '../tensor.js';

export const OP_GROUPS = ['elementwise', 'reduction', 'layout', 'norm', 'matmul', 'conv', 'attention', 'quant', 'recurrent'] as const;
export type OpGroup = (typeof OP_GROUPS)[number];

/** What inference sees of a tensor (a Tensor satisfies it). */
export interface TensorMeta {
  readonly shape: Shape;
  readonly dtype: DType;
}

/** One argument of a call: a tensor, a Python-style scalar (where the input allows it), or null (an absent optional input). */
export type OpArg = Tensor | number | null;
/** The same argument as inference sees it. */
export type MetaArg = TensorMeta | number | null;

/** Which dtypes an input accepts: a class or an explicit list. */
export type DTypeClass = 'any' | 'float' | 'int' | 'bool' | 'intOrBool' | readonly DType[];

export interface InputSpec {
  readonly name: string;
  /** null is allowed (PyTorch's `Optional[Tensor]`). */
  readonly optional?: boolean;
  /** A JS number is allowed in place of a tensor (PyTorch's `Scalar` overloads). */
  readonly scalar?: boolean;
  /** This input takes every remaining argument (cat's `tensors`); only the last input may be variadic. */
  readonly variadic?: boolean;
  /** Accepted dtypes (default 'any'); checked by callOp before infer. */
  readonly dtypes?: DTypeClass;
}

/** Everything a kernel, a decomposition or a `viaOps` hook gets: validated inputs, parsed attrs, inferred outputs. */
export interface OpCall<A = Record<string, unknown>> {
  readonly op: OpSpec<A>;
  readonly backend: Backend;
  readonly inputs: readonly OpArg[];
  readonly attrs: A;
  /** The outputs `infer` promised: a kernel returns tensors of exactly these shapes and dtypes. */
  readonly outputs: readonly TensorMeta[];
}

/** A backend's kernel: returns its outputs (allocated by the kernel, or views of inputs for view ops). */
export type OpKernel<A = any> = (call: OpCall<A>) => Tensor | readonly Tensor[];
/** true, or why the kernel cannot take this call (then callOp tries the decomposition). */
export type OpSupports<A = any> = (call: OpCall<A>) => true | string;

export interface OpSpecInit<S extends z.ZodType> {
  /** PyTorch's name in snake_case: 'gelu', 'layer_norm', 'index_select'. Unique. */
  readonly name: string;
  readonly group: OpGroup;
  /** One or two sentences: the semantics, as PyTorch's docs would state them. */
  readonly doc: string;
  readonly inputs: readonly InputSpec[];
  /** zod object of the non-tensor arguments, with PyTorch's names and defaults. */
  readonly attrs: S;
  /** Output shapes and dtypes; does every shape check and throws OpError (opError) naming the op, the argument and the shapes. */
  readonly infer: (inputs: readonly MetaArg[], attrs: z.output<S>) => readonly TensorMeta[];
  /** Names of the outputs (default ['out']). */
  readonly outputs?: readonly string[];
  /**
   * The op written with other ops (through callOp / Tensor methods), used when the backend has no kernel for it: a
   * fused op stays runnable everywhere. Must return tensors matching `call.outputs`.
   */
  readonly decompose?: (call: OpCall<z.output<S>>) => readonly Tensor[];
  /**
   * Run the call with the backend's existing `Ops` method (the Llama surface) when it fits, else return undefined.
   * Tried after a registered kernel and before the decomposition, so every backend that implements Ops gets the op at
   * the speed it has today.
   */
  readonly viaOps?: (ops: Ops, call: OpCall<z.output<S>>) => readonly Tensor[] | undefined;
  /** Ops whose results alias their input (view, permute, narrow, expand): callOp does not require fresh outputs. */
  readonly view?: boolean;
}

export interface OpSpec<A = any> {
  readonly name: string;
  readonly group: OpGroup;
  readonly doc: string;
  readonly inputs: readonly InputSpec[];
  readonly attrs: z.ZodType<A>;
  readonly outputs: readonly string[];
  readonly infer: (inputs: readonly MetaArg[], attrs: A) => readonly TensorMeta[];
  readonly decompose?: (call: OpCall<A>) => readonly Tensor[];
  readonly viaOps?: (ops: Ops, call: OpCall<A>) => readonly Tensor[] | undefined;
  readonly view: boolean;
}

/** A call that is wrong (shapes, dtypes, attrs): names the op and the argument. */
export class OpError extends Error {
  override readonly name = 'OpError';
  constructor(
    readonly op: string,
    message: string,
  ) {
    super(`${op}: ${message}`);
  }
}

/** No kernel, no Ops route and no decomposition for this call on this backend. */
export class UnsupportedOpError extends Error {
  override readonly name = 'UnsupportedOpError';
  constructor(
    readonly op: string,
    readonly backend: string,
    readonly reason: string,
  ) {
    super(`op '${op}' is not supported on backend '${backend}': ${reason}`);
  }
}

/** Throw an OpError from inside infer / a kernel. */
export function opError(op: string, message: string): never {
  throw new OpError(op, message);
}

const OPS = new Map<string, OpSpec>();

/** Declare an op (once, at module load of its group file). */
export function defineOp<S extends z.ZodType>(init: OpSpecInit<S>): OpSpec<z.output<S>> {
  if (!/^[a-z][a-z0-9_]*$/.test(init.name)) throw new Error(`op name '${init.name}' must be snake_case`);
  if (OPS.has(init.name)) throw new Error(`op '${init.name}' is defined twice`);
  init.inputs.forEach((inp, i) => {
    if (inp.variadic && i !== init.inputs.length - 1) throw new Error(`op '${init.name}': only the last input may be variadic`);
  });
  const spec: OpSpec<z.output<S>> = Object.freeze({
    name: init.name,
    group: init.group,
    doc: init.doc,
    inputs: Object.freeze([...init.inputs]),
    attrs: init.attrs as unknown as z.ZodType<z.output<S>>,
    outputs: Object.freeze([...(init.outputs ?? ['out'])]),
    infer: init.infer,
    decompose: init.decompose,
    viaOps: init.viaOps,
    view: init.view ?? false,
  });
  OPS.set(spec.name, spec as OpSpec);
  return spec;
}

export function getOp(name: string): OpSpec {
  const spec = OPS.get(name);
  if (!spec) throw new OpError(name, `unknown op (known: ${[...OPS.keys()].sort().join(', ')})`);
  return spec;
}

export function hasOp(name: string): boolean {
  return OPS.has(name);
}

/** Every declared op, optionally of one group, sorted by name. */
export function listOps(group?: OpGroup): OpSpec[] {
  return [...OPS.values()].filter((s) => !group || s.group === group).sort((a, b) => a.name.localeCompare(b.name));
}

// ---------------------------------------------------------------------------------------------
// Backend kernel tables

interface KernelEntry {
  readonly kernel: OpKernel;
  readonly supports?: OpSupports;
}

/** The kernels one backend has, by op name. A backend exposes it as `Backend.opKernels`. */
export class OpKernelTable {
  private readonly kernels = new Map<string, KernelEntry>();

  constructor(readonly backendName: string) {}

  /** Register (or replace: a later registration wins, so a specialised kernel can override a generic one). */
  register<A = any>(op: string, kernel: OpKernel<A>, supports?: OpSupports<A>): void {
    this.kernels.set(op, { kernel: kernel as OpKernel, supports: supports as OpSupports | undefined });
  }

  get(op: string): KernelEntry | undefined {
    return this.kernels.get(op);
  }

  has(op: string): boolean {
    return this.kernels.has(op);
  }

  names(): string[] {
    return [...this.kernels.keys()].sort();
  }
}

export interface OpSupportInfo {
  readonly name: string;
  readonly group: OpGroup;
  /** 'kernel': the backend registered one; 'ops': through its Ops method; 'decomposition': through other ops. */
  readonly via: 'kernel' | 'ops' | 'decomposition';
}

/** The declared ops a backend can run and how (a decomposition's own sub-ops are not checked here). */
export function supportedOps(backend: Backend): OpSupportInfo[] {
  const out: OpSupportInfo[] = [];
  for (const spec of listOps()) {
    if (backend.opKernels?.has(spec.name)) out.push({ name: spec.name, group: spec.group, via: 'kernel' });
    else if (spec.viaOps) out.push({ name: spec.name, group: spec.group, via: 'ops' });
    else if (spec.decompose) out.push({ name: spec.name, group: spec.group, via: 'decomposition' });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Dispatch

function isTensorArg(a: OpArg | MetaArg): a is TensorMeta {
  return a !== null && typeof a === 'object';
}

function dtypeAllowed(cls: DTypeClass, d: DType): boolean {
  if (typeof cls !== 'string') return cls.includes(d);
  const kind = DTYPE_INFO[d].kind;
  switch (cls) {
    case 'any': return true;
    case 'float': return kind === 'float';
    case 'int': return kind === 'int';
    case 'bool': return kind === 'bool';
    case 'intOrBool': return kind !== 'float';
  }
}

function describeDTypes(cls: DTypeClass): string {
  return typeof cls === 'string' ? `${cls} dtypes` : cls.join(' | ');
}

/**
 * Check arity, argument kinds and dtypes against the spec's inputs; trailing optional inputs may be left out (they are
 * passed on as null). Returns the arguments with those nulls filled in.
 */
function checkArgs<A extends OpArg | MetaArg>(spec: OpSpec, given: readonly A[]): readonly A[] {
  const n = spec.inputs.length;
  const variadic = n > 0 && spec.inputs[n - 1]!.variadic;
  let args = given;
  if (!variadic && args.length < n && spec.inputs.slice(args.length).every((i) => i.optional)) {
    args = [...args, ...Array<A>(n - args.length).fill(null as A)];
  }
  if (variadic ? args.length < n - 1 : args.length !== n) {
    opError(spec.name, `expected ${variadic ? `at least ${n - 1}` : n} inputs (${spec.inputs.map((i) => i.name).join(', ')}), got ${args.length}`);
  }
  args.forEach((a, i) => {
    const inp = spec.inputs[Math.min(i, n - 1)]!;
    if (a === null || a === undefined) {
      if (!inp.optional) opError(spec.name, `${inp.name} is required`);
      return;
    }
    if (typeof a === 'number') {
      if (!inp.scalar) opError(spec.name, `${inp.name} must be a tensor, got the number ${a}`);
      return;
    }
    if (!isTensorArg(a)) opError(spec.name, `${inp.name} must be a tensor, got ${typeof a}`);
    if (inp.dtypes && !dtypeAllowed(inp.dtypes, a.dtype)) opError(spec.name, `${inp.name} has dtype ${a.dtype}; expected ${describeDTypes(inp.dtypes)}`);
  });
  return args;
}

function backendOf(spec: OpSpec, args: readonly OpArg[]): Backend {
  let backend: Backend | undefined;
  for (const a of args) {
    if (!isTensorArg(a)) continue;
    const t = a as Tensor;
    if (t.isDisposed) opError(spec.name, `input ${formatShape(t.shape)} is disposed`);
    if (!backend) backend = t.backend;
    else if (t.backend !== backend) opError(spec.name, `inputs live on different backends ('${backend.name}' and '${t.backend.name}'): move them to one with .to(backend)`);
  }
  if (!backend) opError(spec.name, 'needs at least one tensor input (to know the backend)');
  return backend;
}

function parseAttrs<A>(spec: OpSpec<A>, attrs: unknown): A {
  const r = spec.attrs.safeParse(attrs ?? {});
  if (!r.success) {
    const issues = r.error.issues.map((i) => `${i.path.join('.') || '(attrs)'}: ${i.message}`).join('; ');
    opError(spec.name, `bad arguments: ${issues}`);
  }
  return r.data;
}

function checkOutputs(call: OpCall, got: Tensor | readonly Tensor[], via: string): Tensor[] {
  const outs = Array.isArray(got) ? [...(got as readonly Tensor[])] : [got as Tensor];
  if (outs.length !== call.outputs.length) throw new Error(`${call.op.name} (${via} on '${call.backend.name}'): returned ${outs.length} outputs, expected ${call.outputs.length}`);
  outs.forEach((t, i) => {
    const m = call.outputs[i]!;
    if (!shapesEqual(t.shape, m.shape) || t.dtype !== m.dtype) {
      throw new Error(`${call.op.name} (${via} on '${call.backend.name}'): output ${i} is ${t.dtype}${formatShape(t.shape)}, expected ${m.dtype}${formatShape(m.shape)}`);
    }
  });
  return outs;
}

/** Validate a call and infer its outputs without running it (what a backend or a test may ask). */
export function inferOp(name: string, inputs: readonly MetaArg[], attrs?: unknown): { spec: OpSpec; attrs: unknown; outputs: readonly TensorMeta[]; inputs: readonly MetaArg[] } {
  const spec = getOp(name);
  const args = checkArgs(spec, inputs);
  const parsed = parseAttrs(spec, attrs);
  return { spec, attrs: parsed, outputs: spec.infer(args, parsed), inputs: args };
}

/** How a backend would run a call: 'kernel' | 'ops' | 'decomposition', or why it cannot. */
export function opRoute(name: string, inputs: readonly OpArg[], attrs?: unknown): { via: 'kernel' | 'ops' | 'decomposition' } | { unsupported: string } {
  const { spec, attrs: parsed, outputs, inputs: args } = inferOp(name, inputs, attrs);
  const backend = backendOf(spec, args as readonly OpArg[]);
  const call: OpCall = { op: spec, backend, inputs: args as readonly OpArg[], attrs: parsed as Record<string, unknown>, outputs };
  const entry = backend.opKernels?.get(name);
  const reason = entry ? (entry.supports ? entry.supports(call) : true) : `backend '${backend.name}' registers no kernel for it`;
  if (reason === true) return { via: 'kernel' };
  if (spec.viaOps) return { via: 'ops' }; // it may still decline at run time, then the decomposition runs
  if (spec.decompose) return { via: 'decomposition' };
  return { unsupported: reason };
}

/**
 * Run an op: validate arguments and attrs, infer outputs (all shape checks), then the backend's kernel, else its
 * Ops route, else the decomposition, else UnsupportedOpError. Returns the outputs in the spec's order.
 */
export function callOp(name: string, inputs: readonly OpArg[], attrs?: unknown): Tensor[] {
  const spec = getOp(name);
  const args = checkArgs(spec, inputs);
  const parsed = parseAttrs(spec, attrs);
  return runParsed(spec, args, parsed);
}

/** callOp for single-output ops. */
export function callOp1(name: string, inputs: readonly OpArg[], attrs?: unknown): Tensor {
  return callOp(name, inputs, attrs)[0]!;
}

/** Parse attrs once and return a caller for repeated use (no zod parse per call). */
export function prepareOp(name: string, attrs?: unknown): (inputs: readonly OpArg[]) => Tensor[] {
  const spec = getOp(name);
  const parsed = parseAttrs(spec, attrs);
  return (inputs) => runParsed(spec, checkArgs(spec, inputs), parsed);
}

function runParsed(spec: OpSpec, inputs: readonly OpArg[], attrs: unknown): Tensor[] {
  const backend = backendOf(spec, inputs);
  const outputs = spec.infer(inputs, attrs);
  const call: OpCall = { op: spec, backend, inputs, attrs: attrs as Record<string, unknown>, outputs };
  const entry = backend.opKernels?.get(spec.name);
  let reason = `backend '${backend.name}' registers no kernel for it`;
  if (entry) {
    const ok = entry.supports ? entry.supports(call) : true;
    if (ok === true) return checkOutputs(call, entry.kernel(call), 'kernel');
    reason = ok;
  }
  if (spec.viaOps) {
    const r = spec.viaOps(backend.ops, call);
    if (r) return checkOutputs(call, r, 'ops');
  }
  if (spec.decompose) return checkOutputs(call, spec.decompose(call), 'decomposition');
  throw new UnsupportedOpError(spec.name, backend.name, reason);
}

// ---------------------------------------------------------------------------------------------
// Helpers for infer functions

/** The tensor meta of input i, or an OpError if it is absent or a number. */
export function tensorArg(op: string, inputs: readonly MetaArg[], i: number, name: string): TensorMeta {
  const a = inputs[i];
  if (!isTensorArg(a ?? null)) opError(op, `${name} must be a tensor`);
  return a as TensorMeta;
}

/** Normalise a possibly negative dim against a rank, with an OpError naming the op and argument. */
export function normDim(op: string, dim: number, rank: number, what = 'dim'): number {
  const r = Math.max(rank, 1); // PyTorch lets a 0-d tensor take dim 0 / -1
  const d = dim < 0 ? dim + r : dim;
  if (!Number.isInteger(d) || d < 0 || d >= r) opError(op, `${what}=${dim} is out of range for a tensor of rank ${rank} (expected [${-r}, ${r - 1}])`);
  return d;
}

/** Output metas of tensors, for infer results. */
export function meta(shape: Shape, dtype: DType): TensorMeta {
  return { shape: Object.freeze([...shape]), dtype };
}

/**
 * Tracks the intermediates of a decomposition so they are all disposed at the end, except the results:
 * `const s = new OpScope(); const y = s.op('mul', [x, w]); ...; return s.keep([out])`.
 */
export class OpScope {
  private readonly owned: Tensor[] = [];

  /** Run an op and own its (single) output. */
  op(name: string, inputs: readonly OpArg[], attrs?: unknown): Tensor {
    return this.own(callOp1(name, inputs, attrs));
  }

  own(t: Tensor): Tensor {
    this.owned.push(t);
    return t;
  }

  /** Dispose everything owned except `results`, and return them. */
  keep<R extends readonly Tensor[]>(results: R): R {
    for (const t of this.owned) if (!results.includes(t)) t.dispose();
    this.owned.length = 0;
    return results;
  }

  /** Dispose everything owned (on an error path). */
  dispose(): void {
    for (const t of this.owned) t.dispose();
    this.owned.length = 0;
  }
}
