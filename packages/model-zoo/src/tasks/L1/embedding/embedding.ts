import { DTYPE_INFO, Module, currentTensorParallelGroup, defineTask, hostArray, vocabParallelSlice, type HostArray, type Tensor, type TensorParallelGroup } from '@fastkernels/core';
import { bytesOf, fromInts, initNormal } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/** The all-reduce as a module (layers/parallel's AllReduce, task L1/allreduce): forward(x) returns the group's sum of x. */
interface AllReduceModule extends Module {
  forward(x: Tensor): Tensor;
}

/**
 * vLLM's VocabParallelEmbedding: a row gather of the [V, H] table at token ids. vLLM pads V to a multiple of 64
 * (padding_size); Llama-3's 128256 is already one, and the padded rows are never read, so the parameter here is the
 * unpadded table (or this rank's rows of it).
 *
 * With a tensor-parallel group of world W > 1 that divides V (the rule of ParallelLMHead; a V that W does not divide
 * keeps the table replicated), rank r holds rows [r V / W, (r + 1) V / W) (weight [V / W, H], vLLM's
 * vocab_start_index / vocab_end_index) and forward is vLLM's: a masked local gather (ids of this shard read their row
 * id - start, others give zero rows: backend op embeddingMasked) and an all-reduce (sum) over the group, through the
 * registry's L1/allreduce when it is registered (child 'all_reduce', as RowParallelLinear's), else the group's
 * allReduce_. Exactly one rank contributes each row and the others add zeros, so every rank gets the W = 1 result bit
 * for bit. At W = 1 forward is the plain gather (ops.embedding), unchanged.
 */
export class VocabParallelEmbedding extends Module {
  readonly weight: Tensor;
  /** Whether this rank holds a vocabulary shard (else the whole table). */
  readonly vocabParallel: boolean;
  /** This rank's first row of the full table (0 when replicated) and how many rows it holds. */
  readonly vocabStartIndex: number;
  readonly numEmbeddingsPerPartition: number;
  private readonly group: TensorParallelGroup;
  private readonly allReduce: AllReduceModule | null;
  constructor(
    readonly numEmbeddings: number,
    readonly embeddingDim: number,
  ) {
    super();
    this.group = currentTensorParallelGroup();
    const { rank, world } = this.group;
    this.vocabParallel = world > 1 && numEmbeddings % world === 0;
    const shard = this.vocabParallel ? vocabParallelSlice(numEmbeddings, rank, world) : { start: 0, length: numEmbeddings };
    this.vocabStartIndex = shard.start;
    this.numEmbeddingsPerPartition = shard.length;
    this.weight = this.parameter('weight', [shard.length, embeddingDim]);
    this.allReduce = this.vocabParallel && this.ctx.registry.task('L1/allreduce') ? this.createModule<AllReduceModule>('all_reduce', 'L1/allreduce') : null;
  }

  forward(inputIds: Tensor): Tensor {
    const ops = this.ctx.backend.ops;
    if (!this.vocabParallel) return ops.embedding(inputIds, this.weight);
    const partial = ops.embeddingMasked(inputIds, this.weight, this.vocabStartIndex);
    if (!this.allReduce) return this.group.allReduce_(partial);
    const out = this.allReduce.forward(partial);
    partial.dispose();
    return out;
  }
}

/** Golden gather: ids [...] (integers in [0, V)) of weight [V, H] -> [..., H]. */
export function embeddingReference(ids: HostArray, weight: HostArray): HostArray {
  const [v, h] = weight.shape as [number, number];
  const out = hostArray([...ids.shape, h]);
  for (let t = 0; t < ids.data.length; t++) {
    const id = ids.data[t]!;
    if (!Number.isInteger(id) || id < 0 || id >= v) throw new RangeError(`embedding: id ${id} at ${t} outside [0, ${v})`);
    for (let j = 0; j < h; j++) out.data[t * h + j] = weight.data[id * h + j]!;
  }
  return out;
}

export const embeddingTask = defineTask(
  {
    id: 'L1/embedding',
    level: 1,
    className: 'VocabParallelEmbedding',
    family: [DENSE_MOE_LLM],
    architectures: ['llama', 'qwen2', 'mistral', 'mixtral', 'deepseek', 'glm', 'gemma4', 'gpt_oss', 'qwen3_next', 'jamba', 'kimi_linear', 'llama_eagle3', 'bitnet', 'llada', 'flux'],
    mirrors: 'vllm.model_executor.layers.vocab_parallel_embedding.VocabParallelEmbedding',
    description: 'Token embedding: gather rows of the [vocab, hidden] table at the token ids (no padding rows). Under tensor parallelism (W > 1 dividing the vocabulary) each rank holds V / W rows: a masked local gather, then an all-reduce.',
    init: [
      { name: 'numEmbeddings', type: 'int', doc: 'vocabulary size V' },
      { name: 'embeddingDim', type: 'int', doc: 'hidden size H' },
    ],
    inputs: [{ name: 'inputIds', dtype: 'i64', shape: ['T'], doc: 'token ids in [0, V)' }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'H'] }],
    cases: {
      ci: [
        { name: 'small', dtype: 'f32', dims: { T: 9, V: 100, H: 64 }, init: [100, 64] },
        { name: 'small-bf16', dtype: 'bf16', dims: { T: 13, V: 257, H: 96 }, init: [257, 96] },
        { name: 'repeated-ids', dtype: 'f32', dims: { T: 16, V: 5, H: 32 }, init: [5, 32] },
      ],
      production: [
        { name: 'llama3-8b-decode', dtype: 'bf16', dims: { T: 32, V: 128256, H: 4096 }, init: [128256, 4096] },
        { name: 'llama3-8b-prefill', dtype: 'bf16', dims: { T: 4096, V: 128256, H: 4096 }, init: [128256, 4096] },
        { name: 'llama3-8b-prefill-chunk', dtype: 'bf16', dims: { T: 512, V: 128256, H: 4096 }, init: [128256, 4096] },
      ],
    },
  },
  {
    baseline: VocabParallelEmbedding,
    makeInputs: (c, ctx, rng) => {
      const { T, V } = c.dims as { T: number; V: number };
      const ids = Array.from({ length: T }, () => rng.int(0, V));
      // Always touch the first and last rows (bounds of the table).
      if (T > 0) ids[0] = V - 1;
      if (T > 1) ids[T - 1] = 0;
      return [fromInts(ctx, ids, [T], 'i64')];
    },
    initParameters: (m, _c, rng) => initNormal(m, rng, 1),
    reference: ([ids], params) => [embeddingReference(ids!, params.get('weight')!)],
    work: (c) => {
      const { T, H } = c.dims as { T: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      // read ids (i64) and T table rows, write [T, H]; no arithmetic.
      return { bytes: bytesOf([T], 8) + 2 * bytesOf([T, H], it), flops: 0 };
    },
  },
);
