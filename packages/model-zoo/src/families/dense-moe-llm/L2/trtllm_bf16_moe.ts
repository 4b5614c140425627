import { defineTask, hostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';
import { topkSoftmaxReference } from '../../../tasks/L1/moe/topk_softmax.js';
import { MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B, type MoeShape } from '../../../tasks/L1/moe/shapes.js';
import { FusedMoE, initMoeParameters } from '../moe/fused-moe.js';
import { fusedExpertsReference } from './fused_experts.js';
import { moeBlockWork } from './mixtral_moe.js';

/** FlashInfer's routing methods the bf16 MoE models use: Renormalize (top-k of the logits, softmax over the k) and Default (softmax, then top-k). */
export const TRTLLM_ROUTING_METHODS = ['renormalize', 'default'] as const;
export type TrtLlmRoutingMethod = (typeof TRTLLM_ROUTING_METHODS)[number];

/**
 * FlashInfer's trtllm-gen bf16 MoE (trtllm_bf16_moe, vLLM's FlashInfer TRT-LLM backend for unquantised MoE on
 * Blackwell), routing inside: router logits [T, E] f32 in, top-k by the model's routing method (Mixtral / Qwen3-MoE:
 * Renormalize, i.e. softmax over the top k logits), each routed token through its experts' SwiGLU (gemm1 [E, 2I, H],
 * gemm2 [E, H, I]), weighted sum. Weights under vLLM's FusedMoE names (w13_weight: gate rows then up rows; FlashInfer's
 * gated kernels take them swapped, w31, which vLLM does at load). The baseline is our FusedMoE (L1/topk_softmax routing,
 * L2/fused_experts), so candidates for those run inside it too. Constructor: (numExperts, topK, hiddenSize,
 * intermediateSize, routingMethod). forward(hiddenStates [T, H], routerLogits f32 [T, E]) -> [T, H].
 */
export class TrtLlmBf16MoE extends FusedMoE {
  constructor(
    numExperts: number,
    topK: number,
    hiddenSize: number,
    intermediateSize: number,
    readonly routingMethod: TrtLlmRoutingMethod = 'renormalize',
  ) {
    if (!TRTLLM_ROUTING_METHODS.includes(routingMethod)) throw new RangeError(`TrtLlmBf16MoE: routing method '${routingMethod}' is not one of ${TRTLLM_ROUTING_METHODS.join(', ')}`);
    super(numExperts, topK, hiddenSize, intermediateSize, routingMethod === 'renormalize');
  }

  override forward(hiddenStates: Tensor, routerLogits: Tensor): Tensor {
    return super.forward(hiddenStates, routerLogits);
  }
}

const moeCase = (name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number, method?: TrtLlmRoutingMethod) =>
  ({ name, dtype, dims: { T, H, I, E, K }, init: method ? [E, K, H, I, method] : [E, K, H, I] });
const prod = (m: MoeShape, T: number) => moeCase(`${m.name}-T${T}`, 'bf16', T, m.hidden, m.intermediate, m.numExperts, m.topK);
const renormalizes = (c: TaskCase) => ((c.init[4] as TrtLlmRoutingMethod | undefined) ?? 'renormalize') === 'renormalize';

export const trtllmBf16MoeTask = defineTask(
  {
    id: 'L2/trtllm_bf16_moe',
    level: 2,
    className: 'TrtLlmBf16MoE',
    family: [FAMILY],
    architectures: ['kimi_linear', 'mixtral', 'qwen3_next'],
    mirrors: 'flashinfer.fused_moe.trtllm_bf16_moe',
    description:
      "FlashInfer trtllm-gen bf16 MoE with routing inside: router logits -> top-k (Renormalize or Default) -> SwiGLU experts (w13 / w2) -> weighted sum.",
    init: [
      { name: 'numExperts', type: 'int' },
      { name: 'topK', type: 'int' },
      { name: 'hiddenSize', type: 'int' },
      { name: 'intermediateSize', type: 'int' },
      { name: 'routingMethod', type: 'enum', choices: [...TRTLLM_ROUTING_METHODS], optional: true, default: 'renormalize' },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] },
      { name: 'routerLogits', dtype: 'f32', shape: ['T', 'E'], doc: 'the router linear, float32 (data-dependent routing)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/topk_softmax', 'L2/fused_experts'],
    cases: {
      ci: [
        moeCase('top2-of-8-renormalize-f32', 'f32', 9, 32, 48, 8, 2),
        moeCase('top4-of-16-default-f32', 'f32', 5, 32, 32, 16, 4, 'default'),
        moeCase('top2-of-8-bf16', 'bf16', 6, 32, 48, 8, 2),
      ],
      production: [...MOE_TOKENS.map((T) => prod(MIXTRAL_8X7B, T)), ...MOE_TOKENS.map((T) => prod(QWEN3_30B_A3B, T))],
    },
  },
  {
    baseline: TrtLlmBf16MoE,
    // router logits of std 3: top-k gaps well above bf16 noise (the logits themselves are exact f32)
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype), randn(ctx, rng, [c.dims.T!, c.dims.E!], 'f32', 3)],
    initParameters: (m, _c, rng) => initMoeParameters(m, rng),
    reference: ([x, logits], params, c) => {
      const [weights, ids] = topkSoftmaxReference(logits!, c.init[1] as number, renormalizes(c));
      return [hostArray(x!.shape, fusedExpertsReference(x!, params.get('w13_weight')!, params.get('w2_weight')!, weights, ids).data)];
    },
    // the experts as the sparse MoE blocks count them; the router GEMM is outside (its logits are an input)
    work: (c) => moeBlockWork(c),
  },
);
