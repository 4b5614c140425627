import { defineTask, hostArray, type TaskBehaviour, type TaskMetaInput, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';
import { MOE_TOKENS } from '../../../tasks/L1/moe/shapes.js';
import { GPT_OSS_120B_CONFIG, GPT_OSS_20B_CONFIG, GPT_OSS_SWIGLU_ALPHA, type GptOssConfig } from '../gpt-oss/config.js';
import { gptOssExperts } from '../gpt-oss/reference.js';
import { GptOssExperts, gptOssMoeWork, initGptOssMoeParameters } from './gpt_oss_moe.js';

/**
 * vLLM's MXFP4 MoE (Mxfp4MoEMethod over gpt_oss_triton_kernels_moe; the original's Mxfp4MoE): gpt-oss's experts with
 * MXFP4 weights under the checkpoint's names (gate_up_proj_blocks u8 [E, 2I, H/32, 16] / _scales [E, 2I, H/32],
 * down_proj_blocks [E, H, I/32, 16] / _scales [E, H, I/32], gate_up_proj_bias [E, 2I], down_proj_bias [E, H]),
 * routed from the router's logits: top-k + softmax over the k, gate_up (mxfp4_grouped_gemm) + bias, the clamped SwiGLU,
 * down + bias, weighted sum (GptOssExperts' forward). L2/gpt_oss_moe builds it for MXFP4 checkpoints.
 * Constructor: (numExperts, topK, hiddenSize, intermediateSize, swigluLimit, swigluAlpha).
 * forward(hiddenStates [T, H], routerLogits f32 [T, E]) -> [T, H].
 */
export class Mxfp4MoE extends GptOssExperts {
  constructor(numExperts: number, topK: number, hiddenSize: number, intermediateSize: number, swigluLimit = 7, swigluAlpha = GPT_OSS_SWIGLU_ALPHA) {
    super(numExperts, topK, hiddenSize, intermediateSize, swigluLimit, 'mxfp4', swigluAlpha);
  }

  override forward(hiddenStates: Tensor, routerLogits: Tensor): Tensor {
    return super.forward(hiddenStates, routerLogits);
  }
}

/** A case: T tokens of hidden size H through E experts of intermediate size I, top K; swigluAlpha only when given. */
export function mxfp4MoeCase(name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number, limit = 7, alpha?: number) {
  return { name, dtype, dims: { T, H, I, E, K }, init: alpha === undefined ? [E, K, H, I, limit] : [E, K, H, I, limit, alpha] };
}
/** A gpt-oss model's experts at T tokens (bf16). */
export const gptOssMxfp4Case = (c: GptOssConfig, label: string, T: number) =>
  mxfp4MoeCase(`${label}-T${T}`, 'bf16', T, c.hiddenSize, c.intermediateSize, c.numLocalExperts, c.numExpertsPerTok, c.swigluLimit);

/**
 * What L2/mxfp4_moe and the tasks naming another library's interface to the same computation (L2/trtllm_mxfp4_moe)
 * share: the constructor's and forward's arguments, the tolerance, and (MXFP4_MOE_BEHAVIOUR) inputs, parameters,
 * reference and work.
 */
export const MXFP4_MOE_META = {
  level: 2,
  family: [FAMILY],
  architectures: ['gpt_oss'],
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
} satisfies Partial<TaskMetaInput>;

export const MXFP4_MOE_BEHAVIOUR: Omit<TaskBehaviour, 'baseline'> = {
  // router logits of std 3: top-k gaps well above bf16 noise in the experts' inputs (the logits themselves are exact)
  makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype), randn(ctx, rng, [c.dims.T!, c.dims.E!], 'f32', 3)],
  initParameters: (m, _c, rng) => initGptOssMoeParameters(m, rng),
  reference: ([x, logits], params, c) => [
    hostArray(x!.shape, gptOssExperts(x!.data, logits!.data, x!.shape[0]!, params, '', c.init[1] as number, (c.init[4] as number | undefined) ?? 7, (c.init[5] as number | undefined) ?? GPT_OSS_SWIGLU_ALPHA)),
  ],
  work: (c) => {
    const [E, K, H, I] = c.init as [number, number, number, number];
    return gptOssMoeWork({ dtype: c.dtype, dims: c.dims, init: [H, E, K, I, 7, 'mxfp4'] });
  },
};

export const mxfp4MoeTask = defineTask(
  {
    id: 'L2/mxfp4_moe',
    className: 'Mxfp4MoE',
    mirrors: 'vllm.model_executor.layers.quantization.mxfp4.Mxfp4MoEMethod',
    description:
      "gpt-oss's MXFP4 experts from the router logits: top-k + softmax over the k, gate/up (interleaved) and down through mxfp4_grouped_gemm with biases, the clamped SwiGLU, weighted sum.",
    ...MXFP4_MOE_META,
    cases: {
      ci: [
        mxfp4MoeCase('top2-of-8-f32', 'f32', 9, 64, 32, 8, 2),
        mxfp4MoeCase('top4-of-8-clamped-decode-f32', 'f32', 1, 32, 64, 8, 4, 0.6),
        mxfp4MoeCase('top2-of-4-alpha1-f32', 'f32', 6, 32, 32, 4, 2, 7, 1),
        mxfp4MoeCase('top4-of-8-bf16', 'bf16', 5, 64, 32, 8, 4),
      ],
      production: [...MOE_TOKENS.map((T) => gptOssMxfp4Case(GPT_OSS_20B_CONFIG, 'gpt-oss-20b', T)), gptOssMxfp4Case(GPT_OSS_120B_CONFIG, 'gpt-oss-120b', 32)],
    },
  },
  { baseline: Mxfp4MoE, ...MXFP4_MOE_BEHAVIOUR },
);
