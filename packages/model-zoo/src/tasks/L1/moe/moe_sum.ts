import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B, type MoeShape } from './shapes.js';

/**
 * vLLM's moe_sum (torch.ops._moe_C.moe_sum, the last step of fused_experts): the already-weighted outputs of a token's
 * top-k experts [T, K, H] summed over K into [T, H] (accumulated wider, rounded once). forward(input) -> output,
 * where vLLM's writes its output argument in place.
 */
export class MoeSum extends Module {
  constructor() {
    super();
  }

  forward(input: Tensor): Tensor {
    if (input.shape.length !== 3) throw new RangeError(`MoeSum: input must be [T, K, H], got [${input.shape.join(', ')}]`);
    return F.sum(input, { dim: 1 });
  }
}

export function moeSumReference(x: HostArray): HostArray {
  const [T, K, H] = x.shape as [number, number, number];
  const out = hostArray([T, H]);
  for (let t = 0; t < T; t++) for (let k = 0; k < K; k++) for (let h = 0; h < H; h++) out.data[t * H + h]! += x.data[(t * K + k) * H + h]!;
  return out;
}

const prod = (m: MoeShape, T: number) => ({ name: `${m.name}-T${T}`, dtype: 'bf16' as const, dims: { T, K: m.topK, H: m.hidden }, init: [] });

export const moeSumTask = defineTask(
  {
    id: 'L1/moe_sum',
    level: 1,
    className: 'MoeSum',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'gemma4', 'glm', 'jamba', 'kimi_linear', 'mixtral', 'qwen3_moe', 'qwen3_next', 'qwen3_vl'],
    mirrors: 'vllm._custom_ops.moe_sum',
    description: "Sum of a token's top-k weighted expert outputs: [T, K, H] -> [T, H].",
    init: [],
    inputs: [{ name: 'input', dtype: 'act', shape: ['T', 'K', 'H'] }],
    outputs: [{ name: 'output', dtype: 'act', shape: ['T', 'H'] }],
    cases: {
      ci: [
        { name: 'top2-f32', dtype: 'f32', dims: { T: 11, K: 2, H: 64 }, init: [] },
        { name: 'top8-bf16', dtype: 'bf16', dims: { T: 5, K: 8, H: 96 }, init: [] },
      ],
      production: [...MOE_TOKENS.map((T) => prod(MIXTRAL_8X7B, T)), ...MOE_TOKENS.map((T) => prod(QWEN3_30B_A3B, T))],
    },
  },
  {
    baseline: MoeSum,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.K!, c.dims.H!], c.dtype)],
    reference: ([x]) => [moeSumReference(x!)],
    work: (c) => {
      const { T, K, H } = c.dims as { T: number; K: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([T, K, H], it) + bytesOf([T, H], it), flops: T * K * H };
    },
  },
);
