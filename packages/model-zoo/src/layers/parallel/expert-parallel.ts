/**
 * Expert parallelism (issue 31; vLLM's enable_expert_parallel): over the same ranks as the tensor-parallel group,
 * attention stays tensor-parallel while a MoE layer's experts are partitioned, rank r owning experts
 * [r E / W, (r + 1) E / W) and loading only their weights. It is a switch on top of the tensor-parallel group (the
 * expert-parallel world is the tensor-parallel world), read by FusedMoE and the weight plan at construction, as the
 * group is. Off (the default) and at world 1 nothing changes.
 */
import { UserError } from '@fastkernels/core';

const stack: boolean[] = [];
let global = false;

/** Whether MoE layers built now partition their experts over the tensor-parallel ranks. */
export function currentExpertParallel(): boolean {
  return stack[stack.length - 1] ?? global;
}

/** Set the process-wide switch (a launched rank of `--ep N` does this once, next to setTensorParallelGroup). */
export function setExpertParallel(on: boolean): void {
  global = on;
}

/** Build (or check) with expert parallelism on or off. */
export function withExpertParallel<T>(on: boolean, fn: () => T): T {
  stack.push(on);
  try {
    return fn();
  } finally {
    stack.pop();
  }
}

/** The experts rank `rank` of `world` owns: [start, start + count). */
export function expertParallelRange(numExperts: number, rank: number, world: number): { start: number; count: number } {
  if (numExperts % world !== 0) throw new RangeError(`${numExperts} experts do not split over ${world} expert-parallel ranks`);
  const count = numExperts / world;
  return { start: rank * count, count };
}

/** The expert count splits over `world` ranks: a UserError naming --ep and the sizes that work otherwise. */
export function checkExpertParallel(numExperts: number, world: number, file = 'config.json', field = 'num_local_experts'): void {
  if (numExperts % world === 0) return;
  const works = [1, 2, 4, 8, 16, 32, 64].filter((w) => numExperts % w === 0);
  throw new UserError(`the number of experts ${numExperts} is not divisible by the expert-parallel size ${world} (${file}: ${field})`, {
    field: '--ep',
    fix: `use --ep ${works.join(', ')} (sizes that split the experts)`,
  });
}
