import { cpuPlugin } from '@fastkernels/backend-cpu';
import { cudaPlugin } from '@fastkernels/backend-cuda';
import { ncclPlugin } from '@fastkernels/backend-nccl';
import {
  BACKEND,
  TASK_PROVIDER,
  UserError,
  container,
  loadPlugins,
  nearest,
  resolveAllOrNone,
  type Backend,
  type DependencyContainer,
  type ModuleRegistry,
  type Plugin,
  type TaskDefinition,
} from '@fastkernels/core';
import { baselineRegistry, modelZooPlugin } from '@fastkernels/model-zoo';

/**
 * The plugins this CLI is built with, composed explicitly (no self-registration on import).
 * Backend selection goes by name through the multi-bound BACKEND token; the CUDA plugin is
 * cheap to register (no driver is touched until a CUDA backend is first used). model-zoo registers the tensor-parallel
 * tasks too; backend-nccl brings the collectives and the launcher (NCCL itself is loaded only by `launch`ed ranks).
 */
export const PLUGINS: readonly Plugin[] = [cpuPlugin, cudaPlugin, modelZooPlugin, ncclPlugin];

/** Backends this CLI knows of, and what to say when one is not registered. */
export const KNOWN_BACKENDS: Readonly<Record<string, string>> = {
  cpu: 'the float64 reference backend in plain TypeScript',
  cuda: 'NVIDIA GPUs through the CUDA driver, NVRTC and cuBLASLt',
};

export interface Env {
  readonly container: DependencyContainer;
  readonly backends: readonly Backend[];
  readonly registry: ModuleRegistry;
  readonly tasks: readonly TaskDefinition[];
  readonly taskMap: ReadonlyMap<string, TaskDefinition>;
}

let cached: Env | undefined;

export function environment(): Env {
  if (cached) return cached;
  const c = loadPlugins(container.createChildContainer(), PLUGINS);
  const backends = resolveAllOrNone(c, BACKEND);
  const registry = baselineRegistry(resolveAllOrNone(c, TASK_PROVIDER));
  const tasks = registry.allTasks();
  cached = { container: c, backends, registry, tasks, taskMap: new Map(tasks.map((t) => [t.id, t])) };
  return cached;
}

/** Pick a backend by name ('auto': cuda when available, else cpu). */
export function selectBackend(env: Env, name: string): Backend {
  const byName = new Map(env.backends.map((b) => [b.name, b]));
  if (name === 'auto') {
    for (const pref of ['cuda', 'cpu']) {
      const b = byName.get(pref);
      if (b && safeAvailability(b).available) return b;
    }
    const any = env.backends.find((b) => safeAvailability(b).available);
    if (any) return any;
    throw new UserError('no backend is available', { field: '--backend', fix: 'run `fastkernels doctor` to see why' });
  }
  const b = byName.get(name);
  if (!b) {
    throw new UserError(`backend '${name}' is not part of this build (registered: ${env.backends.map((x) => x.name).join(', ') || 'none'})`, {
      field: '--backend',
      fix: `use --backend ${env.backends[0]?.name ?? 'cpu'}, or run \`fastkernels doctor\``,
    });
  }
  const a = safeAvailability(b);
  if (!a.available) throw new UserError(`backend '${name}' is not available: ${a.reason ?? 'no reason given'}`, { field: '--backend', fix: 'run `fastkernels doctor`, or use --backend cpu' });
  return b;
}

export function safeAvailability(b: Backend): { available: boolean; reason?: string } {
  try {
    return b.availability();
  } catch (e) {
    return { available: false, reason: e instanceof Error ? e.message : String(e) };
  }
}

/** A task by id (`L1/rms_norm`) or by a unique stem (`rms_norm`); a stem several levels share names them all. */
export function findTask(env: Env, idOrStem: string, field = 'task'): TaskDefinition {
  const exact = env.taskMap.get(idOrStem);
  if (exact) return exact;
  const matches = env.tasks.filter((x) => x.stem === idOrStem);
  if (matches.length === 1) return matches[0]!;
  if (matches.length > 1) {
    const ids = matches.map((x) => x.id);
    throw new UserError(`task '${idOrStem}' is ambiguous: ${ids.join(', ')}`, { field, fix: `give the full id, e.g. ${ids[0]}` });
  }
  const near = nearest(idOrStem, [...env.taskMap.keys(), ...env.tasks.map((x) => x.stem)]);
  throw new UserError(`unknown task '${idOrStem}'`, {
    field,
    fix: `${near ? `did you mean ${near}? ` : ''}run \`fastkernels list\` for the task ids`,
  });
}
