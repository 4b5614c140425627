import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { groupQuantFp8Reference } from './fp8-reference.js';
import { toColumnMajor } from './per_token_group_quant_fp8.js';

/**
 * vLLM's fused SwiGLU + fp8 group quantisation (silu_mul_per_token_group_quant_fp8_colmajor, the block-fp8 MoE's
 * activation before DeepGEMM): x [T, 2I] (gate, then up) -> silu(gate) * up in float32, then per-token-group fp8 e4m3
 * quantisation: q [T, I] fp8e4m3 and float32 scales [T, I / group_size] (UE8M0 optional; column-major as vLLM's by
 * default, row-major on request), what the down projection's fp8 GEMM takes.
 * The baseline is two registry ops (silu_and_mul in float32, per_token_group_quant_fp8); a fused kernel keeps the
 * product on chip.
 */
export class SiluMulQuantFp8 extends Module {
  constructor(
    readonly groupSize = 128,
    readonly useUe8m0 = false,
    readonly columnMajorScales = true,
  ) {
    super();
  }

  forward(x: Tensor): [Tensor, Tensor] {
    const x32 = x.dtype === 'f32' ? null : F.to(x, 'f32');
    const act = F.siluAndMul(x32 ?? x);
    x32?.dispose();
    try {
      const [q, scales] = F.perTokenGroupQuantFp8(act, this.groupSize, { scale_ue8m0: this.useUe8m0 });
      return [q, this.columnMajorScales ? toColumnMajor(scales) : scales];
    } finally {
      act.dispose();
    }
  }
}

/** Float64 silu(gate) * up over [T, 2I], then the group quantiser. */
export function siluMulQuantFp8Reference(x: HostArray, groupSize: number, useUe8m0: boolean): [HostArray, HostArray] {
  const twoI = x.shape[x.shape.length - 1]!;
  const I = twoI / 2;
  const T = x.data.length / twoI;
  const act = hostArray([...x.shape.slice(0, -1), I]);
  for (let t = 0; t < T; t++) {
    for (let j = 0; j < I; j++) {
      const g = x.data[t * twoI + j]!;
      act.data[t * I + j] = (g / (1 + Math.exp(-g))) * x.data[t * twoI + I + j]!;
    }
  }
  return groupQuantFp8Reference(act, groupSize, useUe8m0);
}

const init = (c: TaskCase) => ({ group: (c.init[0] as number | undefined) ?? 128, ue8m0: (c.init[1] as boolean | undefined) ?? false });

const actCase = (name: string, dtype: 'f32' | 'bf16', T: number, I: number, init: unknown[] = []) => {
  const group = (init[0] as number | undefined) ?? 128;
  return { name, dtype, dims: { T, I2: 2 * I, I, G: I / group }, init };
};

export const siluMulQuantFp8Task = defineTask(
  {
    id: 'L1/silu_mul_quant_fp8',
    level: 1,
    className: 'SiluMulQuantFp8',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'gemma4', 'glm', 'jamba', 'kimi_linear', 'mixtral', 'qwen3_next', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.quantization.utils.fp8_utils',
    description:
      'silu_mul_per_token_group_quant_fp8_colmajor: SwiGLU (silu(gate) * up, float32) fused with per-token-group fp8 e4m3 quantisation (group 128, float32 scales, UE8M0 optional): the block-fp8 down projection\'s input.',
    init: [
      { name: 'groupSize', type: 'int', optional: true, default: 128 },
      { name: 'useUe8m0', type: 'bool', optional: true, default: false },
      { name: 'columnMajorScales', type: 'bool', optional: true, default: true, doc: "vLLM's (DeepGEMM's) layout: a transposed view" },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'I2'], doc: 'gate then up (MergedColumnParallelLinear order)' }],
    outputs: [
      { name: 'q', dtype: 'fp8e4m3', shape: ['T', 'I'] },
      { name: 'scales', dtype: 'f32', shape: ['T', 'G'] },
    ],
    cases: {
      ci: [
        actCase('group128-bf16', 'bf16', 6, 256),
        actCase('group64-row-major-f32', 'f32', 4, 192, [64, false, false]),
        actCase('ue8m0-bf16', 'bf16', 3, 128, [128, true]),
      ],
      production: [
        // Mixtral-8x7B expert / Llama-3-8B MLP: intermediate 14336
        actCase('mixtral-8x7b-T4096', 'bf16', 4096, 14336),
        actCase('llama3-8b-decode-T64', 'bf16', 64, 14336),
        // Qwen3-30B-A3B experts (moe_intermediate 768), routed rows of a 4096-token prefill at top-8
        actCase('qwen3-30b-a3b-experts-T32768-ue8m0', 'bf16', 4096 * 8, 768, [128, true]),
      ],
    },
  },
  {
    baseline: SiluMulQuantFp8,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.I2!], c.dtype)],
    reference: ([x], _p, c) => siluMulQuantFp8Reference(x!, init(c).group, init(c).ue8m0),
    work: (c) => {
      const { T, I, I2, G } = c.dims as Record<string, number>;
      return { bytes: bytesOf([T!, I2!], DTYPE_INFO[c.dtype].itemsize) + bytesOf([T!, I!], 1) + bytesOf([T!, G!], 4), flops: 8 * T! * I! };
    },
  },
);
