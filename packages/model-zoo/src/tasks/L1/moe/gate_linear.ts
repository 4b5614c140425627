import { DTYPE_INFO, F, Module, OpScope, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { DEEPSEEK_V3_ROUTING, MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B } from './shapes.js';

/**
 * vLLM's GateLinear (a ReplicatedLinear for the MoE router) on its float32-output path: router logits
 * x W^T (+ b) [T, E] computed from the activations and weight in float32 and returned in float32 (vLLM: cuBLAS
 * bf16 x bf16 -> fp32, out_dtype float32), so routing never sees bf16-rounded logits. Parameter `weight` [E, H] (the
 * checkpoint's `gate.weight`), `bias` [E] when bias (gpt-oss's router). forward returns the logits tensor (vLLM's
 * ReplicatedLinear returns (output, output_bias); the MoE blocks take [0]).
 */
export class GateLinear extends Module {
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
    if (x.dtype === 'f32') return F.linear(x, this.weight, this.bias);
    const s = new OpScope();
    const xf = s.op('to', [x], { dtype: 'f32' });
    const wf = s.op('to', [this.weight], { dtype: 'f32' });
    const bf = this.bias ? s.op('to', [this.bias], { dtype: 'f32' }) : null;
    return s.keep([s.op('linear', [xf, wf, bf])])[0]!;
  }
}

export function gateLinearReference(x: HostArray, w: HostArray, b: HostArray | undefined): HostArray {
  const [T, H] = x.shape as [number, number];
  const E = w.shape[0]!;
  const out = hostArray([T, E]);
  for (let t = 0; t < T; t++) {
    for (let e = 0; e < E; e++) {
      let acc = b ? b.data[e]! : 0;
      for (let h = 0; h < H; h++) acc += x.data[t * H + h]! * w.data[e * H + h]!;
      out.data[t * E + e] = acc;
    }
  }
  return out;
}

const prod = (name: string, E: number, H: number, T: number) => ({ name: `${name}-T${T}`, dtype: 'bf16' as const, dims: { T, H, E }, init: [H, E] });

export const gateLinearTask = defineTask(
  {
    id: 'L1/gate_linear',
    level: 1,
    className: 'GateLinear',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'gemma4', 'glm', 'kimi_linear', 'mixtral', 'qwen3_moe', 'qwen3_next'],
    mirrors: 'vllm.model_executor.layers.fused_moe.router.gate_linear.GateLinear',
    description: 'The MoE router linear: float32 logits [T, E] from the activations and the gate weight [E, H].',
    init: [
      { name: 'inputSize', type: 'int' },
      { name: 'outputSize', type: 'int', doc: 'the number of experts' },
      { name: 'bias', type: 'bool', optional: true, default: false },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'logits', dtype: 'f32', shape: ['T', 'E'] }],
    cases: {
      ci: [
        { name: 'mixtral-like-f32', dtype: 'f32', dims: { T: 9, H: 64, E: 8 }, init: [64, 8] },
        { name: 'qwen3-like-bf16', dtype: 'bf16', dims: { T: 6, H: 96, E: 32 }, init: [96, 32] },
        { name: 'bias-bf16', dtype: 'bf16', dims: { T: 3, H: 48, E: 16 }, init: [48, 16, true] },
      ],
      production: [
        ...MOE_TOKENS.map((T) => prod(MIXTRAL_8X7B.name, MIXTRAL_8X7B.numExperts, MIXTRAL_8X7B.hidden, T)),
        ...MOE_TOKENS.map((T) => prod(QWEN3_30B_A3B.name, QWEN3_30B_A3B.numExperts, QWEN3_30B_A3B.hidden, T)),
        prod(DEEPSEEK_V3_ROUTING.name, DEEPSEEK_V3_ROUTING.numExperts, DEEPSEEK_V3_ROUTING.hidden, 32),
      ],
    },
  },
  {
    baseline: GateLinear,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    reference: ([x], p) => [gateLinearReference(x!, p.get('weight')!, p.get('bias'))],
    work: (c) => {
      const { T, H, E } = c.dims as { T: number; H: number; E: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([E, H], it) + bytesOf([T, H], it) + bytesOf([T, E], 4), flops: 2 * T * H * E };
    },
  },
);
