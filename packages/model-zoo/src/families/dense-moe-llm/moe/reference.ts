/**
 * Float64 references of the MoE blocks on host arrays, from the parameters by name (the module tree's: `gate.weight`,
 * `experts.w13_weight`, `experts.w2_weight`): router logits, softmax + top-k (+ renormalisation), each chosen
 * expert's SwiGLU MLP, the weighted sum. Plain loops (tasks/L1/moe and L2/fused_experts hold the pieces' loops).
 */
import type { HostArray } from '@fastkernels/core';
import { gateLinearReference } from '../../../tasks/L1/moe/gate_linear.js';
import { topkSoftmaxReference } from '../../../tasks/L1/moe/topk_softmax.js';
import { fusedExpertsReference } from '../L2/fused_experts.js';

type Params = ReadonlyMap<string, HostArray>;

function param(params: Params, name: string): HostArray {
  const p = params.get(name);
  if (!p) throw new Error(`moe reference: parameter '${name}' missing (have ${[...params.keys()].slice(0, 12).join(', ')} ...)`);
  return p;
}

/** A sparse MoE block (MixtralMoE / Qwen3MoeSparseMoeBlock) on x [T, H]: returns [T, H]. */
export function denseMoeBlock(x: Float64Array, rows: number, params: Params, prefix: string, topK: number, renormalize: boolean): Float64Array {
  const w = param(params, `${prefix}gate.weight`);
  const H = w.shape[1]!;
  const xa: HostArray = { shape: [rows, H], data: x };
  const logits = gateLinearReference(xa, w, undefined);
  const [weights, ids] = topkSoftmaxReference(logits, topK, renormalize);
  return fusedExpertsReference(xa, param(params, `${prefix}experts.w13_weight`), param(params, `${prefix}experts.w2_weight`), weights, ids).data;
}
