/**
 * The Module class a CUDA C++ candidate becomes: the task's class name and constructor, the baseline's parameters
 * (so the harness loads the same weights), and a forward that runs the planned steps — kernels launched through
 * cudaKernel (NVRTC, the disk cubin cache), baseline ops through F — on contiguous inputs and freshly allocated
 * outputs. Outside the dtypes / condition the manifest names, it runs the baseline module (fallback "baseline") or
 * fails the call.
 *
 * Graph capture: capturable (not marked, see core's graph-capture.ts). Every step is a kernel launched on the current
 * stream or a baseline op, outputs and scratch come from the allocator (the graph pool during a capture), and nothing
 * reads back to the host; the NVRTC compile happens at load (e2e and bench pass the backend) or at the first launch,
 * which the engine's eager warm-up makes before it captures.
 */
import { F, Module, Tensor, DTYPES, type DType, type ModuleClass, type TaskDefinition, type TensorSpec } from '@fastkernels/core';
import { cudaKernel, type ArgValue, type CudaKernel, type Dim3, type ScalarArgType } from '@fastkernels/backend-cuda';
import { evalExpr, truthy, type Env, type Expr, type TensorInfo, type Value } from './expr.js';
import type { CudaPlan, PlannedKernel, PlannedOp, PlannedTensor } from './binding.js';

export interface CudaProgram {
  /** The name NVRTC compiles the source under (what its log lines start with). */
  readonly programName: string;
  /** The .cu as messages name it. */
  readonly display: string;
  readonly source: string;
  readonly options: readonly string[];
  /** The candidate's own headers: include name -> source. */
  readonly headers: Readonly<Record<string, string>>;
}

/** Bind the symbolic dims of the task's inputs from the tensors' shapes (leading extra dims fold into the first). */
export function bindDims(specs: readonly TensorSpec[], inputs: readonly (TensorInfo | null | undefined)[]): Map<string, number> {
  const dims = new Map<string, number>();
  specs.forEach((spec, i) => {
    const t = inputs[i];
    if (!t) return;
    let shape = [...t.shape];
    if (shape.length > spec.shape.length && spec.shape.length > 0) {
      const extra = shape.length - spec.shape.length + 1;
      shape = [shape.slice(0, extra).reduce((p, d) => p * d, 1), ...shape.slice(extra)];
    }
    if (shape.length !== spec.shape.length) throw new Error(`input ${spec.name} has shape [${t.shape.join(', ')}], the task declares [${spec.shape.join(', ')}]`);
    spec.shape.forEach((d, j) => {
      if (typeof d !== 'string') return;
      const seen = dims.get(d);
      if (seen !== undefined && seen !== shape[j]) throw new Error(`dim ${d} is ${seen} by an earlier input and ${shape[j]} by ${spec.name} [${t.shape.join(', ')}]`);
      dims.set(d, shape[j]!);
    });
  });
  return dims;
}

const INT_TYPES = new Set<ScalarArgType>(['i32', 'u32', 'i64', 'u64', 'i16', 'u16', 'i8', 'u8']);

function intOf(v: Value, what: string, min: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw new Error(`${what} is ${JSON.stringify(v)}, not an integer >= ${min}`);
  return v;
}

const info = (t: Tensor): TensorInfo => ({ shape: t.shape, dtype: t.dtype, itemsize: t.itemsize });

/** Build the candidate class for a planned manifest. */
export function cudaCandidateClass(plan: CudaPlan, program: CudaProgram): ModuleClass {
  const { task } = plan;
  const kernels = new Map<string, CudaKernel>();
  const kernel = (entry: string): CudaKernel => {
    let k = kernels.get(entry);
    if (!k) {
      k = cudaKernel({ source: program.source, entry, name: program.programName, options: program.options, headers: program.headers });
      kernels.set(entry, k);
    }
    return k;
  };
  const where = (field: string) => `${program.display} (${field})`;

  class CudaCandidate extends Module {
    private readonly baseline: Module;
    private readonly initValues: Map<string, Value>;

    constructor(...args: unknown[]) {
      super();
      // The baseline's own parameters are the candidate's: loadStateDict fills both, and the fallback path uses them.
      this.baseline = new task.baseline(...args);
      for (const [name, t] of this.baseline.namedParameters()) this.registerParameter(name, t);
      this.initValues = new Map();
      task.init.forEach((p, i) => {
        const v = args[i] ?? p.default;
        if (typeof v === 'number' || typeof v === 'string') this.initValues.set(p.name, v);
        else if (typeof v === 'boolean') this.initValues.set(p.name, v ? 1 : 0);
      });
    }

    forward(...args: (Tensor | null | undefined)[]): Tensor | Tensor[] {
      const backend = this.ctx.backend;
      if (backend.name !== 'cuda') throw new Error(`${program.display} is a CUDA C++ candidate; the ${backend.name} backend cannot run it (bench it with --backend cuda on a GPU host)`);
      const inputs = task.inputs.map((_, i) => args[i] ?? null);
      const act = task.inputs.findIndex((s, i) => s.dtype === 'act' && inputs[i]);
      const dtype: DType = act >= 0 ? inputs[act]!.dtype : this.ctx.dtype;
      const values = new Map<string, Value>([...bindDims(task.inputs, inputs), ...this.initValues, ['dtype', dtype]]);
      const tensors = new Map<string, Tensor | null>();
      const env: Env = { values, tensors: new Map() };
      const envTensors = env.tensors as Map<string, TensorInfo | null>;
      task.inputs.forEach((s, i) => envTensors.set(s.name, inputs[i] ? info(inputs[i]!) : null));
      for (const [name, e] of plan.lets) values.set(name, evalExpr(e, env));

      if (!plan.dtypes.includes(dtype) || (plan.when && !truthy(evalExpr(plan.when, env)))) {
        if (plan.fallback === 'baseline') return (this.baseline.forward as (...a: unknown[]) => Tensor | Tensor[])(...args);
        const why = !plan.dtypes.includes(dtype) ? `handles dtypes ${plan.dtypes.join(', ')}, this call is ${dtype}` : `runs its kernels only when ${'`when`'} holds, and it does not for ${[...values].filter(([k]) => plan.dims.includes(k)).map(([k, v]) => `${k}=${v}`).join(' ')}`;
        throw new Error(`${program.display}: the candidate ${why} (set "fallback": "baseline" in the manifest to run the baseline there)`);
      }

      const owned: Tensor[] = [];
      try {
        task.inputs.forEach((s, i) => {
          const t = inputs[i];
          if (!t) return tensors.set(s.name, null);
          const c = t.contiguous();
          owned.push(c);
          tensors.set(s.name, c);
        });
        for (const [name, t] of this.namedParameters()) {
          const c = t.contiguous();
          owned.push(c);
          tensors.set(name, c);
          envTensors.set(name, info(c));
        }
        const alloc = (p: PlannedTensor, field: string): void => {
          if (p.when && !truthy(evalExpr(p.when, env))) return void tensors.set(p.ref, null);
          const shape = p.shape.map((e, i) => intOf(evalExpr(e, env), `${where(`${field}.shape[${i}]`)}`, 0));
          const dt = (p.dtype === 'act' ? dtype : (DTYPES as readonly string[]).includes(p.dtype) ? p.dtype : tensors.get(p.dtype)?.dtype ?? dtype) as DType;
          const t = p.zero ? Tensor.zeros(backend, shape, dt, { device: this.ctx.device }) : Tensor.empty(backend, shape, dt, { device: this.ctx.device });
          tensors.set(p.ref, t);
          envTensors.set(p.ref, info(t));
        };
        plan.outputs.forEach((p) => alloc(p, `outputs.${p.ref.slice(4)}`));
        plan.scratch.forEach((p) => {
          alloc(p, `scratch.${p.ref}`);
          const t = tensors.get(p.ref);
          if (t) owned.push(t);
        });

        for (const step of plan.steps) {
          if (step.when && !truthy(evalExpr(step.when, env))) continue;
          if (step.kind === 'kernel') this.launch(step, dtype, env, tensors);
          else {
            const out = this.op(step, env, tensors);
            if (step.out.startsWith('out.')) tensors.get(step.out)?.dispose(); // the op's result is the output
            tensors.set(step.out, out);
            envTensors.set(step.out, info(out));
            if (!step.out.startsWith('out.')) owned.push(out);
          }
        }

        const names = plan.returns ?? plan.outputs.filter((p) => tensors.get(p.ref)).map((p) => p.ref);
        const result = names.map((n) => {
          const t = tensors.get(n);
          if (!t) throw new Error(`${where('returns')}: '${n}' is not set in this call`);
          // A returned input, parameter, scratch or op result must outlive the owned views released below.
          return owned.includes(t) || !n.startsWith('out.') ? t.contiguous() : t;
        });
        return result.length === 1 ? result[0]! : result;
      } catch (e) {
        for (const p of plan.outputs) tensors.get(p.ref)?.dispose();
        throw e;
      } finally {
        for (const t of owned) t.dispose();
      }
    }

    private launch(step: PlannedKernel, dtype: DType, env: Env, tensors: ReadonlyMap<string, Tensor | null>): void {
      const entry = step.entries.get(dtype)!;
      const dim3 = (xs: readonly Expr[], what: string): number[] => xs.map((e, i) => intOf(evalExpr(e, env), where(`${step.field}.${what}[${i}]`), 0));
      const grid = dim3(step.grid, 'grid');
      const block = dim3(step.block, 'block');
      if (grid.some((g) => g === 0)) return; // an empty problem: nothing to launch
      const threads = block.reduce((p, b) => p * b, 1);
      if (threads < 1 || threads > 1024) throw new Error(`${where(`${step.field}.block`)}: [${block.join(', ')}] is ${threads} threads; a block has 1 to 1024`);
      const shared = intOf(evalExpr(step.sharedBytes, env), where(`${step.field}.sharedBytes`), 0);
      const args: ArgValue[] = step.args.map((a, i) => {
        if ('nullPtr' in a) return 0;
        if ('tensor' in a) {
          const t = tensors.get(a.tensor);
          return t ?? 0; // an absent optional input or output is a null pointer
        }
        const v = evalExpr(a.expr, env);
        if (typeof v !== 'number') throw new Error(`${where(`${step.field}.args[${i}]`)}: ${JSON.stringify(v)} is not a number`);
        return INT_TYPES.has(a.type as ScalarArgType) ? intOf(v, where(`${step.field}.args[${i}]`), -(2 ** 53)) : v;
      });
      kernel(entry).launch(grid as unknown as Dim3, block as unknown as Dim3, shared, args);
    }

    private op(step: PlannedOp, env: Env, tensors: ReadonlyMap<string, Tensor | null>): Tensor {
      const args = step.args.map((a) => {
        if ('tensor' in a) return tensors.get(a.tensor) ?? null;
        if ('expr' in a) return evalExpr(a.expr, env);
        return Object.fromEntries(Object.entries(a.options).map(([k, v]) => [k, 'literal' in v ? v.literal : evalExpr(v.expr, env)]));
      });
      const out = (F as unknown as Record<string, (...a: unknown[]) => unknown>)[step.fn]!(...args);
      const t = Array.isArray(out) ? out[0] : out;
      if (!(t instanceof Tensor)) throw new Error(`${where(step.field)}: F.${step.fn} returned no tensor`);
      return t;
    }
  }
  Object.defineProperty(CudaCandidate, 'name', { value: task.className });
  return CudaCandidate;
}
