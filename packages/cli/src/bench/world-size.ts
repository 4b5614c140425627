/**
 * Tasks that need a tensor-parallel process group (TaskDefinition.worldSize > 1: the all-reduce, the parallel linear
 * layers). A bench worker alone is one process, where a collective is a copy and a candidate cannot be told from one.
 * `bench --tp N` (or bench under `fastkernels launch --nproc N`) gives them a group: the ranks' bench workers form one
 * (bench/group.ts) and run the tasks whose cases are rank-aware (all of model-zoo's tensor-parallel tasks: the all-reduce
 * and the four parallel linear layers) in lockstep. The others are skipped, with the reason.
 */
import { launchEnv } from '@fastkernels/backend-nccl';
import type { TaskDefinition } from '@fastkernels/core';

/**
 * The process-group size this bench run can give tasks: `--tp N`, else the size of the launch it runs in, else 1.
 */
export function benchGroupWorld(tp: number, env: Readonly<Record<string, string | undefined>> = process.env): number {
  if (tp > 1) return tp;
  return safeLaunchEnv(env)?.world ?? 1;
}

/** Whether bench runs `task` in the process group of a run whose group has `world` ranks. */
export function runsInGroup(task: Pick<TaskDefinition, 'worldSize' | 'rankAwareCases'>, world: number): boolean {
  const need = task.worldSize ?? 1;
  return need > 1 && world >= need && task.rankAwareCases === true;
}

/** Why `task` cannot be benched in a run whose process group has `world` ranks (1: none), or null when it can. */
export function worldSizeSkipReason(task: Pick<TaskDefinition, 'worldSize' | 'rankAwareCases'>, world: number): string | null {
  const need = task.worldSize ?? 1;
  if (need <= 1) return null;
  if (world >= need) {
    if (task.rankAwareCases) return null;
    return `needs a process group of world size ${need}; its cases describe the whole, unsharded layer, not one rank's part of it (no rankAwareCases), so bench cannot run it in the group`;
  }
  return `needs a process group of world size ${need}; run \`fastkernels bench --tp ${need}\` (or bench under \`fastkernels launch --nproc ${need}\`) on ${need} GPUs`;
}

function safeLaunchEnv(env: Readonly<Record<string, string | undefined>>) {
  try {
    return launchEnv(env);
  } catch {
    return undefined;
  }
}
