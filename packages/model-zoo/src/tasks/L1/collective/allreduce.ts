/**
 * L1/allreduce: vLLM's tensor_model_parallel_all_reduce as a module (AllReduce, layers/parallel/linear.ts), the
 * reduction after RowParallelLinear. It declares worldSize 2 (at world 1 the all-reduce is a copy, so a single process
 * cannot tell a good candidate from a copy) and rank-aware cases, so `bench --tp 2` (or bench under
 * `fastkernels launch --nproc 2`) runs it in a process group of its bench workers, in lockstep: each rank draws its own
 * input from the case's seeded stream and the float64 reference is the sum of every rank's draw. At world 1 the
 * reference is the input.
 */
import { DTYPE_INFO, Rng, Tensor, currentTensorParallelGroup, defineTask, hostArray, normalTensor, roundToDType, type ExecutionContext, type TaskCase } from '@fastkernels/core';
import { AllReduce } from '../../../layers/parallel/linear.js';
import { DENSE_MOE_LLM } from '../../families.js';

/** The architectures whose models run the tensor-parallel tasks. */
export const TP_ARCHS = ['llama', 'qwen2', 'mistral', 'mixtral', 'deepseek', 'qwen3_next', 'gpt_oss'];
/** The smallest group in which a collective does anything (see the header). */
export const TP_WORLD = 2;
/** Llama-3-8B token counts of the production cases. */
export const llamaT = [1, 32, 4096];

/** The group's sum of the inputs made last for a case (allreduce's float64 reference); small cases only. */
const groupSums = new WeakMap<TaskCase, Float64Array>();
/** Above this many elements no sum is kept (the golden check runs at small shapes only). */
const SUM_MAX_NUMEL = 1 << 20;

/**
 * Rank r of W draws W normal tensors from the case's stream and takes the r-th (at W = 1: the first, as before), so the
 * ranks' inputs differ (a candidate cannot pass by scaling its own input) and every rank knows the group's sum: the
 * reference, kept for the round that made these inputs.
 */
function allreduceInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): Tensor[] {
  const { rank, world } = currentTensorParallelGroup();
  const shape = [c.dims.T!, c.dims.H!];
  const n = shape[0]! * shape[1]!;
  if (n > SUM_MAX_NUMEL) {
    // No golden sum at this size: each rank draws only its own input, from a seed of the shared stream (core's
    // normalTensor: on the device where it can; drawing W full tensors on the host took seconds a round).
    const seeds = Array.from({ length: world }, () => rng.nextU32());
    groupSums.delete(c);
    return [normalTensor(ctx.backend, shape, c.dtype, new Rng(seeds[rank]!), { device: ctx.device })];
  }
  let mine: Float64Array | undefined;
  const sum = world > 1 ? new Float64Array(n) : null;
  for (let q = 0; q < world; q++) {
    const v = rng.fillNormal(n, 1);
    if (q === rank) mine = v;
    if (sum) for (let i = 0; i < n; i++) sum[i]! += roundToDType(v[i]!, c.dtype);
  }
  if (sum) groupSums.set(c, sum);
  else groupSums.delete(c);
  return [Tensor.fromArray(ctx.backend, mine!, shape, c.dtype, { device: ctx.device })];
}

export const allreduceTask = defineTask(
  {
    id: 'L1/allreduce',
    level: 1,
    className: 'AllReduce',
    family: [DENSE_MOE_LLM],
    architectures: TP_ARCHS,
    worldSize: TP_WORLD,
    rankAwareCases: true,
    mirrors: 'vllm.distributed.communication_op.tensor_model_parallel_all_reduce',
    description: 'Sum of a tensor over the tensor-parallel group (out of place); at world 1 a copy. The reduction after RowParallelLinear (o_proj, down_proj).',
    init: [],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'H'] }],
    cases: {
      ci: [
        { name: 'small-f32', dtype: 'f32', dims: { T: 5, H: 64 }, init: [] },
        { name: 'small-bf16', dtype: 'bf16', dims: { T: 3, H: 96 }, init: [] },
      ],
      production: llamaT.map((T) => ({ name: `llama3-8b-T${T}`, dtype: 'bf16' as const, dims: { T, H: 4096 }, init: [] })),
    },
  },
  {
    baseline: AllReduce,
    makeInputs: allreduceInputs,
    reference: ([x], _params, c) => {
      const sum = currentTensorParallelGroup().world > 1 ? groupSums.get(c) : undefined;
      return [hostArray(x!.shape, sum && sum.length === x!.data.length ? Float64Array.from(sum) : Float64Array.from(x!.data))];
    },
    work: (c) => ({ bytes: 2 * c.dims.T! * c.dims.H! * DTYPE_INFO[c.dtype].itemsize, flops: 0 }),
  },
);
