/**
 * Task definitions of vLLM's tensor-parallel linear layers (layers/parallel/linear.ts), in the dense LLM family
 * (tasks/index.ts: tensorParallelProvider, registered by model-zoo's plugin, so `fastkernels list` shows them):
 *   L2/column_parallel_linear        ColumnParallelLinear        vllm.model_executor.layers.linear.*
 *   L2/row_parallel_linear           RowParallelLinear           (imports L1/allreduce: tasks/L1/collective/allreduce.ts)
 *   L2/qkv_parallel_linear           QKVParallelLinear
 *   L2/merged_column_parallel_linear MergedColumnParallelLinear
 * Every task declares worldSize 2: at world 1 the all-reduce is a copy and the layers are plain GEMMs, so a single
 * process cannot tell a good candidate from a copy. Every task has rank-aware cases (rankAwareCases), so `bench --tp 2`
 * (or bench under `fastkernels launch --nproc 2`) runs them in a process group of its bench workers, in lockstep: a
 * parallel linear layer's ranks build the layer at the group's world, load their shards of the same full seeded
 * weights and take the same full input (a row-parallel rank its slice of the input columns), and the reference is the
 * full, unsharded layer's output (a column-parallel rank's slice of its columns; see ShardPlan). At world 1 every case
 * is the unsharded layer and the reference the float64 x W^T + b. The layers need only core's tensor-parallel group.
 */
import {
  DTYPE_INFO,
  GOLDEN_MAX_NUMEL,
  Tensor,
  columnParallelSlice,
  currentTensorParallelGroup,
  defineTask,
  divide,
  hostArray,
  mergedColumnPieces,
  normalTensor,
  qkvLayout,
  qkvPieces,
  roundToDType,
  rowParallelSlice,
  type DType,
  type ExecutionContext,
  type HostArray,
  type Module,
  Rng,
  type ShardSlice,
  type TaskCase,
} from '@fastkernels/core';
import { ColumnParallelLinear, MergedColumnParallelLinear, QKVParallelLinear, RowParallelLinear } from '../../../layers/parallel/linear.js';
import { shardColumnParallel, shardMergedColumn, shardQkv, shardRowParallel, takeSlice } from '../../../layers/parallel/sharding.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { TP_ARCHS as ARCHS, TP_WORLD, llamaT } from '../../L1/collective/allreduce.js';

const LINEAR_MODULE = 'vllm.model_executor.layers.linear';

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

const firstOutput = (_args: readonly (Tensor | null)[], result: unknown): Tensor[] => [(result as [Tensor, Tensor | null])[0]];

/**
 * Rank-aware cases of the parallel linear layers: every rank builds the layer at the group's world (its shard), draws
 * the same full, seeded weights and loads its shard of them (the sharding helpers, as vLLM's weight loaders cut a
 * checkpoint), and draws the same full input: column-parallel layers take it whole (replicated), RowParallelLinear with
 * inputIsParallel takes its slice of the input columns (vLLM's input_is_parallel=True: the input is already split
 * along K), without it the whole input (the layer splits it). The float64 reference is the full, unsharded layer on the
 * full input and weights: a column-parallel rank's slice of the output columns (all of them with gatherOutput), a
 * RowParallelLinear's full output (all-reduced; with reduceResults=false the rank's own partial product). The harness
 * compares each rank's output with that, and the candidate with the baseline as ever. At world 1 all of it is the
 * unsharded layer (the shard is the whole), as before.
 */
interface ShardPlan {
  /** The full layer: weight [n, k], bias [n]. */
  readonly n: number;
  readonly k: number;
  readonly bias: boolean;
  readonly skipBiasAdd: boolean;
  readonly gatherOutput: boolean;
  /** The rank's rows of the full weight (its output columns); null: every row (row parallel). */
  readonly outPieces: readonly ShardSlice[] | null;
  readonly rowParallel: { readonly inputIsParallel: boolean; readonly reduceResults: boolean } | null;
  /** The rank's shard of a full weight / bias tensor (the sharding helpers). */
  shardWeight(full: Tensor): Tensor;
  shardBias(full: Tensor): Tensor;
}

type PlanOf = (c: TaskCase, rank: number, world: number) => ShardPlan;

const columnPlan: PlanOf = (c, rank, world) => {
  const n = c.init[1] as number;
  const shard = (t: Tensor) => shardColumnParallel(t, rank, world);
  return {
    n, k: c.init[0] as number, bias: c.init[2] !== false, gatherOutput: c.init[3] === true, skipBiasAdd: c.init[4] === true,
    outPieces: [columnParallelSlice(n, rank, world)], rowParallel: null, shardWeight: shard, shardBias: shard,
  };
};

const mergedPlan: PlanOf = (c, rank, world) => {
  const sizes = c.init[1] as number[];
  const shard = (t: Tensor) => shardMergedColumn(t, sizes, rank, world);
  return {
    n: sizes.reduce((a, b) => a + b, 0), k: c.init[0] as number, bias: c.init[2] !== false, gatherOutput: c.init[3] === true, skipBiasAdd: c.init[4] === true,
    outPieces: mergedColumnPieces(sizes, rank, world), rowParallel: null, shardWeight: shard, shardBias: shard,
  };
};

const qkvPlan: PlanOf = (c, rank, world) => {
  const [hidden, d, hq, hkv] = c.init as [number, number, number, number | null | undefined];
  const layout = qkvLayout(d, hq, hkv ?? null, world);
  const shard = (t: Tensor) => shardQkv(t, layout, rank);
  return {
    n: (hq + 2 * layout.totalNumKvHeads) * d, k: hidden, bias: c.init[4] !== false, gatherOutput: false, skipBiasAdd: c.init[5] === true,
    outPieces: qkvPieces(layout, rank), rowParallel: null, shardWeight: shard, shardBias: shard,
  };
};

const rowPlan: PlanOf = (c, rank, world) => ({
  n: c.init[1] as number, k: c.init[0] as number, bias: c.init[2] !== false, gatherOutput: false, skipBiasAdd: c.init[4] === true,
  outPieces: null, rowParallel: { inputIsParallel: c.init[3] !== false, reduceResults: c.init[6] !== false },
  shardWeight: (t) => shardRowParallel(t, rank, world),
  shardBias: (t) => t.clone(), // replicated
});

const planHere = (plan: PlanOf, c: TaskCase) => {
  const { rank, world } = currentTensorParallelGroup();
  return { rank, world, p: plan(c, rank, world) };
};

/** The full layer's weights (rounded to the parameters' dtype), for the golden reference at world > 1; small only. */
interface FullWeights {
  readonly weight: HostArray;
  readonly bias: HostArray | null;
}
/**
 * Keyed by the case's init array: initParameters runs once per case, and the harness's hidden-shape case (the case
 * with its token count changed) shares the array, so its reference finds the same weights.
 */
const fullWeights = new WeakMap<object, FullWeights>();
/** RowParallelLinear with inputIsParallel at world > 1: the full input drawn last for a case (each rank holds a slice). */
const fullInputs = new WeakMap<TaskCase, HostArray>();

const numelOf = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const roundedHost = (shape: number[], values: Float64Array, dtype: DType) => hostArray(shape, values.map((v) => roundToDType(v, dtype)));

/** Columns of the last dim of `a`, the pieces' [start, start + length) in order, concatenated. */
function lastDimPieces(a: HostArray, pieces: readonly ShardSlice[]): HostArray {
  const n = a.shape[a.shape.length - 1]!;
  const rows = n === 0 ? 0 : a.data.length / n;
  const width = pieces.reduce((s, p) => s + p.length, 0);
  const out = hostArray([...a.shape.slice(0, -1), width]);
  for (let m = 0; m < rows; m++) {
    let o = m * width;
    for (const p of pieces) {
      out.data.set(a.data.subarray(m * n + p.start, m * n + p.start + p.length), o);
      o += p.length;
    }
  }
  return out;
}

/**
 * Weight ~ N(0, 1/K) (outputs stay O(1)), bias ~ N(0, 0.25), drawn for the full layer (the same on every rank) and
 * this rank's shard loaded; at world 1 exactly the unsharded draw.
 */
function initShardedLinear(plan: PlanOf) {
  return (m: Module, c: TaskCase, rng: Rng): void => {
    const { world, p } = planHere(plan, c);
    const keep = world > 1 && p.n * p.k <= world * GOLDEN_MAX_NUMEL;
    let weight: HostArray | undefined;
    let bias: HostArray | null = null;
    for (const [name, param] of m.namedParameters()) {
      const isWeight = name.endsWith('weight');
      const shape = isWeight ? [p.n, p.k] : [p.n];
      const scale = isWeight ? 1 / Math.sqrt(Math.max(1, p.k)) : 0.5;
      // Host values only where the golden reference keeps them; else core's normalTensor (on the device for large
      // tensors: drawing an LM head on the host takes tens of seconds), the same on every rank.
      const values = keep ? rng.fillNormal(numelOf(shape), scale) : null;
      const full = values ? Tensor.fromArray(param.backend, values, shape, param.dtype, { device: param.device }) : normalTensor(param.backend, shape, param.dtype, rng, { scale, device: param.device });
      const shard = isWeight ? p.shardWeight(full) : p.shardBias(full);
      full.dispose();
      try {
        if (shard.shape.join() !== param.shape.join()) throw new RangeError(`${name}: the shard [${shard.shape.join(', ')}] does not fit the parameter [${param.shape.join(', ')}]`);
        param.copy_(shard);
      } finally {
        shard.dispose();
      }
      if (values && isWeight) weight = roundedHost(shape, values, param.dtype);
      else if (values) bias = roundedHost(shape, values, param.dtype);
    }
    if (weight) fullWeights.set(c.init, { weight, bias });
    else fullWeights.delete(c.init);
  };
}

/** The full input [T, K] on every rank; a row-parallel rank with inputIsParallel gets its slice of the columns. */
function shardedLinearInputs(plan: PlanOf) {
  return (c: TaskCase, ctx: ExecutionContext, rng: Rng): Tensor[] => {
    const { rank, world, p } = planHere(plan, c);
    const shape = [c.dims.T!, p.k];
    const sliced = Boolean(p.rowParallel?.inputIsParallel && world > 1);
    const keep = sliced && numelOf(shape) <= world * GOLDEN_MAX_NUMEL;
    const values = keep ? rng.fillNormal(numelOf(shape), 1) : null;
    const full = values ? Tensor.fromArray(ctx.backend, values, shape, c.dtype, { device: ctx.device }) : normalTensor(ctx.backend, shape, c.dtype, rng, { device: ctx.device });
    if (!sliced) return [full];
    if (values) fullInputs.set(c, roundedHost(shape, values, c.dtype));
    else fullInputs.delete(c);
    const mine = takeSlice(full, rowParallelSlice(p.k, rank, world));
    full.dispose();
    return [mine];
  };
}

/** The float64 reference of this rank's output (see ShardPlan). */
function shardedLinearReference(plan: PlanOf) {
  return (inputs: readonly (HostArray | null)[], params: ReadonlyMap<string, HostArray>, c: TaskCase): HostArray[] => {
    const { rank, world, p } = planHere(plan, c);
    const addBias = (b: HostArray | null | undefined) => (p.skipBiasAdd ? null : (b ?? null));
    const x = inputs[0]!;
    if (world === 1) return [linearReference(x, params.get('weight')!, addBias(params.get('bias')))];
    const rp = p.rowParallel;
    if (rp && !rp.reduceResults) {
      // no all-reduce: the rank's own partial product (the bias, if added at all, on rank 0)
      const mine = rp.inputIsParallel ? x : lastDimPieces(x, [rowParallelSlice(p.k, rank, world)]);
      return [linearReference(mine, params.get('weight')!, rank === 0 ? addBias(params.get('bias')) : null)];
    }
    const full = fullWeights.get(c.init);
    if (!full || full.weight.shape.join() !== `${p.n},${p.k}`) throw new Error(`the full layer's weights were not kept for case '${c.name}' (initParameters did not run here, or they are too large)`);
    const xFull = rp?.inputIsParallel ? fullInputs.get(c) : x;
    if (!xFull || xFull.shape[xFull.shape.length - 1] !== p.k || xFull.data.length !== (x.data.length / x.shape[x.shape.length - 1]!) * p.k) {
      throw new Error(`the full input of case '${c.name}' was not kept (too large, or the inputs were replaced)`);
    }
    const y = linearReference(xFull, full.weight, addBias(full.bias));
    return [p.outPieces && !p.gatherOutput ? lastDimPieces(y, p.outPieces) : y];
  };
}

/**
 * Bytes and FLOPs of this rank's part (the physical floor is per rank): its GEMM over its shard, the output it writes
 * (the gathered output with gatherOutput; the all-reduced output of a row-parallel layer), the bias where it is added.
 * The collectives' traffic is not counted (a lower bound). At world 1 the unsharded GEMM's.
 */
function shardedLinearWork(plan: PlanOf) {
  return (c: TaskCase) => {
    const { rank, world, p } = planHere(plan, c);
    const it = DTYPE_INFO[c.dtype].itemsize;
    const T = c.dims.T!;
    if (p.rowParallel) {
      const k = divide(p.k, world, 'input size');
      const bias = p.bias && rank === 0;
      return { bytes: (T * k + p.n * k + (bias ? p.n : 0) + T * p.n) * it, flops: 2 * T * p.n * k + (bias ? T * p.n : 0) };
    }
    const n = p.outPieces!.reduce((s, q) => s + q.length, 0);
    return { bytes: (T * p.k + n * p.k + (p.bias ? n : 0) + T * (p.gatherOutput ? p.n : n)) * it, flops: 2 * T * n * p.k + (p.bias ? T * n : 0) };
  };
}

/** A parallel linear task's behaviour, from its shard plan. */
function shardedLinear(plan: PlanOf) {
  return {
    makeInputs: shardedLinearInputs(plan),
    initParameters: initShardedLinear(plan),
    collectOutputs: firstOutput,
    reference: shardedLinearReference(plan),
    work: shardedLinearWork(plan),
  };
}

export const columnParallelLinearTask = defineTask(
  {
    id: 'L2/column_parallel_linear',
    level: 2,
    className: 'ColumnParallelLinear',
    family: [DENSE_MOE_LLM],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    rankAwareCases: true,
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
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'N'], doc: 'output [0] of forward (this rank\'s N / world columns, or all of them with gatherOutput)' }],
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
    ...shardedLinear(columnPlan),
  },
);

export const rowParallelLinearTask = defineTask(
  {
    id: 'L2/row_parallel_linear',
    level: 2,
    className: 'RowParallelLinear',
    family: [DENSE_MOE_LLM],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    rankAwareCases: true,
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
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'K'], doc: "this rank's input columns, [T, K / world] (all K of them with inputIsParallel=false)" }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'N'], doc: 'the all-reduced output on every rank (with reduceResults=false: this rank\'s partial product)' }],
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
    ...shardedLinear(rowPlan),
  },
);

export const qkvParallelLinearTask = defineTask(
  {
    id: 'L2/qkv_parallel_linear',
    level: 2,
    className: 'QKVParallelLinear',
    family: [DENSE_MOE_LLM],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    rankAwareCases: true,
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
    outputs: [{ name: 'qkv', dtype: 'act', shape: ['T', 'N'], doc: "N = (Hq + 2 Hkv) d at world 1; this rank's q, k and v heads' columns in a group" }],
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
    ...shardedLinear(qkvPlan),
  },
);

export const mergedColumnParallelLinearTask = defineTask(
  {
    id: 'L2/merged_column_parallel_linear',
    level: 2,
    className: 'MergedColumnParallelLinear',
    family: [DENSE_MOE_LLM],
    architectures: ARCHS,
    worldSize: TP_WORLD,
    rankAwareCases: true,
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
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'N'], doc: 'this rank\'s N / world columns (each part\'s slice, in part order), or all of them with gatherOutput' }],
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
    ...shardedLinear(mergedPlan),
  },
);

/** The parallel_linear group. */
export const parallelLinearTasks = [columnParallelLinearTask, rowParallelLinearTask, qkvParallelLinearTask, mergedColumnParallelLinearTask] as const;
