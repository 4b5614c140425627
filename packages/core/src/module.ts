import { currentContext, type ExecutionContext } from './context.js';
import type { DType } from './dtype.js';
import { formatShape, shapesEqual, type Shape } from './shape.js';
import { Tensor } from './tensor.js';

/**
 * Base of every task module (baselines and candidates). Like torch.nn.Module: named
 * parameters and children, a state dict, and forward(). The constructor captures the
 * current execution context, so constructors keep the production signature.
 */
export abstract class Module {
  protected readonly ctx: ExecutionContext;
  private readonly params = new Map<string, Tensor>();
  private readonly children = new Map<string, Module>();

  constructor() {
    this.ctx = currentContext();
  }

  abstract forward(...args: never[]): unknown;

  /** Allocate a parameter in the context's backend and dtype (zero-filled) and register it. */
  protected parameter(name: string, shape: Shape, dtype: DType = this.ctx.dtype): Tensor {
    const t = Tensor.zeros(this.ctx.backend, shape, dtype, { device: this.ctx.device });
    this.params.set(name, t);
    return t;
  }

  /** Register an existing tensor as a parameter (a buffer in PyTorch's words). */
  protected registerParameter(name: string, t: Tensor): Tensor {
    this.params.set(name, t);
    return t;
  }

  protected registerModule<M extends Module>(name: string, m: M): M {
    this.children.set(name, m);
    return m;
  }

  /** Build a child through the registry, so candidate overrides apply (late-bound composition). */
  protected createModule<M extends Module = Module>(name: string, taskId: string, ...args: unknown[]): M {
    return this.registerModule(name, this.ctx.registry.create<M>(taskId, ...args));
  }

  namedParameters(prefix = ''): [string, Tensor][] {
    const out: [string, Tensor][] = [];
    for (const [k, t] of this.params) out.push([prefix + k, t]);
    for (const [k, m] of this.children) out.push(...m.namedParameters(`${prefix}${k}.`));
    return out;
  }

  /** Every module of the tree with its path ('' for this one), parents before children (torch's named_modules). */
  namedModules(prefix = ''): [string, Module][] {
    const out: [string, Module][] = [[prefix, this]];
    for (const [k, m] of this.children) out.push(...m.namedModules(prefix ? `${prefix}.${k}` : k));
    return out;
  }

  stateDict(): Map<string, Tensor> {
    return new Map(this.namedParameters());
  }

  /**
   * Copy values into this module's parameters (shapes must match; dtype is converted).
   * strict: every parameter must be provided and no extra names given.
   */
  loadStateDict(state: ReadonlyMap<string, Tensor>, options: { strict?: boolean } = {}): { missing: string[]; unexpected: string[] } {
    const own = new Map(this.namedParameters());
    const missing = [...own.keys()].filter((k) => !state.has(k));
    const unexpected = [...state.keys()].filter((k) => !own.has(k));
    if (options.strict && (missing.length || unexpected.length)) {
      throw new Error(`loadStateDict: missing [${missing.join(', ')}], unexpected [${unexpected.join(', ')}]`);
    }
    // Check every shape before copying anything, so a bad state dict leaves the module unchanged.
    for (const [k, dst] of own) {
      const src = state.get(k);
      if (src && !shapesEqual(src.shape, dst.shape)) throw new Error(`loadStateDict: '${k}' has shape ${formatShape(src.shape)}, expected ${formatShape(dst.shape)}`);
    }
    for (const [k, dst] of own) {
      const src = state.get(k);
      if (src) dst.copy_(src);
    }
    return { missing, unexpected };
  }

  /** Release every parameter, and what each child releases in its own dispose() (caches a module keeps, as torch's buffers). */
  dispose(): void {
    for (const t of this.params.values()) t.dispose();
    for (const m of this.children.values()) m.dispose();
  }
}

/** A class usable as a task module: constructible with the task's init args. */
export type ModuleClass<M extends Module = Module> = new (...args: any[]) => M;
