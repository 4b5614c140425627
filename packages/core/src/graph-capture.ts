import type { ModuleClass } from './module.js';

/**
 * Whether a module class's calls can be recorded into a CUDA graph. A graph replays the kernels a call launched on the
 * capturing stream; it cannot replay work done elsewhere — another process (a PyTorch candidate's worker), a host
 * read-back, a host-side branch on device values. Classes are capturable unless marked; the mark is inherited.
 * The engine's callers (e2e) turn graph decode off for every run of a comparison that includes such a class.
 */
const NOT_CAPTURABLE = Symbol.for('fastkernels.notGraphCapturable');

/** Mark a class as not capturable; `reason` says why (shown in the e2e report, e.g. "a PyTorch candidate (...)"). */
export function markNotGraphCapturable(cls: ModuleClass, reason: string): void {
  Object.defineProperty(cls, NOT_CAPTURABLE, { value: reason, enumerable: false, configurable: true });
}

/** Why instances of this class cannot be captured into a CUDA graph, or undefined when they can. */
export function graphCaptureBlocker(cls: ModuleClass): string | undefined {
  const r = (cls as unknown as Record<symbol, unknown>)[NOT_CAPTURABLE];
  return typeof r === 'string' ? r : undefined;
}

/**
 * Why a candidate set cannot run inside CUDA graphs ("<task>: <reason>; ...: not capturable"), or undefined when every
 * class in it can. The e2e drivers (LLM engine, image pipeline) turn graphs off on both sides when this is set.
 */
export function setCaptureBlocker(set: readonly { readonly taskId: string; readonly cls: ModuleClass }[]): string | undefined {
  const why = set.flatMap((c) => {
    const r = graphCaptureBlocker(c.cls);
    return r ? [`${c.taskId}: ${r}`] : [];
  });
  return why.length ? `${why.join('; ')}: not capturable` : undefined;
}
