/**
 * Float64 references of the MoE blocks on host arrays, from the parameters by name (the module tree's: `gate.weight`,
 * `experts.w13_weight`, `experts.w2_weight`): router logits, softmax + top-k (+ renormalisation), each chosen
 * expert's SwiGLU MLP, the weighted sum. Plain loops (tasks/L1/moe and L2/fused_experts hold the pieces' loops).
 */
import type { HostArray } from '@fastkernels/core';
import { gateLinearReference } from '../../../tasks/L1/moe/gate_linear.js';
import { topkSoftmaxReference } from '../../../tasks/L1/moe/topk_softmax.js';
import { fusedExpertsReference } from '../L2/fused_experts.js';
import { attnGeometry, decoderStackReference, denseCausalAttention, denseLinear, denseMlp, denseRmsNorm, denseRope, preNormDecoderLayer, ropeAngles, type AttnGeometry, type DenseSeq } from '../reference.js';
import type { MoeConfig } from './config.js';

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

/** Llama attention with Qwen3's per-head q/k RMSNorm (weights `q_norm.weight` / `k_norm.weight`) when qkNormEps is given. */
export function denseMoeAttention(hidden: Float64Array, positions: ArrayLike<number>, params: Params, prefix: string, g: AttnGeometry, seqs: readonly DenseSeq[], layer: number, qkNormEps: number | null): Float64Array {
  const T = positions.length;
  const { numHeads: nq, numKvHeads: nk, headDim: D } = g;
  const qkv = denseLinear(hidden, T, param(params, `${prefix}qkv_proj.weight`), params.get(`${prefix}qkv_proj.bias`));
  const width = (nq + 2 * nk) * D;
  let q: Float64Array = new Float64Array(T * nq * D);
  let k: Float64Array = new Float64Array(T * nk * D);
  const v = new Float64Array(T * nk * D);
  for (let t = 0; t < T; t++) {
    q.set(qkv.subarray(t * width, t * width + nq * D), t * nq * D);
    k.set(qkv.subarray(t * width + nq * D, t * width + (nq + nk) * D), t * nk * D);
    v.set(qkv.subarray(t * width + (nq + nk) * D, (t + 1) * width), t * nk * D);
  }
  if (qkNormEps !== null) {
    q = denseRmsNorm(q, T * nq, param(params, `${prefix}q_norm.weight`), qkNormEps);
    k = denseRmsNorm(k, T * nk, param(params, `${prefix}k_norm.weight`), qkNormEps);
  }
  const angle = ropeAngles(D, g.ropeTheta, g.ropeScaling);
  denseRope(q, positions, nq, D, angle);
  denseRope(k, positions, nk, D, angle);
  const attn = denseCausalAttention(q, k, v, seqs, layer, g, 1 / Math.sqrt(D));
  return denseLinear(attn, T, param(params, `${prefix}o_proj.weight`), params.get(`${prefix}o_proj.bias`));
}

/** The feed-forward block's name in the layer: Mixtral's block_sparse_moe, Qwen3-MoE's mlp. */
export const moeBlockName = (cfg: Pick<MoeConfig, 'modelType'>): string => (cfg.modelType === 'mixtral' ? 'block_sparse_moe' : 'mlp');

/** A MoE decoder layer, unfused: as denseDecoderLayer with the sparse block (or a dense MLP on Qwen3's dense layers). */
export function denseMoeDecoderLayer(hidden: Float64Array, residual: Float64Array | null, positions: ArrayLike<number>, params: Params, prefix: string, cfg: MoeConfig, layer: number, seqs: readonly DenseSeq[]): [Float64Array, Float64Array] {
  const T = positions.length;
  const ffPrefix = `${prefix}${moeBlockName(cfg)}.`;
  return preNormDecoderLayer(
    hidden, residual, positions, params, prefix, cfg.rmsNormEps,
    (x) => denseMoeAttention(x, positions, params, `${prefix}self_attn.`, attnGeometry(cfg, layer), seqs, layer, cfg.qkNorm ? cfg.rmsNormEps : null),
    (y) => (cfg.denseLayers.includes(layer) ? denseMlp(y, T, params, ffPrefix) : denseMoeBlock(y, T, params, ffPrefix, cfg.numExpertsPerTok, cfg.normTopkProb)),
  );
}

/** The MoE model's forward: embed, layers, final norm. Returns the final hidden states [T, H]. */
export function denseMoeModel(ids: ArrayLike<number>, positions: ArrayLike<number>, params: Params, cfg: MoeConfig, seqs: readonly DenseSeq[]): Float64Array {
  return decoderStackReference(ids, params, cfg, (h, res, prefix, l) => denseMoeDecoderLayer(h, res, positions, params, prefix, cfg, l, seqs));
}
