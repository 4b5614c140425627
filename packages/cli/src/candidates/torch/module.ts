/**
 * The Module class a PyTorch candidate becomes on the Node side: the task's class name and constructor, the
 * baseline's parameters, which the worker's module uses in place of its own (bound by name, without a copy: the
 * harness's loadStateDict and the engine's weight loader write into them), and a forward that sends the inputs' buffer handles to the
 * worker, allocates the outputs the worker reports (fresh, from the harness's allocator, so every output check
 * applies) and has the worker copy its results into them.
 *
 * Timing: the harness times a PyTorch candidate with the worker's own clock (CUDA events on the worker's stream, the
 * whole device synchronised before its host clock stops; on the CPU a monotonic clock), through `selfTimedCall`:
 * the IPC round trip is not the candidate's time. Only instances built by this constructor have such a call (a
 * private WeakMap), so no other candidate can report its own times.
 */
import { Module, RewardHackError, Tensor, markNotGraphCapturable, type Backend, type DType, type ModuleClass, type TaskDefinition } from '@fastkernels/core';
import { exporterFor, type BufferExporter, type TensorDesc } from './buffers.js';
import { TorchWorkerError, type TorchWorkerProcess } from './channel.js';

export interface SelfTimed {
  readonly result: unknown;
  /** The worker's device time of the call (CUDA events; the CPU: its monotonic clock). */
  readonly deviceMs: number;
  /** The worker's host time of the call, device synchronised. */
  readonly hostMs: number;
}

export type SelfTimedCall = (args: readonly unknown[]) => SelfTimed;

const timedCalls = new WeakMap<object, SelfTimedCall>();

/** The worker-timed call of a PyTorch candidate instance (undefined for every other module). */
export function selfTimedCall(m: object): SelfTimedCall | undefined {
  return timedCalls.get(m);
}

interface ForwardReply {
  outputs: ({ shape: number[]; dtype: DType } | null)[];
  tuple: boolean;
  ms?: number;
  host_ms?: number;
  /** the timing path's fixed cost, measured just before the call (worker's _fixed_cost) */
  host_fixed_ms?: number;
}

/**
 * The worker's host clock less the timing path's own fixed cost (records, sync, the GPU's switch to the worker's
 * context), never below the device time it encloses: the fixed cost is measured on a separate, equally noisy run, so
 * the difference of the two went negative on an H100 for a 0.1 ms call and the harness rejected an honest candidate.
 * A raw clock that is missing, negative or not finite stays NaN (the harness's "no valid time").
 */
export function workerHostMs(reply: { ms?: number; host_ms?: number; host_fixed_ms?: number }): number {
  const raw = reply.host_ms;
  const device = reply.ms;
  if (raw === undefined || !Number.isFinite(raw) || raw < 0 || device === undefined || !Number.isFinite(device)) return NaN;
  const fixed = reply.host_fixed_ms !== undefined && Number.isFinite(reply.host_fixed_ms) && reply.host_fixed_ms > 0 ? reply.host_fixed_ms : 0;
  return Math.max(device, raw - fixed);
}

/** A worker error as the harness reports it: REWARD_HACK for a failed check, else the error with file and line. */
function rethrow(e: unknown): never {
  if (e instanceof TorchWorkerError && e.body.kind === 'hack') throw new RewardHackError(e.message);
  if (e instanceof TorchWorkerError) {
    const type = e.body.type && !e.body.message.startsWith(`${e.body.type}:`) ? `${e.body.type}: ` : '';
    const where = e.body.file ? `${e.body.file}${e.body.line ? `:${e.body.line}` : ''}: ` : '';
    throw new Error(`${where}${type}${e.body.message}`);
  }
  throw e;
}

export function torchCandidateClass(task: TaskDefinition, worker: TorchWorkerProcess): ModuleClass {
  let exporter: BufferExporter | undefined;
  const exporterOf = (backend: Backend): BufferExporter => {
    if (exporter) return exporter;
    const e = exporterFor(backend, (n) => worker.path(n));
    if (typeof e === 'string') throw new Error(e);
    return (exporter = e);
  };

  class TorchCandidate extends Module {
    private readonly baseline: Module;
    private readonly id: number;
    private readonly buffers: BufferExporter;
    private readonly bound: { missing: string[]; unexpected: string[] };

    constructor(...args: unknown[]) {
      super();
      this.baseline = new task.baseline(...args);
      for (const [name, t] of this.baseline.namedParameters()) this.registerParameter(name, t);
      this.buffers = exporterOf(this.ctx.backend);
      const init = task.init.map((p, i) => (args[i] === undefined ? (p.default ?? null) : args[i]));
      while (init.length && init[init.length - 1] === null && task.init[init.length - 1]?.optional) init.pop();
      const device = this.ctx.backend.name === 'cpu' ? 'cpu' : `cuda:${this.ctx.device}`;
      let bound: { missing: string[]; unexpected: string[] };
      try {
        this.id = worker.request<{ id: number }>('init', { args: init, params: task.init.slice(0, init.length).map((p) => p.type), dtype: this.ctx.dtype, device }).id;
        // The module's parameters become views of the harness's (the baseline's, by name): loadStateDict below and the
        // engine's weight loader write into them, and the worker reads them without a copy.
        const params = this.namedParameters();
        const tensors: Record<string, TensorDesc> = {};
        for (const [k, t] of params) tensors[k] = this.buffers.describe(t);
        this.buffers.push(params.map(([, t]) => t));
        bound = worker.request<{ missing: string[]; unexpected: string[] }>('bind', { id: this.id, tensors });
      } catch (e) {
        rethrow(e);
      }
      this.bound = bound;
      timedCalls.set(this, (a) => this.call(a, true) as SelfTimed);
    }

    override loadStateDict(state: ReadonlyMap<string, Tensor>, options: { strict?: boolean } = {}): { missing: string[]; unexpected: string[] } {
      const r = super.loadStateDict(state, options);
      // names only one side has (the original's strict=False load skips them silently; the bench notes them)
      return {
        missing: [...r.missing, ...this.bound.missing.map((k) => `${k} (only in the .py module)`)],
        unexpected: [...r.unexpected, ...this.bound.unexpected.map((k) => `${k} (not in the .py module)`)],
      };
    }

    forward(...args: unknown[]): Tensor | (Tensor | null)[] {
      return this.call(args, false) as Tensor | (Tensor | null)[];
    }

    private call(args: readonly unknown[], timed: boolean): SelfTimed | Tensor | (Tensor | null)[] {
      const n = task.inputs.length;
      const tensors = task.inputs.map((_, i) => (args[i] instanceof Tensor ? (args[i] as Tensor) : null));
      task.inputs.forEach((s, i) => {
        const a = args[i];
        if (a !== undefined && a !== null && !(a instanceof Tensor)) throw new Error(`input ${s.name} is a ${typeof a}, not a Tensor`);
      });
      const host = args.slice(n);
      let inputs: (TensorDesc | null)[] = tensors.map((t) => (t ? this.buffers.describe(t) : null));
      if (!host.length) while (inputs.length && inputs[inputs.length - 1] === null) inputs = inputs.slice(0, -1); // trailing absent optionals
      const params = this.namedParameters().map(([, t]) => t);
      this.buffers.push([...tensors, ...params]); // CPU: the parameters too, whoever wrote them since
      let reply: ForwardReply;
      try {
        reply = worker.request<ForwardReply>('forward', { id: this.id, inputs, names: task.inputs.map((s) => s.name), host, time: timed, release: this.buffers.takeReleased() });
      } catch (e) {
        this.buffers.pull(tensors); // what the candidate wrote before it failed
        rethrow(e);
      }
      const outs: (Tensor | null)[] = reply.outputs.map((o) => (o ? Tensor.empty(this.ctx.backend, o.shape, o.dtype, { device: this.ctx.device }) : null));
      try {
        const descs = outs.map((t) => (t ? this.buffers.describe(t) : null));
        // the harness's writes to the fresh outputs (the guard's poison, on its stream) land before the worker's copy
        this.buffers.push(outs);
        worker.request('collect', { outputs: descs });
        this.buffers.pull([...outs, ...tensors]);
      } catch (e) {
        for (const t of outs) t?.dispose();
        rethrow(e);
      }
      const result = reply.tuple ? outs : outs[0] ?? null;
      if (!timed) return result as Tensor | (Tensor | null)[];
      return { result, deviceMs: reply.ms ?? NaN, hostMs: workerHostMs(reply) };
    }

    override dispose(): void {
      timedCalls.delete(this);
      try {
        if (!worker.deadReason) worker.request('release', { ids: [this.id], buffers: this.buffers.takeReleased() });
      } catch {
        // a dead worker holds nothing
      }
      super.dispose();
    }
  }
  Object.defineProperty(TorchCandidate, 'name', { value: task.className });
  // Each call is a synchronous round trip to the worker process, which launches on its own stream: a CUDA graph captured
  // here would record only this side's allocations and copies, and its replay would never call the worker.
  markNotGraphCapturable(TorchCandidate, 'a PyTorch candidate (runs in its worker process, out of this CUDA graph\'s reach)');
  return TorchCandidate;
}
