import { DTYPE_INFO, Module, currentTensorParallelGroup, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { LLAMA3_8B } from '../config.js';
import { FAMILY } from '../family.js';
import { project, type Projection } from '../projection.js';
import { denseLinear } from '../reference.js';
import { initProjections } from './attention.js';

/**
 * vLLM's ParallelLMHead (a VocabParallelEmbedding whose weight [V, H] the LogitsProcessor applies as
 * hidden @ W^T) at tp_size 1, the L2 wrapper of the vocab-parallel embedding's LM-head side. The GEMM is
 * L1/linear (child 'linear', weight [V, H]); forward(hiddenStates [T, H]) -> logits [T, V] in the model dtype
 * (vLLM's LogitsProcessor._get_logits; the sampler converts to float32). Tied embeddings (qwen2 small models):
 * the weight loader fills this weight from model.embed_tokens.weight (lm_head.weight is absent then).
 *
 * With a tensor-parallel group of world W > 1 that divides V, the vocabulary is split as vLLM's is: the child is
 * L2/column_parallel_linear with gatherOutput (weight [V / W, H] per rank), and its all-gather gives every rank the
 * full logits (vLLM's LogitsProcessor gathers them), so every rank samples the same token from the same values and
 * no broadcast of tokens is needed. A vocabulary W does not divide keeps a replicated head (L1/linear).
 */
export class ParallelLMHead extends Module {
  private readonly linear: Projection;
  /** Whether this rank holds a vocabulary shard (else the whole head). */
  readonly vocabParallel: boolean;
  constructor(
    readonly numEmbeddings: number,
    readonly embeddingDim: number,
    readonly bias = false,
  ) {
    super();
    const world = currentTensorParallelGroup().world;
    this.vocabParallel = world > 1 && numEmbeddings % world === 0;
    this.linear = this.vocabParallel
      ? this.createModule('linear', 'L2/column_parallel_linear', embeddingDim, numEmbeddings, bias, true)
      : this.createModule('linear', 'L1/linear', embeddingDim, numEmbeddings, bias);
  }

  forward(hiddenStates: Tensor): Tensor {
    return project(this.linear, hiddenStates);
  }
}

const L8 = LLAMA3_8B;

export const parallelEmbeddingTask = defineTask(
  {
    id: 'L2/parallel_embedding',
    level: 2,
    className: 'ParallelLMHead',
    family: [FAMILY],
    architectures: ['llama', 'qwen2', 'mistral'],
    mirrors: 'vllm.model_executor.layers.vocab_parallel_embedding.ParallelLMHead',
    description: 'LM head: logits = hidden @ W^T over the vocabulary (weight [V, H], tied to the embedding in some models), for the last token of each sequence.',
    init: [
      { name: 'numEmbeddings', type: 'int', doc: 'vocabulary size V' },
      { name: 'embeddingDim', type: 'int', doc: 'hidden size H' },
      { name: 'bias', type: 'bool', optional: true, default: false },
    ],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['B', 'H'], doc: 'final-norm hidden state of the last token of each sequence' }],
    outputs: [{ name: 'logits', dtype: 'act', shape: ['B', 'V'] }],
    imports: ['L1/linear'],
    cases: {
      ci: [
        { name: 'small-f32', dtype: 'f32', dims: { B: 4, H: 64, V: 256 }, init: [256, 64] },
        { name: 'small-bf16', dtype: 'bf16', dims: { B: 3, H: 64, V: 300 }, init: [300, 64] },
      ],
      production: [
        { name: 'llama3-8b-b1', dtype: 'bf16', dims: { B: 1, H: L8.hiddenSize, V: L8.vocabSize }, init: [L8.vocabSize, L8.hiddenSize] },
        { name: 'llama3-8b-b32', dtype: 'bf16', dims: { B: 32, H: L8.hiddenSize, V: L8.vocabSize }, init: [L8.vocabSize, L8.hiddenSize] },
        { name: 'llama3-8b-b256', dtype: 'bf16', dims: { B: 256, H: L8.hiddenSize, V: L8.vocabSize }, init: [L8.vocabSize, L8.hiddenSize] },
      ],
    },
  },
  {
    baseline: ParallelLMHead,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initProjections(m, rng),
    reference: ([h], params) => {
      const w = params.get('linear.weight')!;
      return [hostArray([h!.shape[0]!, w.shape[0]!], denseLinear(h!.data, h!.shape[0]!, w, params.get('linear.bias')))];
    },
    work: (c) => {
      const { B, H, V } = c.dims as { B: number; H: number; V: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([V, H], it) + bytesOf([B, H], it) + bytesOf([B, V], it), flops: 2 * B * H * V };
    },
  },
);
