/**
 * Tasks that need a tensor-parallel process group (TaskDefinition.worldSize > 1: the all-reduce, the parallel linear
 * layers). A bench worker is one process with no process group, so it can only give them world 1, where a collective
 * is a copy and a candidate cannot be told from one: `bench` skips them and says why.
 */
import { launchEnv } from '@fastkernels/backend-nccl';
import type { TaskDefinition } from '@fastkernels/core';

/** The process-group size a bench worker can give a task today. */
export const BENCH_WORLD_SIZE = 1;

/** Why `task` cannot be benched here, or null when it can. */
export function worldSizeSkipReason(task: Pick<TaskDefinition, 'worldSize'>, env: Readonly<Record<string, string | undefined>> = process.env): string | null {
  const need = task.worldSize ?? 1;
  if (need <= BENCH_WORLD_SIZE) return null;
  const launched = safeLaunchEnv(env);
  if (launched && launched.world >= need) {
    // Under the launcher the ranks exist, but each rank's bench workers are separate processes outside its group.
    return `needs a process group of world size ${need}; bench workers do not join the launcher's process group yet (backend-nccl's GPU tests check these layers across ranks)`;
  }
  return `needs a process group of world size ${need}; run under \`fastkernels launch --nproc ${need}\``;
}

function safeLaunchEnv(env: Readonly<Record<string, string | undefined>>) {
  try {
    return launchEnv(env);
  } catch {
    return undefined;
  }
}
