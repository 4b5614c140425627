import type { Tensor } from '@fastkernels/core';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import type { LlamaRopeScaling } from '../config.js';
import { LlamaAttention, type QkvParts } from './attention.js';

/**
 * vLLM's Qwen3MoeAttention (vllm/model_executor/models/qwen3_moe.py; HF's Qwen3MoeAttention): Llama's attention with
 * an RMSNorm over each head of q and of k (q_norm / k_norm, weight [head_dim], L1/rms_norm) after the projection and
 * before rotary. Everything else, the paged cache included, is LlamaAttention's. Not a task of its own (the original
 * lists none): the decoder layer builds it, and its children (projections, norms, rotary, cache, attention kernels)
 * resolve through the registry.
 */
export class Qwen3MoeAttention extends LlamaAttention {
  private readonly qNorm: RMSNorm;
  private readonly kNorm: RMSNorm;
  constructor(
    hiddenSize: number,
    numHeads: number,
    numKvHeads: number,
    ropeTheta: number,
    ropeScaling: LlamaRopeScaling | null,
    maxPositionEmbeddings: number,
    bias: boolean,
    headDim: number,
    readonly rmsNormEps: number,
    layerIdx: number,
  ) {
    super(hiddenSize, numHeads, numKvHeads, ropeTheta, ropeScaling, maxPositionEmbeddings, bias, false, headDim, 0, layerIdx);
    this.qNorm = this.createModule<RMSNorm>('q_norm', 'L1/rms_norm', this.headDim, rmsNormEps);
    this.kNorm = this.createModule<RMSNorm>('k_norm', 'L1/rms_norm', this.headDim, rmsNormEps);
  }

  /** q and k normalised per head, read in place as [T, heads, D] views of the projection (the norm reads two-level strided rows: no copy); v stays a view. */
  protected override prepareQkv(qkv: Tensor): QkvParts {
    const T = qkv.shape[0]!;
    const byHead = (part: Tensor, heads: number, norm: RMSNorm): Tensor => {
      const rows = part.view(T, heads, this.headDim);
      const normed = norm.forward(rows) as Tensor;
      const out = normed.view(T, heads * this.headDim);
      rows.dispose();
      normed.dispose();
      return out;
    };
    const { q, k, v } = super.prepareQkv(qkv);
    try {
      return { q: byHead(q, this.numLocalHeads, this.qNorm), k: byHead(k, this.numLocalKvHeads, this.kNorm), v };
    } finally {
      q.dispose();
      k.dispose();
    }
  }
}
