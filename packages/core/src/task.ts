import { z } from 'zod';
import type { ExecutionContext } from './context.js';
import { DTYPES, type DType } from './dtype.js';
import type { Module, ModuleClass } from './module.js';
import type { Rng } from './rng.js';
import type { Tensor } from './tensor.js';

/** A float64 host array with a shape: what references take and return. */
export interface HostArray {
  readonly shape: readonly number[];
  readonly data: Float64Array;
}

export const DTypeSchema = z.enum(DTYPES);

/** One constructor parameter of the mirrored production class, in order. */
export const InitParamSchema = z.object({
  name: z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/),
  type: z.enum(['int', 'float', 'bool', 'string', 'dtype', 'enum', 'object']),
  choices: z.array(z.union([z.string(), z.number()])).optional(),
  optional: z.boolean().default(false),
  default: z.unknown().optional(),
  doc: z.string().optional(),
});
export type InitParam = z.infer<typeof InitParamSchema>;

/** A tensor argument or result: symbolic shape over the case's dims, e.g. ['T', 'H']. */
export const TensorSpecSchema = z.object({
  name: z.string(),
  /** A fixed dtype, or 'act' for the case's activation dtype. */
  dtype: z.union([DTypeSchema, z.literal('act')]),
  shape: z.array(z.union([z.string(), z.number().int().nonnegative()])),
  optional: z.boolean().default(false),
  doc: z.string().optional(),
});
export type TensorSpec = z.infer<typeof TensorSpecSchema>;

/**
 * An argument after the tensors that the production module takes from the host, not the device: vLLM's sampler gets
 * SamplingMetadata (all_greedy, all_random) with its tensors, so it can pick a launch path without a device sync. The
 * task's hostArgs computes the values from a case's inputs; baseline and candidate get the same ones.
 */
export const HostInputSchema = z.object({
  name: z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/),
  doc: z.string(),
});
export type HostInput = z.infer<typeof HostInputSchema>;

export const ToleranceSchema = z.object({ atol: z.number().nonnegative(), rtol: z.number().nonnegative() });
export type Tolerance = z.infer<typeof ToleranceSchema>;

/** A concrete case: dims for the symbolic shapes, the activation dtype and the init args. */
export const TaskCaseSchema = z.object({
  name: z.string(),
  dtype: DTypeSchema,
  dims: z.record(z.string(), z.number().int().nonnegative()),
  init: z.array(z.unknown()),
  /** Optional per-case settings the task's input builder reads (e.g. sampling mode). */
  options: z.record(z.string(), z.unknown()).default({}),
  /** How often production called this shape (captures); defaults have 1. */
  count: z.number().int().positive().default(1),
});
export type TaskCase = z.infer<typeof TaskCaseSchema>;
export type TaskCaseInput = z.input<typeof TaskCaseSchema>;

/** The declarative part of a task, validated on registration. */
export const TaskMetaSchema = z.object({
  id: z.string().regex(/^L[1-4]\/[a-z0-9_]+$/, 'task ids look like L1/rms_norm'),
  level: z.number().int().min(1).max(4),
  className: z.string().regex(/^[A-Z][A-Za-z0-9]*$/),
  family: z.array(z.string()).min(1),
  architectures: z.array(z.string()).min(1),
  /** The production module mirrored, as a dotted path (vllm.model_executor.layers.layernorm.RMSNorm). */
  mirrors: z.string().min(3),
  description: z.string(),
  init: z.array(InitParamSchema),
  inputs: z.array(TensorSpecSchema),
  /** Host arguments forward takes after the tensor inputs (always optional: a module must run without them). */
  hostInputs: z.array(HostInputSchema).default([]),
  outputs: z.array(TensorSpecSchema).min(1),
  tolerance: z.partialRecord(DTypeSchema, ToleranceSchema).default({}),
  imports: z.array(z.string()).default([]),
  /**
   * Ranks of the tensor-parallel process group the task is meaningful in (1: one process). A collective (an
   * all-reduce, a parallel linear layer) at world 1 is a copy or a plain GEMM, so such tasks say 2 and `bench`
   * skips them, with the reason, when it cannot give them a process group of that size.
   */
  worldSize: z.number().int().min(1).default(1),
  /**
   * For worldSize > 1: the task's cases run on every rank of such a group — makeInputs and initParameters draw the
   * rank's inputs and parameters as its part of one seeded whole (the same stream on every rank, so every rank knows
   * the whole: L1/allreduce's per-rank inputs, a parallel linear layer's full weights and input, of which the rank
   * loads its shard), and the float64 reference is the rank's part of the group's result (the sum; the unsharded
   * layer's output, or the rank's slice of its columns) — so `bench` can run it in lockstep in a process group of its
   * bench workers (`bench --tp N`, or under `fastkernels launch`). Without it a group task is skipped there too (its
   * cases describe one unsharded layer).
   */
  rankAwareCases: z.boolean().default(false),
  cases: z.object({ ci: z.array(TaskCaseSchema).min(1), production: z.array(TaskCaseSchema).min(1) }),
});
export type TaskMeta = z.infer<typeof TaskMetaSchema>;
export type TaskMetaInput = z.input<typeof TaskMetaSchema>;

/** Work done by one forward call, for the physical floor (bytes / bandwidth, flops / matrix rate). */
export interface WorkCount {
  readonly bytes: number;
  readonly flops: number;
}

/** What a task adds to its metadata: the baseline class and the functions the harness calls. */
export interface TaskBehaviour {
  readonly baseline: ModuleClass;
  /** Fresh forward arguments for a case (tensors on ctx's backend; null for absent optionals). */
  makeInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): (Tensor | null)[];
  /** Give a freshly built module's parameters values (defaults to N(0, 1) for float parameters). */
  initParameters?(module: Module, c: TaskCase, rng: Rng): void;
  /** The tensors to compare after forward: defaults to the returned tensor(s); in-place ops name their args. */
  collectOutputs?(args: readonly (Tensor | null)[], result: unknown): Tensor[];
  /** Golden float64 reference on host arrays: inputs in forward order, parameters by name. */
  reference(inputs: readonly (HostArray | null)[], params: ReadonlyMap<string, HostArray>, c: TaskCase): HostArray[];
  /** Bytes moved and FLOPs done by one call. */
  work(c: TaskCase): WorkCount;
  /**
   * The values of the task's hostInputs for these inputs (in that order), passed to forward after them. Read once per
   * input set, outside timing (a device read is fine). They must not change under the harness's rolling of float inputs
   * (a rotation of each float tensor's elements), and a module may use them only to choose how to compute: the
   * outputs may not depend on them. Required exactly when the metadata declares hostInputs.
   */
  hostArgs?(inputs: readonly (Tensor | null)[], c: TaskCase): readonly unknown[];
}

export type TaskDefinition = TaskMeta & TaskBehaviour & { readonly stem: string };

/** Validate the metadata and join it to the behaviour. Throws with the field that is wrong. */
export function defineTask(meta: TaskMetaInput, behaviour: TaskBehaviour): TaskDefinition {
  const parsed = TaskMetaSchema.safeParse(meta);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`task ${(meta as { id?: string }).id ?? '?'}: ${issue.path.join('.')}: ${issue.message}`);
  }
  const m = parsed.data;
  if (m.id !== `L${m.level}/${m.id.split('/')[1]}`) throw new Error(`task ${m.id}: level ${m.level} does not match its id`);
  if ((m.hostInputs.length > 0) !== (behaviour.hostArgs !== undefined)) {
    throw new Error(`task ${m.id}: hostInputs and hostArgs go together (${m.hostInputs.length} host inputs declared, hostArgs ${behaviour.hostArgs ? 'given' : 'missing'}): give the behaviour a hostArgs for each declared host input, or declare none`);
  }
  return { ...m, ...behaviour, stem: m.id.split('/')[1]! };
}

/** The host arguments forward gets after `inputs` (none for most tasks); checked against the declared hostInputs. */
export function hostArgsFor(task: Pick<TaskDefinition, 'id' | 'hostInputs' | 'hostArgs'>, inputs: readonly (Tensor | null)[], c: TaskCase): unknown[] {
  if (!task.hostArgs) return [];
  const values = [...task.hostArgs(inputs, c)];
  if (values.length !== task.hostInputs.length) {
    throw new Error(`task ${task.id}: hostArgs gave ${values.length} values for ${task.hostInputs.length} host inputs (${task.hostInputs.map((h) => h.name).join(', ')}): return one value per host input, in their order`);
  }
  return values;
}

/** Resolve a spec's dtype for a case. */
export function specDType(spec: TensorSpec, c: TaskCase): DType {
  return spec.dtype === 'act' ? c.dtype : spec.dtype;
}

/** Resolve a symbolic shape with a case's dims. */
export function resolveSpecShape(spec: TensorSpec, c: TaskCase): number[] {
  return spec.shape.map((d) => {
    if (typeof d === 'number') return d;
    const v = c.dims[d];
    if (v === undefined) throw new Error(`case '${c.name}' has no dim '${d}' (needed by ${spec.name})`);
    return v;
  });
}

/** Default comparison tolerances per dtype (the original's). */
export const DEFAULT_TOLERANCE: Readonly<Record<DType, Tolerance>> = {
  f64: { atol: 1e-5, rtol: 1e-3 },
  f32: { atol: 1e-5, rtol: 1e-3 },
  f16: { atol: 1e-2, rtol: 1e-2 },
  bf16: { atol: 1e-2, rtol: 1e-2 },
  fp8e4m3: { atol: 0.125, rtol: 0.125 },
  fp8e5m2: { atol: 0.125, rtol: 0.125 },
  i64: { atol: 0, rtol: 0 },
  i32: { atol: 0, rtol: 0 },
  i16: { atol: 0, rtol: 0 },
  i8: { atol: 0, rtol: 0 },
  u8: { atol: 0, rtol: 0 },
  bool: { atol: 0, rtol: 0 },
};

export function toleranceFor(task: Pick<TaskMeta, 'tolerance'>, dtype: DType): Tolerance {
  return task.tolerance[dtype] ?? DEFAULT_TOLERANCE[dtype];
}
