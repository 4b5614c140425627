import { DTYPE_INFO, Module, Tensor, defineTask, fillNormal_, hostArray, type HostArray, type Rng } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/**
 * vLLM's ReplicatedLinear (the tp_size 1 form of every vLLM linear layer): y = x W^T + b with
 * weight [outputSize, inputSize] and an optional bias [outputSize].
 * vLLM's forward returns (output, output_bias) for skip_bias_add; callers take [0], so forward here
 * returns the output tensor. vLLM's bias defaults to True; the Llama projections all use bias=False,
 * which is this class's default.
 */
export class Linear extends Module {
  readonly weight: Tensor;
  readonly bias: Tensor | null;
  constructor(
    readonly inputSize: number,
    readonly outputSize: number,
    bias = false,
  ) {
    super();
    this.weight = this.parameter('weight', [outputSize, inputSize]);
    this.bias = bias ? this.parameter('bias', [outputSize]) : null;
  }

  forward(x: Tensor): Tensor {
    return this.ctx.backend.ops.linear(x, this.weight, this.bias);
  }
}

/**
 * vLLM's MergedColumnParallelLinear at tp_size 1 (Llama's gate_up_proj): several projections of the
 * same input fused into one GEMM. The weight rows are the concatenation of the parts' rows, in order,
 * and forward returns the merged output [..., sum(outputSizes)] (callers split it, e.g. SiluAndMul).
 * Not a task of its own: it is L1/linear with N = sum(outputSizes).
 */
export class MergedColumnParallelLinear extends Linear {
  readonly outputSizes: readonly number[];
  constructor(inputSize: number, outputSizes: readonly number[], bias = false) {
    super(inputSize, outputSizes.reduce((a, b) => a + b, 0), bias);
    if (outputSizes.length === 0 || outputSizes.some((n) => !Number.isInteger(n) || n <= 0)) {
      throw new RangeError(`MergedColumnParallelLinear: bad outputSizes [${outputSizes.join(', ')}]`);
    }
    this.outputSizes = [...outputSizes];
  }

  /** Row offset of part `i` in the merged weight (where vLLM's weight_loader writes loaded_shard_id i). */
  shardOffset(i: number): number {
    return this.outputSizes.slice(0, i).reduce((a, b) => a + b, 0);
  }
}

/** Golden y = x W^T + b over contiguous host arrays: x [..., K], weight [N, K], bias [N] or null. */
export function linearReference(x: HostArray, weight: HostArray, bias: HostArray | null): HostArray {
  const [n, k] = weight.shape as [number, number];
  if (x.shape[x.shape.length - 1] !== k) throw new RangeError(`linear: x last dim ${x.shape[x.shape.length - 1]} != K ${k}`);
  const rows = k === 0 ? x.data.length : x.data.length / k;
  const out = hostArray([...x.shape.slice(0, -1), n]);
  for (let m = 0; m < rows; m++) {
    for (let j = 0; j < n; j++) {
      let acc = bias ? bias.data[j]! : 0;
      for (let p = 0; p < k; p++) acc += x.data[m * k + p]! * weight.data[j * k + p]!;
      out.data[m * n + j] = acc;
    }
  }
  return out;
}

/** Weight ~ N(0, 1/K) so outputs stay O(1) at any K; bias ~ N(0, 0.25). */
function initLinear(m: Linear, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    const scale = name === 'weight' ? 1 / Math.sqrt(Math.max(1, p.shape[1]!)) : 0.5;
    fillNormal_(p, rng, scale);
  }
}

const llama = (name: string, T: number, K: number, N: number) => ({ name: `llama3-8b-${name}-T${T}`, dtype: 'bf16' as const, dims: { T, K, N }, init: [K, N, false] });

export const linearTask = defineTask(
  {
    id: 'L1/linear',
    level: 1,
    className: 'Linear',
    family: [DENSE_MOE_LLM],
    architectures: ['llama', 'qwen2', 'mistral', 'mixtral', 'deepseek', 'glm', 'gemma4', 'gpt_oss', 'qwen3_next', 'jamba', 'kimi_linear', 'llama_eagle3', 'bitnet', 'llada'],
    mirrors: 'vllm.model_executor.layers.linear.ReplicatedLinear',
    description:
      'Dense projection y = x W^T (+ b), the GEMM behind QKV/o_proj/gate_up/down and the LM head; merged column-parallel layers are this with N = sum of the parts.',
    init: [
      { name: 'inputSize', type: 'int', doc: 'K' },
      { name: 'outputSize', type: 'int', doc: 'N (for a merged layer, the sum of the parts)' },
      { name: 'bias', type: 'bool', optional: true, default: false },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'K'] }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'N'] }],
    cases: {
      ci: [
        { name: 'small', dtype: 'f32', dims: { T: 5, K: 64, N: 48 }, init: [64, 48] },
        { name: 'small-bias-bf16', dtype: 'bf16', dims: { T: 7, K: 96, N: 80 }, init: [96, 80, true] },
        // gate_up shape in miniature: N = 2 x intermediate (MergedColumnParallelLinear [40, 40]).
        { name: 'small-gate-up-merged', dtype: 'f32', dims: { T: 3, K: 32, N: 80 }, init: [32, 80, false], options: { outputSizes: [40, 40] } },
      ],
      production: [
        // Llama-3-8B: hidden 4096, 32 q heads + 8 kv heads of 128 (QKV N = 6144), intermediate 14336.
        llama('qkv', 1, 4096, 6144),
        llama('qkv', 32, 4096, 6144),
        llama('qkv', 4096, 4096, 6144),
        llama('o-proj', 1, 4096, 4096),
        llama('o-proj', 32, 4096, 4096),
        llama('o-proj', 4096, 4096, 4096),
        { ...llama('gate-up', 1, 4096, 28672), options: { outputSizes: [14336, 14336] } },
        { ...llama('gate-up', 32, 4096, 28672), options: { outputSizes: [14336, 14336] } },
        { ...llama('gate-up', 4096, 4096, 28672), options: { outputSizes: [14336, 14336] } },
        llama('down', 1, 14336, 4096),
        llama('down', 32, 14336, 4096),
        llama('down', 4096, 14336, 4096),
        llama('lm-head', 32, 4096, 128256),
      ],
    },
  },
  {
    baseline: Linear,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.K!], c.dtype)],
    initParameters: (m, _c, rng) => initLinear(m as Linear, rng),
    reference: ([x], params) => [linearReference(x!, params.get('weight')!, params.get('bias') ?? null)],
    work: (c) => {
      const { T, K, N } = c.dims as { T: number; K: number; N: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      const bias = c.init[2] === true;
      // read x [T, K] and W [N, K] (+ b [N]), write y [T, N]; 2 T N K (+ T N for the bias add).
      return {
        bytes: bytesOf([T, K], it) + bytesOf([N, K], it) + (bias ? bytesOf([N], it) : 0) + bytesOf([T, N], it),
        flops: 2 * T * N * K + (bias ? T * N : 0),
      };
    },
  },
);
