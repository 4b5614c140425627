/**
 * Float64 references of the GLA modules (FLA's definitions), in plain loops over host arrays: what the L2-L4 tasks and
 * the model tests check against. Parameters by the tree's names under a prefix ('model.layers.0.attn.').
 */
import { hostArray, type HostArray } from '@fastkernels/core';
import { logSigmoidReference } from '../../tasks/L1/activation/log_sigmoid.js';
import { rmsNormGatedReference } from '../../tasks/L1/norm/rms_norm_gated.js';
import { glaRecurrenceReference } from '../../tasks/L1/recurrent/gla-common.js';
import type { GlaConfig } from './config.js';

type Params = ReadonlyMap<string, HostArray>;

function param(p: Params, name: string): HostArray {
  const t = p.get(name);
  if (!t) throw new Error(`reference: no parameter '${name}' (have ${[...p.keys()].slice(0, 8).join(', ')}, ...)`);
  return t;
}

/** y = x W^T (+ b): x [N, in] flat, W [out, in]. */
export function refLinear(x: Float64Array, N: number, w: HostArray, b: HostArray | null = null): Float64Array {
  const [O, I] = w.shape as [number, number];
  const y = new Float64Array(N * O);
  for (let n = 0; n < N; n++) {
    for (let o = 0; o < O; o++) {
      let acc = b ? b.data[o]! : 0;
      for (let i = 0; i < I; i++) acc += x[n * I + i]! * w.data[o * I + i]!;
      y[n * O + o] = acc;
    }
  }
  return y;
}

/** RMSNorm over rows of width w.length. */
export function refRmsNorm(x: Float64Array, w: HostArray, eps: number): Float64Array {
  return rmsNormGatedReference(hostArray([x.length / w.data.length, w.data.length], x), null, w, eps, null, true, 'swish').data;
}

/** GatedLinearAttention on x [B, T, D] with the state s0 [B, H, K, V] (zeros when null): the output and the final state. */
export function refGlaAttention(x: Float64Array, B: number, T: number, s0: Float64Array | null, p: Params, prefix: string, cfg: GlaConfig): { out: Float64Array; state: Float64Array } {
  const { numHeads: H, headKDim: K, headVDim: V } = cfg;
  const N = B * T;
  const P = (n: string) => param(p, prefix + n);
  const q = refLinear(x, N, P('q_proj.weight'));
  const k = refLinear(x, N, P('k_proj.weight'));
  const v = refLinear(x, N, P('v_proj.weight'));
  const low = refLinear(x, N, P('gk_proj.0.weight'));
  const logits = refLinear(low, N, P('gk_proj.1.weight'), P('gk_proj.1.bias'));
  const gk = logSigmoidReference(hostArray([logits.length], logits)).data.map((g) => Math.max(g / cfg.gateLogitNormalizer, cfg.clampMin ?? -Infinity));
  const [o, state] = glaRecurrenceReference(
    hostArray([B, T, H, K], q),
    hostArray([B, T, H, K], k),
    hostArray([B, T, H, V], v),
    hostArray([B, T, H, K], gk),
    s0 ? hostArray([B, H, K, V], s0) : null,
    null,
  );
  const g = refLinear(x, N, P('g_proj.weight'));
  const normed = rmsNormGatedReference(hostArray([N * H, V], o.data), hostArray([N * H, V], g), P('g_norm_swish_gate.weight'), cfg.normEps, null, true, 'swish');
  return { out: refLinear(normed.data, N, P('o_proj.weight')), state: state.data };
}

/** GLAMLP (FLA GatedMLP): down(silu(gate(x)) * up(x)) over x [N, D]. */
export function refGlaMlp(x: Float64Array, N: number, p: Params, prefix: string): Float64Array {
  const gate = refLinear(x, N, param(p, `${prefix}gate_proj.weight`));
  const up = refLinear(x, N, param(p, `${prefix}up_proj.weight`));
  const h = gate.map((a, i) => (a / (1 + Math.exp(-a))) * up[i]!);
  return refLinear(h, N, param(p, `${prefix}down_proj.weight`));
}

/** GLABlock: x + attn(attn_norm(x)) = r; r + mlp(mlp_norm(r)). Returns the block output and the final state. */
export function refGlaBlock(x: Float64Array, B: number, T: number, s0: Float64Array | null, p: Params, prefix: string, cfg: GlaConfig): { out: Float64Array; state: Float64Array } {
  const N = B * T;
  const h = refRmsNorm(x, param(p, `${prefix}attn_norm.weight`), cfg.normEps);
  const a = refGlaAttention(h, B, T, s0, p, `${prefix}attn.`, cfg);
  const r = x.map((v, i) => v + a.out[i]!);
  const m = refGlaMlp(refRmsNorm(r, param(p, `${prefix}mlp_norm.weight`), cfg.normEps), N, p, `${prefix}mlp.`);
  return { out: r.map((v, i) => v + m[i]!), state: a.state };
}

/**
 * GLAForCausalLM on ids [B, T] with the stacked state [L, B, H, K, V] (zeros when null): logits [B, T, vocab] of every
 * position and the final stacked state.
 */
export function refGlaModel(ids: ArrayLike<number>, B: number, T: number, s0: Float64Array | null, p: Params, cfg: GlaConfig): { logits: Float64Array; state: Float64Array } {
  const D = cfg.hiddenSize;
  const emb = param(p, 'model.embeddings.weight');
  let h: Float64Array = new Float64Array(B * T * D);
  for (let n = 0; n < B * T; n++) h.set(emb.data.subarray(ids[n]! * D, (ids[n]! + 1) * D), n * D);
  const per = B * cfg.numHeads * cfg.headKDim * cfg.headVDim;
  const state = new Float64Array(cfg.numHiddenLayers * per);
  for (let l = 0; l < cfg.numHiddenLayers; l++) {
    const r = refGlaBlock(h, B, T, s0 ? s0.subarray(l * per, (l + 1) * per) : null, p, `model.layers.${l}.`, cfg);
    h = r.out;
    state.set(r.state, l * per);
  }
  const normed = refRmsNorm(h, param(p, 'model.norm.weight'), cfg.normEps);
  const head = cfg.tieWordEmbeddings && !p.has('lm_head.weight') ? emb : param(p, 'lm_head.weight');
  return { logits: refLinear(normed, B * T, head), state };
}
