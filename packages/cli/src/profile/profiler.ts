/**
 * Where a forward's time goes, by task: every module built from `registry` (model-zoo's instrumentRegistry) has its
 * forward timed with the backend's timer (device events on CUDA, the host clock on the CPU), started before and
 * stopped after the real forward. Calls nest as the modules do, so a module's self time is its inclusive time less its
 * direct children's; the whole forward is timed too, and what no module covers (the runner's glue, the top model's own
 * ops outside its children) is the unattributed rest. Timings are read once per forward, after one synchronise: device
 * events recorded on one stream nest exactly without a synchronise per module (a module that moves work to another
 * stream is timed on the stream it started on). Host milliseconds (the JS time between start and stop) come with them,
 * so a launch-bound module shows host time close to or above its device time. With byShape, each task's calls split by
 * their input shapes and the module's own weight shape (a conv's or a linear's: the same input, another layer), a
 * channels-last tensor marked 'cl'.
 *
 * A wrapped module no longer runs its class's own forward, so a layer that fuses its children (runsOwnForward) runs
 * them unfused here: profile the eager, unfused model, and compare the un-instrumented forward for the cost.
 */
import type { Backend, Module, ModuleRegistry, Timer } from '@fastkernels/core';
import { Tensor, stridesLikeChannelsLast } from '@fastkernels/core';
import { instrumentRegistry } from '@fastkernels/model-zoo';

/** One task's (or task and input shapes') totals per profiled forward. */
export interface TaskProfile {
  readonly task: string;
  /** With byShape: the input tensors' shapes and the module's own weight's ('2x3x8x8 | w 16x3x3x3'); else null. */
  readonly shape: string | null;
  /** Calls per forward. */
  readonly calls: number;
  /** Milliseconds per forward from each call's start to its stop, children included. */
  readonly inclusiveMs: number;
  /** inclusiveMs less the children's inclusive time. */
  readonly selfMs: number;
  /** The same on the host clock (JS time spent launching the module's own work). */
  readonly hostSelfMs: number;
}

export interface ProfileTotals {
  /** Profiled forwards the totals average over. */
  readonly forwards: number;
  /** The whole profiled forward (instrumented), ms per forward. */
  readonly forwardMs: number;
  /** What no module covers, ms per forward: forwardMs less the outermost modules' inclusive time. */
  readonly unattributedMs: number;
  readonly tasks: readonly TaskProfile[];
}

interface Call {
  readonly key: string;
  readonly task: string;
  readonly shape: string | null;
  readonly timer: Timer;
  readonly parent: number;
  hostStart: number;
  hostMs: number;
}

interface Totals {
  task: string;
  shape: string | null;
  calls: number;
  inclusiveMs: number;
  selfMs: number;
  hostSelfMs: number;
}

/** '1x64x40x40', with ' cl' for a channels-last 4-d / 5-d tensor (so a profile shows which convs run NHWC). */
const dims = (t: Tensor) => (t.shape.length ? t.shape.join('x') + (!t.isContiguous() && stridesLikeChannelsLast(t.shape, t.strides) ? ' cl' : '') : 'scalar');

/** The tensors' shapes among a forward's arguments, e.g. '32x16x320x320, 32x16' ('-' when none is a tensor). */
export function shapeSignature(args: readonly unknown[]): string {
  const shapes = args.filter((a): a is Tensor => a instanceof Tensor).map(dims);
  return shapes.length ? shapes.join(', ') : '-';
}

/** A module's own weight shape ('w 64x32x3x3'), which tells apart calls with the same input (convs, linears); '' without. */
export function weightSignature(m: Module): string {
  const own = m.namedParameters().find(([name]) => !name.includes('.'));
  return own ? `w ${dims(own[1])}` : '';
}

export class ModuleProfiler {
  /** Build the model from this registry: every task module's forward is timed while a profile() runs. */
  readonly registry: ModuleRegistry;
  private readonly timers: Timer[] = [];
  private calls: Call[] = [];
  private stack: number[] = [];
  private active = false;
  private readonly totals = new Map<string, Totals>();
  private readonly weightOf = new WeakMap<Module, string>();
  private forwards = 0;
  private forwardMs = 0;
  private unattributedMs = 0;

  constructor(
    base: ModuleRegistry,
    private readonly clock: { readonly backend: Backend; readonly device: number },
    private readonly options: { readonly byShape?: boolean } = {},
  ) {
    this.registry = instrumentRegistry(base, { onForward: (id, m, args, run) => this.around(id, m, args, run) }, 'profile');
  }

  /**
   * Run one forward with every module timed, and add it to the totals; returns its milliseconds. `around`, when given,
   * gets the timed launch to call (a HeadStart queues device work ahead of it).
   */
  profile(forward: () => void, around?: (launch: () => void) => void): number {
    if (this.active) throw new Error('ModuleProfiler.profile: already profiling (nested profile call)');
    const { backend, device } = this.clock;
    this.calls = [];
    this.stack = [];
    backend.synchronize(device);
    const whole = backend.createTimer(device);
    const launch = () => {
      whole.start();
      forward();
      whole.stop();
    };
    this.active = true;
    try {
      if (around) around(launch);
      else launch();
    } finally {
      this.active = false;
    }
    backend.synchronize(device);
    const total = whole.elapsedMs();
    this.add(total);
    return total;
  }

  /** Per-forward totals of every profile() so far. */
  result(): ProfileTotals {
    const n = Math.max(this.forwards, 1);
    const tasks = [...this.totals.values()].map((t) => ({ task: t.task, shape: t.shape, calls: t.calls / n, inclusiveMs: t.inclusiveMs / n, selfMs: t.selfMs / n, hostSelfMs: t.hostSelfMs / n }));
    tasks.sort((a, b) => b.selfMs - a.selfMs || a.task.localeCompare(b.task));
    return { forwards: this.forwards, forwardMs: this.forwardMs / n, unattributedMs: this.unattributedMs / n, tasks };
  }

  private around(task: string, m: Module, args: readonly unknown[], run: () => unknown): unknown {
    if (!this.active) return run();
    const shape = this.options.byShape ? this.signature(m, args) : null;
    const index = this.calls.length;
    const call: Call = { key: shape === null ? task : `${task}\u0000${shape}`, task, shape, timer: this.timerAt(index), parent: this.stack.at(-1) ?? -1, hostStart: 0, hostMs: 0 };
    this.calls.push(call);
    this.stack.push(index);
    call.hostStart = performance.now();
    call.timer.start();
    try {
      return run();
    } finally {
      call.timer.stop();
      call.hostMs = performance.now() - call.hostStart;
      this.stack.pop();
    }
  }

  /** Input shapes, then the module's own weight shape (cached: a module's parameters keep their shapes). */
  private signature(m: Module, args: readonly unknown[]): string {
    let w = this.weightOf.get(m);
    if (w === undefined) this.weightOf.set(m, (w = weightSignature(m)));
    return w ? `${shapeSignature(args)} | ${w}` : shapeSignature(args);
  }

  /** Timers are reused call by call across forwards (a CUDA timer holds two events). */
  private timerAt(i: number): Timer {
    while (this.timers.length <= i) this.timers.push(this.clock.backend.createTimer(this.clock.device));
    return this.timers[i]!;
  }

  private add(totalMs: number): void {
    const inclusive = this.calls.map((c) => c.timer.elapsedMs());
    const childMs = new Array<number>(this.calls.length).fill(0);
    const childHostMs = new Array<number>(this.calls.length).fill(0);
    let outermost = 0;
    this.calls.forEach((c, i) => {
      if (c.parent >= 0) {
        childMs[c.parent]! += inclusive[i]!;
        childHostMs[c.parent]! += c.hostMs;
      } else outermost += inclusive[i]!;
    });
    this.calls.forEach((c, i) => {
      let t = this.totals.get(c.key);
      if (!t) this.totals.set(c.key, (t = { task: c.task, shape: c.shape, calls: 0, inclusiveMs: 0, selfMs: 0, hostSelfMs: 0 }));
      t.calls++;
      t.inclusiveMs += inclusive[i]!;
      t.selfMs += inclusive[i]! - childMs[i]!;
      t.hostSelfMs += c.hostMs - childHostMs[i]!;
    });
    this.forwards++;
    this.forwardMs += totalMs;
    this.unattributedMs += totalMs - outermost;
  }
}
