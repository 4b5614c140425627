import type { Backend } from './backend.js';
import type { DType } from './dtype.js';
import type { ModuleRegistry } from './registry.js';

/**
 * Where modules put their parameters and which classes they build their children from,
 * like vLLM's default device and dtype during model construction.
 */
export interface ExecutionContext {
  readonly backend: Backend;
  readonly device: number;
  /** Default dtype of parameters and activations (the model's dtype). */
  readonly dtype: DType;
  /** Resolves task ids to module classes (the baselines, or a candidate set's overrides). */
  readonly registry: ModuleRegistry;
}

const stack: ExecutionContext[] = [];

/** Run fn with ctx as the current context (construction of modules happens inside). */
export function withContext<T>(ctx: ExecutionContext, fn: () => T): T {
  stack.push(ctx);
  try {
    return fn();
  } finally {
    stack.pop();
  }
}

export function currentContext(): ExecutionContext {
  const ctx = stack[stack.length - 1];
  if (!ctx) throw new Error('no execution context: construct modules through registry.create() or inside withContext()');
  return ctx;
}

export function hasContext(): boolean {
  return stack.length > 0;
}
