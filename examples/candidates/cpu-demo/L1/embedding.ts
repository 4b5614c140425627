// An embedding that THROWS: it reads the int64 token ids through a BigInt64Array and then does
// arithmetic mixing BigInt and number, which JavaScript refuses with a TypeError at run time.
// Expected: RUNTIME_ERROR ("Cannot mix BigInt and other types").
import { Module, Tensor } from '@fastkernels/core';

export class VocabParallelEmbedding extends Module {
  readonly weight: Tensor;

  constructor(
    readonly numEmbeddings: number,
    readonly embeddingDim: number,
  ) {
    super();
    this.weight = this.parameter('weight', [numEmbeddings, embeddingDim]);
  }

  forward(inputIds: Tensor): Tensor {
    const bytes = inputIds.contiguous().toHostBytes();
    const ids = new BigInt64Array(bytes.buffer, bytes.byteOffset, inputIds.numel);
    const table = this.weight.toFloat64Array();
    const H = this.embeddingDim;
    const out = new Float64Array(ids.length * H);
    for (let t = 0; t < ids.length; t++) {
      const row = (ids[t] as unknown as number) * H; // bug: a bigint times a number throws
      out.set(table.subarray(row, row + H), t * H);
    }
    return Tensor.fromArray(this.ctx.backend, out, [...inputIds.shape, H], this.weight.dtype, { device: inputIds.device });
  }
}
