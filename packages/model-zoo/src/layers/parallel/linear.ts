/**
 * vLLM's tensor-parallel linear layers (vllm.model_executor.layers.linear) and the all-reduce as a module.
 * Constructor arguments follow vLLM's in order (quant_config, prefix and the keyword-only return_bias /
 * disable_tp are not mirrored: forward always returns [output, outputBias] as vLLM's does with return_bias=True,
 * and the group is the current TensorParallelGroup when the layer is built). Parameters are this rank's shards,
 * named weight / bias like vLLM's; weightLoader(param, fullTensor, shardId?) fills them from checkpoint tensors.
 * At world 1 every layer is exactly a Linear. The layers need only core's tensor-parallel group contract
 * (TensorParallelGroup over any Collectives: backend-nccl's NcclCommunicator, HostCollectives, a test's fake).
 */
import { Module, currentTensorParallelGroup, divide, mergedColumnPartPiece, qkvLayout, qkvPartPiece, type DType, type QkvLayout, type Tensor, type TensorParallelGroup } from '@fastkernels/core';
import { shardColumnParallel, shardMergedColumn, shardQkv, shardRowParallel, takeSlice } from './sharding.js';

/**
 * vLLM's tensor_model_parallel_all_reduce as a module (task L1/allreduce): forward(x) returns a new tensor holding
 * the sum of x over the group (out of place, like vLLM's custom all-reduce; at world 1 a copy of x).
 */
export class AllReduce extends Module {
  protected readonly group: TensorParallelGroup;
  constructor() {
    super();
    this.group = currentTensorParallelGroup();
  }

  forward(x: Tensor): Tensor {
    const out = x.clone();
    return this.group.allReduce_(out);
  }
}

type WeightName = 'weight' | 'bias';

abstract class ParallelLinearBase extends Module {
  readonly weight: Tensor;
  readonly bias: Tensor | null;
  protected readonly group: TensorParallelGroup;
  readonly tpRank: number;
  readonly tpSize: number;

  protected constructor(weightShape: [number, number], biasSize: number | null, paramsDtype: DType | null) {
    super();
    this.group = currentTensorParallelGroup();
    this.tpRank = this.group.rank;
    this.tpSize = this.group.world;
    const dtype = paramsDtype ?? this.ctx.dtype;
    this.weight = this.parameter('weight', weightShape, dtype);
    this.bias = biasSize === null ? null : this.parameter('bias', [biasSize], dtype);
  }

  protected param(name: WeightName): Tensor {
    const p = name === 'weight' ? this.weight : this.bias;
    if (!p) throw new Error(`${this.constructor.name}: no ${name} (built with bias=false)`);
    return p;
  }

  /** Copy a shard into a parameter, checking its shape. */
  protected fill(name: WeightName, shard: Tensor, rows?: [number, number]): void {
    const p = this.param(name);
    const dst = rows ? p.narrow(0, rows[0], rows[1]) : p;
    if (dst.shape.join() !== shard.shape.join()) throw new RangeError(`${this.constructor.name}.${name}: shard [${shard.shape.join(', ')}] does not fit [${dst.shape.join(', ')}]`);
    dst.copy_(shard);
    if (dst !== p) dst.dispose();
  }
}

/**
 * vLLM ColumnParallelLinear: Y = X A^T + b with A split along its output rows: weight [outputSize / tp, inputSize],
 * bias [outputSize / tp]. gatherOutput all-gathers Y along the last dim. forward returns [Y, bias-if-skipBiasAdd].
 */
export class ColumnParallelLinear extends ParallelLinearBase {
  readonly outputSizePerPartition: number;
  readonly outputPartitionSizes: readonly number[];
  readonly outputSizes: readonly number[] | null;

  constructor(
    readonly inputSize: number,
    readonly outputSize: number,
    bias = true,
    readonly gatherOutput = false,
    readonly skipBiasAdd = false,
    paramsDtype: DType | null = null,
    outputSizes: readonly number[] | null = null,
  ) {
    const tp = currentTensorParallelGroup().world;
    const perPartition = divide(outputSize, tp, 'output size');
    super([perPartition, inputSize], bias ? perPartition : null, paramsDtype);
    this.outputSizePerPartition = perPartition;
    this.outputSizes = outputSizes ? [...outputSizes] : null;
    this.outputPartitionSizes = outputSizes ? outputSizes.map((n) => divide(n, tp, 'output part')) : [perPartition];
  }

  forward(x: Tensor): [Tensor, Tensor | null] {
    const bias = this.skipBiasAdd ? null : this.bias;
    const outputParallel = this.ctx.backend.ops.linear(x, this.weight, bias);
    let output = outputParallel;
    if (this.gatherOutput && this.tpSize > 1) {
      output = this.group.allGather(outputParallel, -1);
      outputParallel.dispose();
    }
    return [output, this.skipBiasAdd ? this.bias : null];
  }

  /** vLLM weight_loader: `loaded` is the full checkpoint tensor; this rank's rows are copied in. */
  weightLoader(param: WeightName, loaded: Tensor): void {
    const shard = shardColumnParallel(loaded, this.tpRank, this.tpSize);
    this.fill(param, shard);
    shard.dispose();
  }
}

/**
 * vLLM MergedColumnParallelLinear: several column-parallel projections of one input fused in one GEMM
 * (Llama's gate_up_proj). Each part is split over the ranks; this rank's rows are [part0_r; part1_r; ...].
 */
export class MergedColumnParallelLinear extends ColumnParallelLinear {
  constructor(inputSize: number, outputSizes: readonly number[], bias = true, gatherOutput = false, skipBiasAdd = false, paramsDtype: DType | null = null) {
    if (outputSizes.length === 0 || outputSizes.some((n) => !Number.isInteger(n) || n <= 0)) throw new RangeError(`MergedColumnParallelLinear: bad outputSizes [${outputSizes.join(', ')}]`);
    super(inputSize, outputSizes.reduce((a, b) => a + b, 0), bias, gatherOutput, skipBiasAdd, paramsDtype, outputSizes);
  }

  /**
   * vLLM weight_loader(param, loaded_weight, loaded_shard_id): with a shard id, `loaded` is the full part `shardId`
   * (e.g. gate_proj = 0, up_proj = 1); without, the full merged tensor.
   */
  override weightLoader(param: WeightName, loaded: Tensor, shardId?: number): void {
    const sizes = this.outputSizes!;
    if (shardId === undefined) {
      const shard = shardMergedColumn(loaded, sizes, this.tpRank, this.tpSize);
      this.fill(param, shard);
      shard.dispose();
      return;
    }
    const piece = mergedColumnPartPiece(sizes, shardId, this.tpRank, this.tpSize);
    const shard = takeSlice(loaded, piece);
    this.fill(param, shard, [piece.rowOffset, piece.length]);
    shard.dispose();
  }
}

/**
 * vLLM QKVParallelLinear: the q, k and v projections fused, split by heads. Per rank: numHeads = totalNumHeads / tp
 * q heads and numKvHeads kv heads (kv heads are replicated when there are fewer than tp). Weight rows [q_r; k_r; v_r].
 */
export class QKVParallelLinear extends ColumnParallelLinear {
  readonly headSize: number;
  readonly totalNumHeads: number;
  readonly totalNumKvHeads: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly numKvHeadReplicas: number;
  readonly layout: QkvLayout;

  constructor(
    readonly hiddenSize: number,
    headSize: number,
    totalNumHeads: number,
    totalNumKvHeads: number | null = null,
    bias = true,
    skipBiasAdd = false,
    paramsDtype: DType | null = null,
  ) {
    const tp = currentTensorParallelGroup().world;
    const layout = qkvLayout(headSize, totalNumHeads, totalNumKvHeads, tp);
    const outputSizes = [layout.numHeads * headSize * tp, layout.numKvHeads * headSize * tp, layout.numKvHeads * headSize * tp];
    super(hiddenSize, (layout.numHeads + 2 * layout.numKvHeads) * tp * headSize, bias, false, skipBiasAdd, paramsDtype, outputSizes);
    this.layout = layout;
    this.headSize = headSize;
    this.totalNumHeads = totalNumHeads;
    this.totalNumKvHeads = layout.totalNumKvHeads;
    this.numHeads = layout.numHeads;
    this.numKvHeads = layout.numKvHeads;
    this.numKvHeadReplicas = layout.numKvHeadReplicas;
  }

  /**
   * vLLM weight_loader: shardId 'q' | 'k' | 'v' with the full q_proj / k_proj / v_proj tensor, or none with the full
   * fused [(Hq + 2 Hkv) d, H] tensor.
   */
  override weightLoader(param: WeightName, loaded: Tensor, shardId?: 'q' | 'k' | 'v' | number): void {
    if (shardId === undefined) {
      const shard = shardQkv(loaded, this.layout, this.tpRank);
      this.fill(param, shard);
      shard.dispose();
      return;
    }
    const id = shardId === 'q' || shardId === 0 ? 'q' : shardId === 'k' || shardId === 1 ? 'k' : shardId === 'v' || shardId === 2 ? 'v' : undefined;
    if (!id) throw new RangeError(`QKVParallelLinear: shard id ${String(shardId)} (q, k or v)`);
    const piece = qkvPartPiece(this.layout, id, this.tpRank);
    const shard = takeSlice(loaded, piece);
    this.fill(param, shard, [piece.rowOffset, piece.length]);
    shard.dispose();
  }
}

/**
 * vLLM RowParallelLinear: Y = X A^T + b with A split along its input columns: weight [outputSize, inputSize / tp],
 * bias [outputSize] (whole; added on rank 0 only, before the all-reduce). inputIsParallel=false splits X here;
 * reduceResults all-reduces the partial products (through the registry's L1/allreduce when it is registered,
 * so a candidate all-reduce is used wherever the baseline would have been).
 */
export class RowParallelLinear extends ParallelLinearBase {
  readonly inputSizePerPartition: number;
  private readonly allReduce: AllReduce | null;

  constructor(
    readonly inputSize: number,
    readonly outputSize: number,
    bias = true,
    readonly inputIsParallel = true,
    readonly skipBiasAdd = false,
    paramsDtype: DType | null = null,
    readonly reduceResults = true,
  ) {
    const tp = currentTensorParallelGroup().world;
    const perPartition = divide(inputSize, tp, 'input size');
    super([outputSize, perPartition], bias ? outputSize : null, paramsDtype);
    this.inputSizePerPartition = perPartition;
    if (!reduceResults && bias && !skipBiasAdd) {
      throw new RangeError('RowParallelLinear: when reduceResults is false, adding the bias would be wrong (vLLM refuses it too): use skipBiasAdd');
    }
    this.allReduce = reduceResults && tp > 1 ? (this.ctx.registry.task('L1/allreduce') ? this.createModule<AllReduce>('all_reduce', 'L1/allreduce') : new AllReduce()) : null;
  }

  forward(x: Tensor): [Tensor, Tensor | null] {
    const xParallel = this.inputIsParallel ? x : this.group.split(x, -1);
    // Only rank 0 adds the bias, so it is not added tp times by the reduction.
    const bias = this.tpRank > 0 || this.skipBiasAdd ? null : this.bias;
    const outputParallel = this.ctx.backend.ops.linear(xParallel, this.weight, bias);
    if (xParallel !== x) xParallel.dispose();
    let output = outputParallel;
    if (this.allReduce) {
      output = this.allReduce.forward(outputParallel);
      outputParallel.dispose();
    }
    return [output, this.skipBiasAdd ? this.bias : null];
  }

  /** vLLM weight_loader: the weight's input columns are split; the bias is copied whole. */
  weightLoader(param: WeightName, loaded: Tensor): void {
    if (param === 'bias') return this.fill('bias', loaded);
    const shard = shardRowParallel(loaded, this.tpRank, this.tpSize);
    this.fill('weight', shard);
    shard.dispose();
  }
}
