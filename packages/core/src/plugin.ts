import type { DependencyContainer, InjectionToken } from 'tsyringe';
import type { Backend } from './backend.js';
import type { TaskDefinition } from './task.js';

/** Backends, multi-bound: resolveAll(BACKEND). */
export const BACKEND: InjectionToken<Backend> = Symbol.for('fastkernels.Backend');

/** A source of task definitions (a model family). */
export interface TaskProvider {
  readonly family: string;
  tasks(): readonly TaskDefinition[];
}
export const TASK_PROVIDER: InjectionToken<TaskProvider> = Symbol.for('fastkernels.TaskProvider');

/** A plugin is a plain object; the CLI composes plugins explicitly into a child container. */
export interface Plugin {
  readonly name: string;
  readonly version: string;
  register(container: DependencyContainer): void;
}

export function definePlugin(plugin: Plugin): Plugin {
  if (!/^[a-z][a-z0-9-]*$/.test(plugin.name)) throw new Error(`plugin name '${plugin.name}' must be lowercase words joined by '-'`);
  return Object.freeze({ ...plugin });
}

export function loadPlugins(container: DependencyContainer, plugins: readonly Plugin[]): DependencyContainer {
  const seen = new Set<string>();
  for (const p of plugins) {
    if (seen.has(p.name)) throw new Error(`plugin '${p.name}' loaded twice`);
    seen.add(p.name);
    p.register(container);
  }
  return container;
}

/** resolveAll that returns [] instead of throwing when nothing is registered. */
export function resolveAllOrNone<T>(container: DependencyContainer, token: InjectionToken<T>): T[] {
  return container.isRegistered(token, true) ? container.resolveAll(token) : [];
}
