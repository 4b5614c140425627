import { defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';
import { MOE_TOKENS } from '../../../tasks/L1/moe/shapes.js';
import { GPT_OSS_120B_CONFIG, GPT_OSS_20B_CONFIG, GPT_OSS_SWIGLU_ALPHA, type GptOssConfig } from '../gpt-oss/config.js';
import { gptOssExperts } from '../gpt-oss/reference.js';
import { gptOssMoeWork, initGptOssMoeParameters } from './gpt_oss_moe.js';
import { Mxfp4MoE } from './mxfp4_moe.js';

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

const mxCase = (name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number, limit = 7) => ({ name, dtype, dims: { T, H, I, E, K }, init: [E, K, H, I, limit] });
const prod = (c: GptOssConfig, label: string, T: number) => mxCase(`${label}-T${T}`, 'bf16', T, c.hiddenSize, c.intermediateSize, c.numLocalExperts, c.numExpertsPerTok, c.swigluLimit);

export const trtllmMxfp4MoeTask = defineTask(
  {
    id: 'L2/trtllm_mxfp4_moe',
    level: 2,
    className: 'TrtLlmMxfp4MoE',
    family: [FAMILY],
    architectures: ['gpt_oss'],
    mirrors: 'flashinfer.fused_moe.trtllm_fp4_block_scale_moe',
    description:
      "FlashInfer trtllm-gen MXFP4 MoE (gpt-oss) with routing inside: router logits -> Renormalize top-k -> MXFP4 gate_up + bias, clamped SwiGLU, MXFP4 down + bias -> weighted sum.",
    init: [
      { name: 'numExperts', type: 'int' },
      { name: 'topK', type: 'int' },
      { name: 'hiddenSize', type: 'int', doc: 'a multiple of 32 (the MXFP4 block)' },
      { name: 'intermediateSize', type: 'int', doc: 'a multiple of 32' },
      { name: 'swigluLimit', type: 'float', optional: true, default: 7 },
      { name: 'swigluAlpha', type: 'float', optional: true, default: 1.702 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] },
      { name: 'routerLogits', dtype: 'f32', shape: ['T', 'E'], doc: 'the router linear, float32 (data-dependent routing)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/topk_softmax'],
    cases: {
      ci: [
        mxCase('top4-of-8-f32', 'f32', 7, 64, 32, 8, 4),
        mxCase('top2-of-4-decode-bf16', 'bf16', 1, 32, 64, 4, 2),
      ],
      production: [...MOE_TOKENS.map((T) => prod(GPT_OSS_20B_CONFIG, 'gpt-oss-20b', T)), ...MOE_TOKENS.map((T) => prod(GPT_OSS_120B_CONFIG, 'gpt-oss-120b', T))],
    },
  },
  {
    baseline: TrtLlmMxfp4MoE,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype), randn(ctx, rng, [c.dims.T!, c.dims.E!], 'f32', 3)],
    initParameters: (m, _c, rng) => initGptOssMoeParameters(m, rng),
    reference: ([x, logits], params, c) => [
      hostArray(x!.shape, gptOssExperts(x!.data, logits!.data, x!.shape[0]!, params, '', c.init[1] as number, (c.init[4] as number | undefined) ?? 7, (c.init[5] as number | undefined) ?? GPT_OSS_SWIGLU_ALPHA)),
    ],
    work: (c) => {
      const [E, K, H, I] = c.init as [number, number, number, number];
      return gptOssMoeWork({ dtype: c.dtype, dims: c.dims, init: [H, E, K, I, 7, 'mxfp4'] });
    },
  },
);
