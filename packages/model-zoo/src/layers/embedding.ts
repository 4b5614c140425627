import { F, Module, type Tensor } from '@fastkernels/core';
import { positiveInt } from './linear.js';

/** torch.nn.Embedding(num_embeddings, embedding_dim, padding_idx=None): rows of weight [num, dim] at integer ids. */
export class Embedding extends Module {
  readonly weight: Tensor;
  readonly paddingIdx: number | null;
  constructor(
    readonly numEmbeddings: number,
    readonly embeddingDim: number,
    paddingIdx: number | null = null,
  ) {
    super();
    positiveInt('Embedding', 'num_embeddings', numEmbeddings);
    positiveInt('Embedding', 'embedding_dim', embeddingDim);
    if (paddingIdx !== null && (!Number.isInteger(paddingIdx) || paddingIdx >= numEmbeddings || paddingIdx < -numEmbeddings)) {
      throw new RangeError(`Embedding: padding_idx must be within num_embeddings (${numEmbeddings}), got ${paddingIdx}`);
    }
    // PyTorch stores a negative padding_idx as its positive index.
    this.paddingIdx = paddingIdx !== null && paddingIdx < 0 ? paddingIdx + numEmbeddings : paddingIdx;
    this.weight = this.parameter('weight', [numEmbeddings, embeddingDim]);
  }

  forward(ids: Tensor): Tensor {
    return F.embedding(ids, this.weight, this.paddingIdx);
  }
}
