/**
 * The body every decoder LLM of the family shares (vLLM's LlamaModel.forward): embed the tokens, run the layers with the
 * residual threaded through them (each layer's input norm adds it: fused_add_rms_norm), then the final norm fused with
 * the last residual. Intermediates are released as soon as the next layer has consumed them.
 */
import type { Tensor } from '@fastkernels/core';

export interface StackEmbedding {
  forward(inputIds: Tensor): Tensor;
}
export interface StackLayer {
  forward(positions: Tensor, hiddenStates: Tensor, residual?: Tensor | null): [Tensor, Tensor];
}
export interface StackNorm {
  forward(x: Tensor, residual?: Tensor | null): Tensor | [Tensor, Tensor];
}

/** inputIds [T], positions [T] -> the final hidden states [T, H]. */
export function runDecoderStack(embedTokens: StackEmbedding, layers: readonly StackLayer[], norm: StackNorm, inputIds: Tensor, positions: Tensor): Tensor {
  let h = embedTokens.forward(inputIds);
  let residual: Tensor | null = null;
  for (const layer of layers) {
    const [h2, r2] = layer.forward(positions, h, residual);
    if (residual !== r2) residual?.dispose();
    if (h !== r2) h.dispose();
    h = h2;
    residual = r2;
  }
  const [out, sum] = norm.forward(h, residual) as [Tensor, Tensor];
  h.dispose();
  residual?.dispose();
  sum.dispose();
  return out;
}
