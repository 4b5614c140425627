import { defineTask, type Tensor } from '@fastkernels/core';
import { MOE_TOKENS } from '../../../tasks/L1/moe/shapes.js';
import { GPT_OSS_120B_CONFIG, GPT_OSS_20B_CONFIG, GPT_OSS_SWIGLU_ALPHA } from '../gpt-oss/config.js';
import { MXFP4_MOE_BEHAVIOUR, MXFP4_MOE_META, Mxfp4MoE, gptOssMxfp4Case, mxfp4MoeCase } from './mxfp4_moe.js';

/**
 * FlashInfer's trtllm-gen MXFP4 MoE as vLLM runs gpt-oss with it (trtllm_fp4_block_scale_moe with MXFP4 weights,
 * routing inside): router logits [T, E] f32 -> Renormalize routing (top-k logits, softmax over the k) -> gate_up with
 * bias, gpt-oss's clamped SwiGLU (alpha, limit), down with bias, weighted sum; weights under the checkpoint's MXFP4
 * names (gate_up_proj_blocks / _scales / _bias, down_proj_blocks / _scales / _bias). Activations stay bf16 (the
 * bf16 x MXFP4 form; vLLM's mxfp8-activation variant quantises them first). The baseline is our Mxfp4MoE (MXFP4 grouped
 * GEMMs on the registry's mxfp4_grouped_gemm), so this task differs from L2/mxfp4_moe only in the interface it names.
 * Constructor: (numExperts, topK, hiddenSize, intermediateSize, swigluLimit, swigluAlpha).
 * forward(hiddenStates [T, H], routerLogits f32 [T, E]) -> [T, H].
 */
export class TrtLlmMxfp4MoE extends Mxfp4MoE {
  constructor(numExperts: number, topK: number, hiddenSize: number, intermediateSize: number, swigluLimit = 7, swigluAlpha = GPT_OSS_SWIGLU_ALPHA) {
    super(numExperts, topK, hiddenSize, intermediateSize, swigluLimit, swigluAlpha);
  }

  override forward(hiddenStates: Tensor, routerLogits: Tensor): Tensor {
    return super.forward(hiddenStates, routerLogits);
  }
}

export const trtllmMxfp4MoeTask = defineTask(
  {
    id: 'L2/trtllm_mxfp4_moe',
    className: 'TrtLlmMxfp4MoE',
    mirrors: 'flashinfer.fused_moe.trtllm_fp4_block_scale_moe',
    description:
      "FlashInfer trtllm-gen MXFP4 MoE (gpt-oss) with routing inside: router logits -> Renormalize top-k -> MXFP4 gate_up + bias, clamped SwiGLU, MXFP4 down + bias -> weighted sum.",
    ...MXFP4_MOE_META,
    cases: {
      ci: [
        mxfp4MoeCase('top4-of-8-f32', 'f32', 7, 64, 32, 8, 4),
        mxfp4MoeCase('top2-of-4-decode-bf16', 'bf16', 1, 32, 64, 4, 2),
      ],
      production: [...MOE_TOKENS.map((T) => gptOssMxfp4Case(GPT_OSS_20B_CONFIG, 'gpt-oss-20b', T)), ...MOE_TOKENS.map((T) => gptOssMxfp4Case(GPT_OSS_120B_CONFIG, 'gpt-oss-120b', T))],
    },
  },
  { baseline: TrtLlmMxfp4MoE, ...MXFP4_MOE_BEHAVIOUR },
);
