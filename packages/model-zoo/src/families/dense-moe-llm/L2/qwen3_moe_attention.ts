import { F, type Tensor } from '@fastkernels/core';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import type { LlamaRopeScaling } from '../config.js';
import { LlamaAttention } from './attention.js';

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

  protected override prepareQkv(qkv: Tensor): Tensor {
    const T = qkv.shape[0]!;
    const D = this.headDim;
    const byHead = (start: number, heads: number, norm: RMSNorm): Tensor => {
      const part = qkv.narrow(1, start, heads * D);
      const flat = part.contiguous();
      const rows = flat.view(T * heads, D);
      const normed = norm.forward(rows) as Tensor;
      const out = normed.view(T, heads * D);
      for (const t of [part, flat, rows, normed]) t.dispose();
      return out;
    };
    const q = byHead(0, this.numLocalHeads, this.qNorm);
    const k = byHead(this.qSize, this.numLocalKvHeads, this.kNorm);
    const v = qkv.narrow(1, this.qSize + this.kvSize, this.kvSize);
    const out = F.cat([q, k, v], 1);
    for (const t of [q, k, v]) t.dispose();
    return out;
  }
}
