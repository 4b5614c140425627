/**
 * Task scaffolding: an L1 task whose module is one op of the registry (nn.LayerNorm -> layer_norm, nn.GELU -> gelu)
 * gets the mechanical part of its TaskDefinition from the op's spec. The author writes the module (or reuses a layer),
 * the float64 reference and the cases; the input and output specs (names, order, optionality: the op's), the default
 * input builder, the work count and the families (from the architectures) are derived, and every case is checked
 * against the op's shape inference when the task is defined. The generic contract test (contract.test.ts) checks the
 * rest for every registered task.
 */
import {
  DTYPE_INFO,
  defineTask,
  getOp,
  inferOp,
  numel,
  resolveSpecShape,
  specDType,
  formatShape,
  type DType,
  type InitParam,
  type MetaArg,
  type Module,
  type ModuleClass,
  type Rng,
  type TaskBehaviour,
  type TaskCase,
  type TaskCaseInput,
  type TaskDefinition,
  type TensorSpec,
  type Tolerance,
  type WorkCount,
} from '@fastkernels/core';
import { randn } from '../common/inputs.js';
import { familiesOf } from './families.js';

/** A tensor the op takes or gives: a symbolic shape over the case's dims and a dtype ('act': the case's). */
export interface OpTensorArg {
  readonly shape: readonly (string | number)[];
  readonly dtype?: DType | 'act';
  readonly doc?: string;
}

/** Which op inputs the module's forward takes, which are its parameters, and the op's attrs for a case. */
export interface OpTaskBinding {
  readonly op: string;
  /** Op input name -> forward argument, named as the op names it (PyTorch's `input`). */
  readonly forward: Readonly<Record<string, OpTensorArg>>;
  /** Op input name -> module parameter (`param`: its name in the module, when it differs). */
  readonly params: Readonly<Record<string, OpTensorArg & { readonly param?: string }>>;
  /** The op's attrs a case's init arguments give (normalized_shape, eps, approximate, ...). */
  readonly attrs: (c: TaskCase) => Record<string, unknown>;
}

export type OpTaskDefinition = TaskDefinition & { readonly opBinding: OpTaskBinding };

export function isOpTask(t: TaskDefinition): t is OpTaskDefinition {
  return (t as Partial<OpTaskDefinition>).opBinding !== undefined;
}

export interface L1OpTaskInit extends Omit<OpTaskBinding, 'op'> {
  /** `L1/<stem>`: the original's id. */
  readonly id: string;
  readonly className: string;
  /** The production module mirrored, dotted (torch.nn.LayerNorm). */
  readonly mirrors: string;
  readonly description: string;
  /** The original's architectures that use it; the families follow (tasks/families.ts). */
  readonly architectures: readonly string[];
  readonly baseline: ModuleClass;
  readonly init: readonly (Omit<InitParam, 'optional'> & { optional?: boolean })[];
  /** Output shapes (default: the first forward input's shape, 'act'), named as the op's outputs. */
  readonly outputs?: readonly OpTensorArg[];
  readonly cases: { readonly ci: readonly TaskCaseInput[]; readonly production: readonly TaskCaseInput[] };
  readonly tolerance?: Partial<Record<DType, Tolerance>>;
  /** Float64 reference: forward inputs in op order, parameters by the module's names. */
  readonly reference: TaskBehaviour['reference'];
  /** Default: N(0, inputScale^2) for every required forward input and each optional one the case's options name. */
  readonly makeInputs?: TaskBehaviour['makeInputs'];
  readonly inputScale?: number;
  readonly initParameters?: (module: Module, c: TaskCase, rng: Rng) => void;
  /** Default: every tensor read or written once; flopsPerElement per output element. */
  readonly work?: (c: TaskCase) => WorkCount;
  readonly flopsPerElement?: number;
}

const fail = (id: string, msg: string): never => {
  throw new Error(`task ${id}: ${msg}`);
};

/** Define an L1 task over one op of the registry (see the file's comment). */
export function defineL1OpTask(op: string, init: L1OpTaskInit): OpTaskDefinition {
  const spec = getOp(op);
  const { id } = init;
  const bound = new Set([...Object.keys(init.forward), ...Object.keys(init.params)]);
  for (const name of bound) if (!spec.inputs.some((i) => i.name === name)) fail(id, `op ${op} has no input '${name}' (its inputs: ${spec.inputs.map((i) => i.name).join(', ')})`);
  for (const i of spec.inputs) if (!i.optional && !bound.has(i.name)) fail(id, `op ${op}'s input '${i.name}' is neither a forward argument nor a parameter`);
  const firstForward = spec.inputs.find((i) => init.forward[i.name]);
  if (!firstForward) fail(id, `forward takes none of op ${op}'s inputs`);
  const tensorSpec = (name: string, a: OpTensorArg, optional: boolean): TensorSpec => ({ name, dtype: a.dtype ?? 'act', shape: [...a.shape], optional, ...(a.doc ? { doc: a.doc } : {}) });
  const inputs = spec.inputs.filter((i) => init.forward[i.name]).map((i) => tensorSpec(i.name, init.forward[i.name]!, i.optional ?? false));
  const first = init.forward[firstForward!.name]!;
  const outArgs = init.outputs ?? [{ shape: first.shape, ...(first.dtype ? { dtype: first.dtype } : {}) }];
  if (outArgs.length !== spec.outputs.length) fail(id, `op ${op} gives ${spec.outputs.length} outputs (${spec.outputs.join(', ')}), ${outArgs.length} declared`);
  const outputs = spec.outputs.map((name, k) => tensorSpec(name, outArgs[k]!, false));
  const binding: OpTaskBinding = { op, forward: init.forward, params: init.params, attrs: init.attrs };

  const task = defineTask(
    {
      id,
      level: 1,
      className: init.className,
      family: familiesOf(init.architectures),
      architectures: [...init.architectures],
      mirrors: init.mirrors,
      description: init.description,
      init: init.init.map((p) => ({ ...p })),
      inputs,
      outputs,
      tolerance: init.tolerance ?? {},
      cases: { ci: [...init.cases.ci], production: [...init.cases.production] },
    },
    {
      baseline: init.baseline,
      makeInputs:
        init.makeInputs ??
        ((c, ctx, rng) => inputs.map((s) => (!s.optional || c.options[s.name] ? randn(ctx, rng, resolveSpecShape(s, c), specDType(s, c), init.inputScale ?? 1) : null))),
      ...(init.initParameters ? { initParameters: init.initParameters } : {}),
      reference: init.reference,
      work: init.work ?? ((c) => defaultWork(binding, inputs, outputs, c, init.flopsPerElement ?? 1)),
    },
  );
  const defined: OpTaskDefinition = { ...task, opBinding: binding };
  for (const c of [...defined.cases.ci, ...defined.cases.production]) checkCaseAgainstOp(defined, c);
  return defined;
}

/**
 * The op's metas for a case: forward inputs and parameters from their symbolic shapes, null for unbound optionals and
 * for optional forward inputs the case's options do not name.
 */
export function opMetas(task: OpTaskDefinition, c: TaskCase): MetaArg[] {
  const { op, forward, params } = task.opBinding;
  return getOp(op).inputs.map((i) => {
    const a = forward[i.name] ?? params[i.name];
    if (!a) return null;
    // an optional forward input is there when the case's options name it (as the default makeInputs feeds it)
    if (i.optional && forward[i.name] && !c.options[i.name]) return null;
    return { shape: resolveSpecShape({ name: i.name, dtype: 'act', shape: [...a.shape], optional: false }, c), dtype: a.dtype && a.dtype !== 'act' ? a.dtype : c.dtype };
  });
}

/** The op's shape inference on a case must give the declared outputs (shape and dtype), else an Error naming both. */
export function checkCaseAgainstOp(task: OpTaskDefinition, c: TaskCase): void {
  const { op, attrs } = task.opBinding;
  let outs: readonly { shape: readonly number[]; dtype: DType }[];
  try {
    outs = inferOp(op, opMetas(task, c), attrs(c)).outputs;
  } catch (e) {
    return fail(task.id, `case '${c.name}': op ${op} rejects the declared shapes: ${(e as Error).message}`);
  }
  task.outputs.forEach((s, k) => {
    const want = { shape: resolveSpecShape(s, c), dtype: specDType(s, c) };
    const got = outs[k]!;
    if (formatShape(got.shape) !== formatShape(want.shape) || got.dtype !== want.dtype) {
      fail(task.id, `case '${c.name}': op ${op} infers output '${s.name}' ${got.dtype}${formatShape(got.shape)}, the task declares ${want.dtype}${formatShape(want.shape)}`);
    }
  });
}

function defaultWork(b: OpTaskBinding, inputs: readonly TensorSpec[], outputs: readonly TensorSpec[], c: TaskCase, flopsPerElement: number): WorkCount {
  const bytesOf = (s: TensorSpec) => numel(resolveSpecShape(s, c)) * DTYPE_INFO[specDType(s, c)].itemsize;
  const params = Object.entries(b.params).map(([name, a]) => ({ name, dtype: a.dtype ?? 'act', shape: [...a.shape], optional: true }) as TensorSpec);
  const read = inputs.filter((s) => !s.optional || c.options[s.name]).reduce((a, s) => a + bytesOf(s), 0) + params.reduce((a, s) => a + bytesOf(s), 0);
  const written = outputs.reduce((a, s) => a + bytesOf(s), 0);
  return { bytes: read + written, flops: flopsPerElement * numel(resolveSpecShape(outputs[0]!, c)) };
}

