import type { Module, ModuleClass, ModuleRegistry } from '@fastkernels/core';

/** Hooks an instrumented registry calls around every module it builds. */
export interface InstrumentHooks {
  /** After a module of `taskId` was constructed with `args`. */
  onInit?(taskId: string, args: readonly unknown[], module: Module): void;
  /** Around forward: call `run()` to run the real forward and return (or rethrow) its result. */
  onForward?(taskId: string, module: Module, args: readonly unknown[], run: () => unknown): unknown;
  /** A constructor threw. */
  onInitError?(taskId: string, error: unknown): void;
}

/**
 * A child of `base` that overrides every task (or those in `only`) with a subclass of the class `base` resolves
 * (baseline or candidate), adding the hooks around construction and forward. Everything built from it — children
 * included, since modules build their children from their context's registry — is instrumented, and behaves as the
 * class it wraps (same name, parameters, forward result). A wrapped module no longer runs its class's own forward,
 * so a layer does not fuse its ops into another's (runsOwnForward): wrap no more tasks than the hooks need.
 */
export function instrumentRegistry(base: ModuleRegistry, hooks: InstrumentHooks, label = 'instrumented', only?: ReadonlySet<string>): ModuleRegistry {
  const child = base.child(label);
  for (const task of base.allTasks()) {
    const id = task.id;
    if (only && !only.has(id)) continue;
    const Cls = base.resolve(id) as ModuleClass & (new (...a: any[]) => Module & { forward(...x: unknown[]): unknown });
    const Wrapped = class extends Cls {
      constructor(...args: any[]) {
        try {
          super(...args);
        } catch (e) {
          hooks.onInitError?.(id, e);
          throw e;
        }
        hooks.onInit?.(id, args, this);
      }
      override forward(...args: unknown[]): unknown {
        if (!hooks.onForward) return super.forward(...args);
        return hooks.onForward(id, this, args, () => super.forward(...args));
      }
    };
    Object.defineProperty(Wrapped, 'name', { value: Cls.name });
    child.override(id, Wrapped);
  }
  return child;
}

const BLAME = Symbol.for('fastkernels.blame');

/** The task an error was attributed to by a blaming registry (the innermost suspect module it passed through). */
export function blamedTask(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null ? (e as Record<symbol, string | undefined>)[BLAME] : undefined;
}

/**
 * Wrap `registry` so an error thrown inside (or by the constructor of) a module of one of the `suspects` tasks is
 * tagged with that task id — the innermost suspect on the way out, so a candidate L2 whose own baseline L1
 * children throw on its bad inputs is still the one blamed. drop-and-retry reads the tag (blamedTask) before
 * falling back to bisection. Only the suspects are wrapped: every other module stays the baseline's own, so a
 * candidate run keeps the baseline's fusions (rotary + KV-cache write, ...) and is timed against them fairly.
 */
export function blamingRegistry(registry: ModuleRegistry, suspects: ReadonlySet<string>): ModuleRegistry {
  const tag = (id: string, e: unknown) => {
    if (suspects.has(id) && typeof e === 'object' && e !== null && !(BLAME in e)) {
      try {
        Object.defineProperty(e, BLAME, { value: id, enumerable: false });
      } catch {
        // frozen error objects stay untagged (bisection finds the culprit)
      }
    }
  };
  return instrumentRegistry(registry, {
    onInitError: tag,
    onForward: (id, _m, _a, run) => {
      try {
        return run();
      } catch (e) {
        tag(id, e);
        throw e;
      }
    },
  }, 'blame', suspects);
}
