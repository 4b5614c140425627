import { DTYPE_INFO, Module, defineTask, hostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';
import type { GateLinear } from '../../../tasks/L1/moe/gate_linear.js';
import { MIXTRAL_8X7B, MOE_TOKENS } from '../../../tasks/L1/moe/shapes.js';
import { FusedMoE, initMoeParameters } from '../moe/fused-moe.js';
import { denseMoeBlock } from '../moe/reference.js';
import { expertsWork } from './fused_experts.js';

/**
 * vLLM's MixtralMoE (vllm/model_executor/models/mixtral.py) at tp_size 1: gate (the router, L1/gate_linear, the
 * checkpoint's block_sparse_moe.gate.weight) and experts (FusedMoE: softmax top-k routing renormalised, as Mixtral
 * always does, and L2/fused_experts over w13_weight / w2_weight, stacked from block_sparse_moe.experts.N.w1 / w3 / w2).
 * Constructor: vLLM's (num_experts, top_k, hidden_size, intermediate_size). forward(hiddenStates [T, H]) -> [T, H].
 */
export class MixtralMoE extends Module {
  private readonly gate: GateLinear;
  readonly experts: FusedMoE;
  constructor(
    readonly numExperts: number,
    readonly topK: number,
    readonly hiddenSize: number,
    readonly intermediateSize: number,
  ) {
    super();
    this.gate = this.createModule('gate', 'L1/gate_linear', hiddenSize, numExperts, false);
    // FusedMoE owns the expert weights; its routing and expert tasks resolve through the registry (fused-moe.ts)
    this.experts = this.registerModule('experts', new FusedMoE(numExperts, topK, hiddenSize, intermediateSize, true));
  }

  forward(hiddenStates: Tensor): Tensor {
    const logits = this.gate.forward(hiddenStates);
    try {
      return this.experts.forward(hiddenStates, logits);
    } finally {
      logits.dispose();
    }
  }
}

/** Dims of a sparse MoE block case and its work: the router GEMM plus the experts hit. */
export function moeBlockCase(name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number, init: unknown[]) {
  return { name, dtype, dims: { T, H, I, E, K }, init };
}
export function moeBlockWork(c: Pick<TaskCase, 'dims' | 'dtype'>): { bytes: number; flops: number } {
  const { T, H, E } = c.dims as { T: number; H: number; E: number };
  const it = DTYPE_INFO[c.dtype].itemsize;
  const w = expertsWork(c);
  return { bytes: w.bytes + bytesOf([E, H], it) + bytesOf([T, E], 4), flops: w.flops + 2 * T * H * E };
}

const M = MIXTRAL_8X7B;
const mixtral = (name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number) => moeBlockCase(name, dtype, T, H, I, E, K, [E, K, H, I]);

export const mixtralMoeTask = defineTask(
  {
    id: 'L2/mixtral_moe',
    level: 2,
    className: 'MixtralMoE',
    family: [FAMILY],
    architectures: ['mixtral'],
    mirrors: 'vllm.model_executor.models.mixtral.MixtralMoE',
    description: "Mixtral's sparse MoE block: router linear, softmax top-k renormalised, fused SwiGLU experts.",
    init: [
      { name: 'numExperts', type: 'int' },
      { name: 'topK', type: 'int' },
      { name: 'hiddenSize', type: 'int' },
      { name: 'intermediateSize', type: 'int' },
    ],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/gate_linear', 'L1/topk_softmax', 'L2/fused_experts'],
    cases: {
      ci: [
        mixtral('tiny-top2-of-8-f32', 'f32', 11, 32, 48, 8, 2),
        mixtral('tiny-decode-f32', 'f32', 1, 32, 40, 4, 2),
        mixtral('tiny-top2-of-8-bf16', 'bf16', 6, 32, 48, 8, 2),
      ],
      production: MOE_TOKENS.map((T) => mixtral(`${M.name}-T${T}`, 'bf16', T, M.hidden, M.intermediate, M.numExperts, M.topK)),
    },
  },
  {
    baseline: MixtralMoE,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initMoeParameters(m, rng),
    reference: ([x], params, c) => [hostArray(x!.shape, denseMoeBlock(x!.data, x!.shape[0]!, params, '', c.init[1] as number, true))],
    work: (c) => moeBlockWork(c),
  },
);
