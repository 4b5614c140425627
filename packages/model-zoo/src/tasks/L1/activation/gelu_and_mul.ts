import { DTYPE_INFO, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

export type GeluApproximate = 'none' | 'tanh';

/**
 * vLLM's GeluAndMul (CustomOp `gelu_and_mul` / `gelu_tanh_and_mul`, GeGLU):
 * x [..., 2d] -> gelu(x[..., :d], approximate) * x[..., d:].
 * approximate 'none' is the exact erf GELU; 'tanh' is the tanh approximation (Gemma's gelu_pytorch_tanh).
 */
export class GeluAndMul extends Module {
  constructor(readonly approximate: GeluApproximate = 'none') {
    super();
    if (approximate !== 'none' && approximate !== 'tanh') throw new RangeError(`GeluAndMul: unknown approximate '${String(approximate)}'`);
  }

  forward(x: Tensor): Tensor {
    return this.ctx.backend.ops.geluAndMul(x, this.approximate);
  }
}

/**
 * erf in float64 (JavaScript has none): the Maclaurin series for |x| < 3 (terms grow at most to ~170,
 * so about 1e-14 absolute error), the Laplace continued fraction for erfc beyond (converges quickly there).
 */
export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  const sign = x < 0 ? -1 : 1;
  if (a < 3) {
    // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
    let term = a; // (-1)^n x^(2n+1) / n!
    let sum = a;
    const x2 = a * a;
    for (let n = 1; n < 200; n++) {
      term *= -x2 / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return (sign * 2 * sum) / Math.sqrt(Math.PI);
  }
  if (a > 27) return sign; // erfc(27) < 1e-300
  // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...))))), evaluated backwards.
  let f = a;
  for (let k = 120; k >= 1; k--) f = a + k / 2 / f;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
  return sign * (1 - erfc);
}

/** Exact GELU: x * Phi(x). */
export function geluErf(x: number): number {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

/** Tanh-approximate GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

/** Golden float64 GeGLU over the last dim of a contiguous host array: [..., 2d] -> [..., d]. */
export function geluAndMulReference(x: HostArray, approximate: GeluApproximate): HostArray {
  const twoD = x.shape[x.shape.length - 1]!;
  if (twoD % 2 !== 0) throw new RangeError(`gelu_and_mul: last dim ${twoD} is odd`);
  const d = twoD / 2;
  const rows = twoD === 0 ? 0 : x.data.length / twoD;
  const act = approximate === 'tanh' ? geluTanh : geluErf;
  const out = hostArray([...x.shape.slice(0, -1), d]);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < d; j++) out.data[r * d + j] = act(x.data[r * twoD + j]!) * x.data[r * twoD + d + j]!;
  }
  return out;
}

export const geluAndMulTask = defineTask(
  {
    id: 'L1/gelu_and_mul',
    level: 1,
    className: 'GeluAndMul',
    family: [DENSE_MOE_LLM],
    architectures: ['gemma4', 'deepseek', 'glm', 'jamba', 'kimi_linear', 'mixtral', 'qwen3_next', 'qwen3_vl', 'pi0'],
    mirrors: 'vllm.model_executor.layers.activation.GeluAndMul',
    description: 'GeGLU: gelu(gate) * up over the halves of the merged gate_up output; exact erf or tanh-approximate GELU.',
    init: [{ name: 'approximate', type: 'enum', choices: ['none', 'tanh'], optional: true, default: 'none' }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'D2'], doc: 'gate | up halves; D2 = 2 * D' }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'D'] }],
    cases: {
      ci: [
        { name: 'small-erf', dtype: 'f32', dims: { T: 7, D: 64, D2: 128 }, init: ['none'] },
        { name: 'small-tanh', dtype: 'f32', dims: { T: 6, D: 48, D2: 96 }, init: ['tanh'] },
        { name: 'small-erf-bf16', dtype: 'bf16', dims: { T: 5, D: 96, D2: 192 }, init: ['none'] },
        { name: 'small-tanh-bf16', dtype: 'bf16', dims: { T: 3, D: 128, D2: 256 }, init: ['tanh'] },
      ],
      production: [
        // Gemma-family MLPs (gelu_pytorch_tanh); Gemma-2-9B intermediate 14336 matches Llama-3-8B's.
        { name: 'gemma2-9b-decode-tanh', dtype: 'bf16', dims: { T: 32, D: 14336, D2: 28672 }, init: ['tanh'] },
        { name: 'gemma2-9b-prefill-tanh', dtype: 'bf16', dims: { T: 4096, D: 14336, D2: 28672 }, init: ['tanh'] },
        { name: 'llama3-8b-shape-decode-erf', dtype: 'bf16', dims: { T: 32, D: 14336, D2: 28672 }, init: ['none'] },
      ],
    },
  },
  {
    baseline: GeluAndMul,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.D2!], c.dtype, 2)],
    reference: ([x], _params, c) => [geluAndMulReference(x!, ((c.init[0] as GeluApproximate | undefined) ?? 'none'))],
    work: (c) => {
      const { T, D } = c.dims as { T: number; D: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      // read [T, 2D], write [T, D]. Per output: erf form scale, erf, add, two multiplies, times up (~8);
      // the tanh form adds the cubic (x*x*x, *0.044715, +x, *sqrt(2/pi)), so ~12. Transcendentals count as one.
      const perElem = c.init[0] === 'tanh' ? 12 : 8;
      return { bytes: bytesOf([T, 2 * D], it) + bytesOf([T, D], it), flops: perElem * T * D };
    },
  },
);
