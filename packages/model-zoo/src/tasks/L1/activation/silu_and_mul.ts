import { DTYPE_INFO, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/**
 * vLLM's SiluAndMul (CustomOp `silu_and_mul`), the SwiGLU activation of the Llama MLP:
 * x [..., 2d] -> silu(x[..., :d]) * x[..., d:] with silu(g) = g * sigmoid(g).
 * The first half is the gate projection, the second the up projection (MergedColumnParallelLinear order).
 */
export class SiluAndMul extends Module {
  constructor() {
    super();
  }

  forward(x: Tensor): Tensor {
    return this.ctx.backend.ops.siluAndMul(x);
  }
}

/** Golden float64 SwiGLU over the last dim of a contiguous host array: [..., 2d] -> [..., d]. */
export function siluAndMulReference(x: HostArray): HostArray {
  const twoD = x.shape[x.shape.length - 1]!;
  if (twoD % 2 !== 0) throw new RangeError(`silu_and_mul: last dim ${twoD} is odd`);
  const d = twoD / 2;
  const rows = twoD === 0 ? 0 : x.data.length / twoD;
  const out = hostArray([...x.shape.slice(0, -1), d]);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < d; j++) {
      const g = x.data[r * twoD + j]!;
      const u = x.data[r * twoD + d + j]!;
      out.data[r * d + j] = (g / (1 + Math.exp(-g))) * u;
    }
  }
  return out;
}

export const siluAndMulTask = defineTask(
  {
    id: 'L1/silu_and_mul',
    level: 1,
    className: 'SiluAndMul',
    family: [DENSE_MOE_LLM],
    architectures: ['llama', 'qwen2', 'mistral', 'mixtral', 'deepseek', 'qwen3_next', 'glm', 'gemma4', 'jamba', 'kimi_linear', 'llama_eagle3'],
    mirrors: 'vllm.model_executor.layers.activation.SiluAndMul',
    description: 'SwiGLU: silu(gate) * up over the halves of the merged gate_up projection output.',
    init: [],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'D2'], doc: 'gate | up halves; D2 = 2 * D' }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'D'] }],
    cases: {
      ci: [
        { name: 'small', dtype: 'f32', dims: { T: 7, D: 64, D2: 128 }, init: [] },
        { name: 'small-bf16', dtype: 'bf16', dims: { T: 5, D: 96, D2: 192 }, init: [] },
        { name: 'single-token-bf16', dtype: 'bf16', dims: { T: 1, D: 160, D2: 320 }, init: [] },
      ],
      production: [
        { name: 'llama3-8b-decode-1', dtype: 'bf16', dims: { T: 1, D: 14336, D2: 28672 }, init: [] },
        { name: 'llama3-8b-decode-32', dtype: 'bf16', dims: { T: 32, D: 14336, D2: 28672 }, init: [] },
        { name: 'llama3-8b-prefill', dtype: 'bf16', dims: { T: 4096, D: 14336, D2: 28672 }, init: [] },
      ],
    },
  },
  {
    baseline: SiluAndMul,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.D2!], c.dtype, 2)],
    reference: ([x]) => [siluAndMulReference(x!)],
    work: (c) => {
      const { T, D } = c.dims as { T: number; D: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      // read [T, 2D], write [T, D]; per output: negate, exp, add, divide (sigmoid), multiply by gate, multiply by up.
      return { bytes: bytesOf([T, 2 * D], it) + bytesOf([T, D], it), flops: 6 * T * D };
    },
  },
);
