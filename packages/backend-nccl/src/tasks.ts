/**
 * Task definitions of the tensor-parallel layers, registered with the dense LLM family through this package's plugin
 * (index.ts: a TaskProvider, so `fastkernels list` shows them):
 *   L1/allreduce                     AllReduce                   vLLM tensor_model_parallel_all_reduce
 *   L2/column_parallel_linear        ColumnParallelLinear        vllm.model_executor.layers.linear.*
 *   L2/row_parallel_linear           RowParallelLinear           (imports L1/allreduce)
 *   L2/qkv_parallel_linear           QKVParallelLinear
 *   L2/merged_column_parallel_linear MergedColumnParallelLinear
 * Every task declares worldSize 2: at world 1 the all-reduce is a copy and the layers are plain GEMMs, so a single
 * process cannot tell a good candidate from a copy. L1/allreduce has rank-aware cases (rankAwareCases): each rank's
 * input is its own draw from the case's seeded stream and the float64 reference is the sum of every rank's draw, so
 * `bench --tp 2` (or bench under `fastkernels launch --nproc 2`) runs it in a process group of its bench workers, in
 * lockstep. The layers' cases still describe the whole, unsharded layer (they run at world 1 in this package's tests,
 * where the reference is the float64 x W^T + b; the Llama modules use the layers when a group of world > 1 is current):
 * bench skips them, with the reason.
 */
import { DTYPE_INFO, Tensor, currentTensorParallelGroup, defineTask, hostArray, roundToDType, type ExecutionContext, type HostArray, type Module, type Rng, type TaskCase } from '@fastkernels/core';
import { AllReduce, ColumnParallelLinear, MergedColumnParallelLinear, QKVParallelLinear, RowParallelLinear } from './parallel/linear.js';

/** model-zoo's dense LLM family name (the string its leaderboard uses). */
export const DENSE_LLM_FAMILY = 'Dense & MoE LLMs';
const ARCHS = ['llama', 'qwen2', 'mistral', 'mixtral', 'deepseek', 'qwen3_next', 'gpt_oss'];
const LINEAR_MODULE = 'vllm.model_executor.layers.linear';
/** The smallest group in which a collective does anything (see the header). */
const TP_WORLD = 2;

const randn = (ctx: ExecutionContext, rng: Rng, shape: number[], c: TaskCase) =>
  Tensor.fromArray(ctx.backend, rng.fillNormal(shape.reduce((a, b) => a * b, 1), 1), shape, c.dtype, { device: ctx.device });

/** Weight ~ N(0, 1/K) (outputs stay O(1)), bias ~ N(0, 0.25). */
function initLinear(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    const scale = name.endsWith('weight') ? 1 / Math.sqrt(Math.max(1, p.shape[1] ?? 1)) : 0.5;
    const t = Tensor.fromArray(p.backend, rng.fillNormal(p.numel, scale), p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

/** float64 y = x W^T + b over contiguous host arrays: x [..., K], weight [N, K]. */
export function linearReference(x: HostArray, weight: HostArray, bias: HostArray | null): HostArray {
  const [n, k] = weight.shape as [number, number];
  const rows = k === 0 ? 0 : x.data.length / k;
  const out = hostArray([...x.shape.slice(0, -1), n]);
  for (let m = 0; m < rows; m++) {
    for (let j = 0; j < n; j++) {
      let acc = bias ? bias.data[j]! : 0;
      for (let p = 0; p < k; p++) acc += x.data[m * k + p]! * weight.data[j * k + p]!;
      out.data[m * n + j] = acc;
    }
  }
  return out;
}

/** Bytes and FLOPs of a T x K by N x K GEMM with an optional bias. */
function gemmWork(c: TaskCase, T: number, K: number, N: number, bias: boolean) {
  const it = DTYPE_INFO[c.dtype].itemsize;
  return { bytes: (T * K + N * K + (bias ? N : 0) + T * N) * it, flops: 2 * T * N * K + (bias ? T * N : 0) };
}

const firstOutput = (_args: readonly (Tensor | null)[], result: unknown): Tensor[] => [(result as [Tensor, Tensor | null])[0]];
const linearRef = (inputs: readonly (HostArray | null)[], params: ReadonlyMap<string, HostArray>, skipBias: boolean) => [
  linearReference(inputs[0]!, params.get('weight')!, skipBias ? null : (params.get('bias') ?? null)),
];

const llamaT = [1, 32, 4096];

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
  let mine: Float64Array | undefined;
  const sum = world > 1 && n <= SUM_MAX_NUMEL ? new Float64Array(n) : null;
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
    family: [DENSE_LLM_FAMILY],
    architectures: ARCHS,
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

const gemmInputs = (c: TaskCase, ctx: ExecutionContext, rng: Rng) => [randn(ctx, rng, [c.dims.T!, c.dims.K!], c)];

export const columnParallelLinearTask = defineTask(
  {
    id: 'L2/column_parallel_linear',
    level: 2,
    className: 'ColumnParallelLinear',
    family: [DENSE_LLM_FAMILY],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    mirrors: `${LINEAR_MODULE}.ColumnParallelLinear`,
    description: 'Linear layer split along its output rows over the tensor-parallel group; gatherOutput all-gathers the result. forward returns [output, outputBias].',
    init: [
      { name: 'inputSize', type: 'int', doc: 'K' },
      { name: 'outputSize', type: 'int', doc: 'N (all ranks together)' },
      { name: 'bias', type: 'bool', optional: true, default: true },
      { name: 'gatherOutput', type: 'bool', optional: true, default: false },
      { name: 'skipBiasAdd', type: 'bool', optional: true, default: false },
      { name: 'paramsDtype', type: 'dtype', optional: true, default: null },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'K'] }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'N'], doc: 'output [0] of forward (this rank\'s columns, or all of them with gatherOutput)' }],
    cases: {
      ci: [
        { name: 'small-f32', dtype: 'f32', dims: { T: 5, K: 64, N: 48 }, init: [64, 48] },
        { name: 'small-nobias-bf16', dtype: 'bf16', dims: { T: 7, K: 96, N: 80 }, init: [96, 80, false, true] },
      ],
      production: llamaT.map((T) => ({ name: `llama3-8b-lm-head-T${T}`, dtype: 'bf16' as const, dims: { T, K: 4096, N: 128256 }, init: [4096, 128256, false] })),
    },
  },
  {
    baseline: ColumnParallelLinear,
    makeInputs: gemmInputs,
    initParameters: (m, _c, rng) => initLinear(m, rng),
    collectOutputs: firstOutput,
    reference: (inputs, params, c) => linearRef(inputs, params, c.init[4] === true),
    work: (c) => gemmWork(c, c.dims.T!, c.dims.K!, c.dims.N!, c.init[2] !== false),
  },
);

export const rowParallelLinearTask = defineTask(
  {
    id: 'L2/row_parallel_linear',
    level: 2,
    className: 'RowParallelLinear',
    family: [DENSE_LLM_FAMILY],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    mirrors: `${LINEAR_MODULE}.RowParallelLinear`,
    description: 'Linear layer split along its input columns; the partial products are all-reduced (o_proj, down_proj). forward returns [output, outputBias].',
    init: [
      { name: 'inputSize', type: 'int', doc: 'K (all ranks together)' },
      { name: 'outputSize', type: 'int', doc: 'N' },
      { name: 'bias', type: 'bool', optional: true, default: true },
      { name: 'inputIsParallel', type: 'bool', optional: true, default: true },
      { name: 'skipBiasAdd', type: 'bool', optional: true, default: false },
      { name: 'paramsDtype', type: 'dtype', optional: true, default: null },
      { name: 'reduceResults', type: 'bool', optional: true, default: true },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'K'], doc: "this rank's input columns (all of them with inputIsParallel=false)" }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'N'] }],
    imports: ['L1/allreduce'],
    cases: {
      ci: [
        { name: 'small-f32', dtype: 'f32', dims: { T: 5, K: 64, N: 48 }, init: [64, 48] },
        { name: 'small-nobias-bf16', dtype: 'bf16', dims: { T: 7, K: 96, N: 80 }, init: [96, 80, false, false] },
      ],
      production: [
        ...llamaT.map((T) => ({ name: `llama3-8b-o-proj-T${T}`, dtype: 'bf16' as const, dims: { T, K: 4096, N: 4096 }, init: [4096, 4096, false] })),
        ...llamaT.map((T) => ({ name: `llama3-8b-down-T${T}`, dtype: 'bf16' as const, dims: { T, K: 14336, N: 4096 }, init: [14336, 4096, false] })),
      ],
    },
  },
  {
    baseline: RowParallelLinear,
    makeInputs: gemmInputs,
    initParameters: (m, _c, rng) => initLinear(m, rng),
    collectOutputs: firstOutput,
    reference: (inputs, params, c) => linearRef(inputs, params, c.init[4] === true),
    work: (c) => gemmWork(c, c.dims.T!, c.dims.K!, c.dims.N!, c.init[2] !== false),
  },
);

export const qkvParallelLinearTask = defineTask(
  {
    id: 'L2/qkv_parallel_linear',
    level: 2,
    className: 'QKVParallelLinear',
    family: [DENSE_LLM_FAMILY],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    mirrors: `${LINEAR_MODULE}.QKVParallelLinear`,
    description: 'The fused q/k/v projection, split by attention heads (kv heads replicated when fewer than ranks). forward returns [qkv, outputBias].',
    init: [
      { name: 'hiddenSize', type: 'int', doc: 'H' },
      { name: 'headSize', type: 'int', doc: 'd' },
      { name: 'totalNumHeads', type: 'int', doc: 'Hq' },
      { name: 'totalNumKvHeads', type: 'int', optional: true, default: null, doc: 'Hkv (default Hq)' },
      { name: 'bias', type: 'bool', optional: true, default: true },
      { name: 'skipBiasAdd', type: 'bool', optional: true, default: false },
      { name: 'paramsDtype', type: 'dtype', optional: true, default: null },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'qkv', dtype: 'act', shape: ['T', 'N'], doc: 'N = (Hq + 2 Hkv) d at world 1' }],
    cases: {
      ci: [
        { name: 'small-gqa-f32', dtype: 'f32', dims: { T: 5, H: 64, N: 96 }, init: [64, 16, 4, 1] },
        { name: 'small-mha-bias-bf16', dtype: 'bf16', dims: { T: 3, H: 64, N: 96 }, init: [64, 8, 4, null, true] },
      ],
      production: llamaT.map((T) => ({ name: `llama3-8b-T${T}`, dtype: 'bf16' as const, dims: { T, H: 4096, N: 6144 }, init: [4096, 128, 32, 8, false] })),
    },
  },
  {
    baseline: QKVParallelLinear,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c)],
    initParameters: (m, _c, rng) => initLinear(m, rng),
    collectOutputs: firstOutput,
    reference: (inputs, params, c) => linearRef(inputs, params, c.init[5] === true),
    work: (c) => gemmWork(c, c.dims.T!, c.dims.H!, c.dims.N!, c.init[4] !== false),
  },
);

export const mergedColumnParallelLinearTask = defineTask(
  {
    id: 'L2/merged_column_parallel_linear',
    level: 2,
    className: 'MergedColumnParallelLinear',
    family: [DENSE_LLM_FAMILY],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    mirrors: `${LINEAR_MODULE}.MergedColumnParallelLinear`,
    description: "Several column-parallel projections of one input in one GEMM (gate_up_proj); each part split over the ranks. forward returns [output, outputBias].",
    init: [
      { name: 'inputSize', type: 'int', doc: 'K' },
      { name: 'outputSizes', type: 'object', doc: 'the parts\' output sizes (N = their sum)' },
      { name: 'bias', type: 'bool', optional: true, default: true },
      { name: 'gatherOutput', type: 'bool', optional: true, default: false },
      { name: 'skipBiasAdd', type: 'bool', optional: true, default: false },
      { name: 'paramsDtype', type: 'dtype', optional: true, default: null },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'K'] }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'N'] }],
    cases: {
      ci: [
        { name: 'small-gate-up-f32', dtype: 'f32', dims: { T: 3, K: 32, N: 80 }, init: [32, [40, 40], false] },
        { name: 'small-3-parts-bias-bf16', dtype: 'bf16', dims: { T: 4, K: 48, N: 72 }, init: [48, [16, 24, 32], true] },
      ],
      production: llamaT.map((T) => ({ name: `llama3-8b-gate-up-T${T}`, dtype: 'bf16' as const, dims: { T, K: 4096, N: 28672 }, init: [4096, [14336, 14336], false] })),
    },
  },
  {
    baseline: MergedColumnParallelLinear,
    makeInputs: gemmInputs,
    initParameters: (m, _c, rng) => initLinear(m, rng),
    collectOutputs: firstOutput,
    reference: (inputs, params, c) => linearRef(inputs, params, c.init[4] === true),
    work: (c) => gemmWork(c, c.dims.T!, c.dims.K!, c.dims.N!, c.init[2] !== false),
  },
);

/** The parallel_linear group. */
export const parallelLinearTasks = [columnParallelLinearTask, rowParallelLinearTask, qkvParallelLinearTask, mergedColumnParallelLinearTask] as const;

/** Every task of this package, L1 first (register all of them: RowParallelLinear imports L1/allreduce). */
export const tensorParallelTasks = [allreduceTask, ...parallelLinearTasks] as const;
