/**
 * The binding of a CUDA C++ candidate: `L<k>/<stem>.cu.json` beside `L<k>/<stem>.cu` says which task the kernels
 * implement, which `extern "C" __global__` functions to launch with what grid, block and arguments, the outputs and
 * scratch buffers to allocate, and what happens outside the dtypes or conditions the kernels handle. Every string
 * of geometry, shapes and scalar arguments is an expression (expr.ts). Validated with zod: a bad field fails the
 * load naming the file, the field and the fix.
 */
import { readFileSync } from 'node:fs';
import { DTYPES, UserError, errorMessage } from '@fastkernels/core';
import { z } from 'zod';

const ExprSchema = z.union([z.string().min(1), z.number()]);
const Dim3Schema = z.array(ExprSchema).min(1).max(3);
const NAME = /^[A-Za-z_]\w*$/;

const KernelStepSchema = z
  .object({
    /** The `extern "C" __global__` function; `{dtype}` is replaced by the activation dtype (bf16, f16, f32, ...). */
    kernel: z.string().regex(/^[A-Za-z_][\w{}]*$/, 'a C identifier, optionally with {dtype} in it'),
    grid: Dim3Schema,
    block: Dim3Schema,
    sharedBytes: ExprSchema.default(0),
    /** One per kernel parameter: a tensor name for a pointer (inputs, parameters, out.<output>, scratch), else an expression. */
    args: z.array(ExprSchema),
    when: z.string().min(1).optional(),
  })
  .strict();

const OpStepSchema = z
  .object({
    /** A function of the op vocabulary, `F.<name>` (docs/ops.md): the parts a candidate does not replace. */
    op: z.string().regex(/^F\.[A-Za-z_]\w*$/, 'F.<op name>, e.g. F.linear'),
    /** Tensor names or expressions, in the F function's order; an object is an options argument of expressions. */
    args: z.array(z.union([ExprSchema, z.record(z.string(), z.union([ExprSchema, z.boolean(), z.null()]))])),
    /** The name the result is bound to (out.<output> to make it an output). */
    out: z.string().regex(/^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$/),
    when: z.string().min(1).optional(),
  })
  .strict();

const TensorDeclSchema = z
  .object({
    shape: z.array(ExprSchema),
    /** A dtype name, 'act' (the case's activation dtype), or an input whose dtype to copy. Default 'act'. */
    dtype: z.string().default('act'),
    /** Allocate only when this holds (an optional output). */
    when: z.string().min(1).optional(),
    /** Zero-fill (scratch used as an accumulator); outputs and scratch are otherwise uninitialised. */
    zero: z.boolean().default(false),
  })
  .strict();

export const CudaManifestSchema = z
  .object({
    $comment: z.string().optional(),
    /** The task id, L<k>/<stem>; must match where the file is. */
    task: z.string().regex(/^L[1-9]\/[a-z0-9_]+$/, 'a task id like L1/rms_norm'),
    /** The .cu file (beside the manifest); default <stem>.cu. */
    source: z.string().regex(/^[\w.-]+\.cu$/, 'a .cu file name in the same folder').optional(),
    /** Extra NVRTC options (-D..., --use_fast_math, -maxrregcount=N); the arch and -std come from the runtime. */
    nvrtcOptions: z.array(z.string().regex(/^-/, 'an option starting with -')).default([]),
    /** Activation dtypes the kernels handle; default every dtype of the task's cases. */
    dtypes: z.array(z.enum(DTYPES)).min(1).optional(),
    /** Run the kernels only when this holds (e.g. `H % 8 == 0`). */
    when: z.string().min(1).optional(),
    /** Outside `dtypes` / `when`: run the baseline module ('baseline'), or fail the call ('error', the default). */
    fallback: z.enum(['baseline', 'error']).default('error'),
    /** Names computed in order from the dims, constructor parameters and earlier names. */
    let: z.record(z.string().regex(NAME, 'a name'), ExprSchema).default({}),
    /** Output allocation; an output not listed gets the task's declared shape and dtype. */
    outputs: z.record(z.string(), TensorDeclSchema).default({}),
    scratch: z.record(z.string().regex(NAME, 'a name'), TensorDeclSchema).default({}),
    steps: z.array(z.union([KernelStepSchema, OpStepSchema])).min(1),
    /** What forward returns, in order (tensor names); default the task's outputs that were allocated. */
    returns: z.array(z.string()).min(1).optional(),
  })
  .strict();

export type CudaManifest = z.infer<typeof CudaManifestSchema>;
export type KernelStep = z.infer<typeof KernelStepSchema>;
export type OpStep = z.infer<typeof OpStepSchema>;
export type TensorDecl = z.infer<typeof TensorDeclSchema>;

export const isKernelStep = (s: KernelStep | OpStep): s is KernelStep => 'kernel' in s;

/** The manifest path of a .cu candidate. */
export const manifestPathOf = (cuPath: string): string => `${cuPath}.json`;

const DOC = 'see "Writing a candidate" in the README; `fastkernels stubs --lang cuda --task <task>` writes a working pair';

/** A zod issue's path as a field name: steps[0].grid[1]. */
export function fieldOf(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/** Parse and validate a manifest's text; `file` is what errors name. */
export function parseCudaManifest(text: string, file: string): CudaManifest {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UserError(`is not JSON: ${errorMessage(e)}`, { file, fix: `write the binding as a JSON object (${DOC})` });
  }
  const parsed = CudaManifestSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = fieldOf(issue.path) || '(top level)';
  const unknownKeys = issue.code === 'unrecognized_keys' ? (issue as { keys?: string[] }).keys : undefined;
  const steps = issue.path[0] === 'steps' && typeof issue.path[1] === 'number' && issue.path.length === 2;
  const fix = unknownKeys
    ? `remove or rename ${unknownKeys.map((k) => `'${k}'`).join(', ')} (the keys: ${Object.keys(keysOf(issue.path)).join(', ')})`
    : steps
      ? 'a step is either a kernel launch {kernel, grid, block, args[, sharedBytes, when]} or a baseline op {op: "F.<name>", args, out[, when]}'
      : `give ${field} a valid value (${DOC})`;
  throw new UserError(`${field}: ${issue.message}`, { file, field, fix });
}

/** The keys allowed where an unrecognised key was found (for the fix line). */
function keysOf(path: readonly PropertyKey[]): Record<string, unknown> {
  if (path.length === 0) return CudaManifestSchema.shape;
  if (path[0] === 'steps') return { ...KernelStepSchema.shape, ...OpStepSchema.shape };
  return TensorDeclSchema.shape;
}

/** Read and validate the manifest beside a .cu file. */
export function readCudaManifest(path: string, file: string, cuFile: string): CudaManifest {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(code === 'ENOENT' ? `has no binding ${file}` : `cannot read its binding ${file} (${code ?? errorMessage(e)})`, {
      file: cuFile,
      fix: `write ${file}: the task, the kernels to launch with their grid, block and arguments (${DOC})`,
    });
  }
  return parseCudaManifest(text, file);
}
