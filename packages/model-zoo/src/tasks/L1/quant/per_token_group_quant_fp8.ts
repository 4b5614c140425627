import { DTYPE_INFO, F, Module, defineTask, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { groupQuantFp8Reference } from './fp8-reference.js';

/**
 * vLLM's dynamic per-token-group fp8 quantisation (QuantFP8 with GroupShape(1, group_size), over
 * per_token_group_quant_fp8): x [..., H] -> q fp8e4m3 [..., H] and float32 scales [..., H / group_size], one scale per
 * run of group_size values of a token (max(|x|) / 448; a power of two with use_ue8m0, DeepGEMM's UE8M0 scales).
 * columnMajorScales gives the scales vLLM's column-major layout for DeepGEMM (same values, [G, T] storage seen as a
 * transposed [T, G] view). Runs the registry's per_token_group_quant_fp8.
 */
export class PerTokenGroupQuantFp8 extends Module {
  constructor(
    readonly groupSize = 128,
    readonly columnMajorScales = false,
    readonly useUe8m0 = false,
  ) {
    super();
  }

  forward(x: Tensor): [Tensor, Tensor] {
    const [q, scales] = F.perTokenGroupQuantFp8(x, this.groupSize, { scale_ue8m0: this.useUe8m0 });
    return [q, this.columnMajorScales ? toColumnMajor(scales) : scales];
  }
}

/** [T, G] scales stored as [G, T] and returned as the transposed view (vLLM's column-major scales); consumes scales. */
export function toColumnMajor(scales: Tensor): Tensor {
  if (scales.rank !== 2) return scales;
  const transposed = scales.transpose(0, 1);
  const columns = transposed.contiguous();
  for (const t of [scales, transposed, columns]) if (t !== columns) t.dispose();
  const view = columns.transpose(0, 1);
  columns.dispose();
  return view;
}

const init = (c: TaskCase) => ({ group: (c.init[0] as number | undefined) ?? 128, ue8m0: (c.init[2] as boolean | undefined) ?? false });

/** Hidden sizes the quantiser sees in block-fp8 checkpoints (the linear layers' inputs). */
const quantCase = (name: string, dtype: 'f32' | 'bf16', T: number, H: number, init: unknown[] = []) => {
  const group = (init[0] as number | undefined) ?? 128;
  return { name, dtype, dims: { T, H, G: H / group }, init };
};

export const perTokenGroupQuantFp8Task = defineTask(
  {
    id: 'L1/per_token_group_quant_fp8',
    level: 1,
    className: 'PerTokenGroupQuantFp8',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'glm', 'gpt_oss', 'kimi_linear', 'llama', 'mixtral', 'qwen3_next', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.quantization.input_quant_fp8.QuantFP8',
    description:
      "Dynamic per-token-group fp8 e4m3 quantisation (vLLM's per_token_group_quant_fp8, group 128): float32 scale max|x| / 448 per group (UE8M0 optional), row- or column-major scales.",
    init: [
      { name: 'groupSize', type: 'int', optional: true, default: 128 },
      { name: 'columnMajorScales', type: 'bool', optional: true, default: false, doc: "DeepGEMM's scale layout (a transposed view)" },
      { name: 'useUe8m0', type: 'bool', optional: true, default: false, doc: 'scales rounded up to powers of two' },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [
      { name: 'q', dtype: 'fp8e4m3', shape: ['T', 'H'] },
      { name: 'scales', dtype: 'f32', shape: ['T', 'G'] },
    ],
    cases: {
      ci: [
        quantCase('group128-bf16', 'bf16', 7, 512),
        quantCase('group64-col-major-f32', 'f32', 5, 256, [64, true]),
        quantCase('group128-ue8m0-bf16', 'bf16', 3, 384, [128, false, true]),
      ],
      production: [
        // Llama-3-8B: hidden 4096 (qkv / gate_up inputs), intermediate 14336 (down input); prefill 4096, decode 64
        quantCase('llama3-8b-hidden-T4096', 'bf16', 4096, 4096),
        quantCase('llama3-8b-intermediate-T4096', 'bf16', 4096, 14336),
        quantCase('llama3-8b-hidden-decode-T64', 'bf16', 64, 4096),
        // Qwen3-30B-A3B: hidden 2048; DeepGEMM's column-major UE8M0 scales
        quantCase('qwen3-30b-a3b-hidden-T4096-deepgemm', 'bf16', 4096, 2048, [128, true, true]),
      ],
    },
  },
  {
    baseline: PerTokenGroupQuantFp8,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    reference: ([x], _p, c) => groupQuantFp8Reference(x!, init(c).group, init(c).ue8m0),
    work: (c) => {
      const { T, H, G } = c.dims as Record<string, number>;
      return { bytes: bytesOf([T!, H!], DTYPE_INFO[c.dtype].itemsize) + bytesOf([T!, H!], 1) + bytesOf([T!, G!], 4), flops: 3 * T! * H! };
    },
  },
);
