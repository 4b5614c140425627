/**
 * Float64 references of the Qwen3-Next modules (HF transformers' modeling_qwen3_next definitions), in plain loops over
 * host arrays: what the Qwen3-Next L2-L4 tasks and the model tests check against. Parameters by the module tree's names
 * under a prefix ('model.layers.0.linear_attn.'); the sparse block's experts as the tree stacks them (FusedMoE's
 * experts.w13_weight / w2_weight). Independent of the modules: the projections' splits, the conv, the gates, the delta
 * rule, the norms, rotary and attention are each written out here.
 */
import { hostArray, type HostArray } from '@fastkernels/core';
import { rmsNormGatedReference } from '../../tasks/L1/norm/rms_norm_gated.js';
import { gemmaRmsNormReference } from '../../tasks/L1/norm/gemma_rms_norm.js';
import { causalConv1dReference } from '../../tasks/L1/recurrent/causal_conv1d.js';
import { gatedDeltaRuleReference } from '../../tasks/L1/recurrent/delta-rule-common.js';
import { denseMoeBlock } from '../dense-moe-llm/moe/reference.js';
import { denseCausalAttention, type DenseSeq } from '../dense-moe-llm/reference.js';
import type { Qwen3NextConfig } from './qwen3-next-config.js';
import { refHybridDecoderLayer, refHybridGreedy, refHybridModel } from './hybrid-reference.js';
import { refGlaMlp, refLinear } from './reference.js';

type Params = ReadonlyMap<string, HostArray>;

function param(p: Params, name: string): HostArray {
  const t = p.get(name);
  if (!t) throw new Error(`qwen3-next reference: no parameter '${name}' (have ${[...p.keys()].slice(0, 8).join(', ')}, ...)`);
  return t;
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const softplus = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)));

/** Zero-centred RMSNorm over rows of the weight's width: x / rms(x) * (1 + w). */
export function refZcRmsNorm(x: Float64Array, w: HostArray, eps: number): Float64Array {
  return gemmaRmsNormReference(hostArray([x.length / w.data.length, w.data.length], x), w, eps).data;
}

/** One recurrent layer's state per sequence: the conv state [convDim, W - 1] and the delta-rule state [HV, K, V]. */
export interface GdnState {
  readonly conv: Float64Array;
  readonly recurrent: Float64Array;
}

/**
 * Qwen3NextGatedDeltaNet on x [B, T, D] from the states s0 (zeros when null; conv [B, convDim, W - 1], recurrent
 * [B, HV, K, V]): in_proj_qkvz / in_proj_ba split per key-head group, the short causal conv (silu) over q | k | v, beta =
 * sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias), the delta rule with l2-normed q / k (value head hv reads key head
 * floor(hv / r)), the gated RMSNorm with z, out_proj. Returns the output and the final states.
 */
export function refGatedDeltaNet(x: Float64Array, B: number, T: number, s0: { conv: Float64Array; recurrent: Float64Array } | null, p: Params, prefix: string, cfg: Qwen3NextConfig): { out: Float64Array } & GdnState {
  const { linearNumKeyHeads: Hk, linearNumValueHeads: HV, linearKeyHeadDim: dk, linearValueHeadDim: dv, linearKeyDim, convDim, linearConvKernelDim: W } = cfg;
  const r = HV / Hk;
  const N = B * T;
  const P = (n: string) => param(p, prefix + n);
  const qkvz = refLinear(x, N, P('in_proj_qkvz.weight'));
  const ba = refLinear(x, N, P('in_proj_ba.weight'));
  const group = 2 * dk + 2 * r * dv;
  // mixed [B, convDim, T] (channels q | k | v) for the conv; z [N, HV, dv]; b, a [N, HV]
  const mixed = new Float64Array(B * convDim * T);
  const z = new Float64Array(N * HV * dv);
  const bRaw = new Float64Array(N * HV);
  const aRaw = new Float64Array(N * HV);
  for (let n = 0; n < N; n++) {
    const [b, t] = [Math.floor(n / T), n % T];
    const put = (ch: number, v: number) => (mixed[(b * convDim + ch) * T + t] = v);
    for (let h = 0; h < Hk; h++) {
      const g0 = n * Hk * group + h * group;
      for (let i = 0; i < dk; i++) {
        put(h * dk + i, qkvz[g0 + i]!);
        put(linearKeyDim + h * dk + i, qkvz[g0 + dk + i]!);
      }
      for (let j = 0; j < r * dv; j++) {
        put(2 * linearKeyDim + h * r * dv + j, qkvz[g0 + 2 * dk + j]!);
        z[n * HV * dv + h * r * dv + j] = qkvz[g0 + 2 * dk + r * dv + j]!;
      }
      for (let i = 0; i < r; i++) {
        bRaw[n * HV + h * r + i] = ba[n * Hk * 2 * r + h * 2 * r + i]!;
        aRaw[n * HV + h * r + i] = ba[n * Hk * 2 * r + h * 2 * r + r + i]!;
      }
    }
  }
  const w = P('conv1d.weight'); // [convDim, 1, W]
  const [conv, convFinal] = causalConv1dReference(hostArray([B, convDim, T], mixed), hostArray([convDim, W], w.data), null, s0 ? hostArray([B, convDim, W - 1], s0.conv) : null, 'silu');
  const q = hostArray([B, T, Hk, dk]);
  const k = hostArray([B, T, Hk, dk]);
  const v = hostArray([B, T, HV, dv]);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const at = (ch: number) => conv.data[(b * convDim + ch) * T + t]!;
      const n = b * T + t;
      for (let c = 0; c < linearKeyDim; c++) {
        q.data[n * linearKeyDim + c] = at(c);
        k.data[n * linearKeyDim + c] = at(linearKeyDim + c);
      }
      for (let c = 0; c < HV * dv; c++) v.data[n * HV * dv + c] = at(2 * linearKeyDim + c);
    }
  }
  const A = P('A_log').data;
  const dt = P('dt_bias').data;
  const beta = hostArray([B, T, HV], bRaw.map(sigmoid));
  const g = hostArray([B, T, HV], aRaw.map((a, i) => -Math.exp(A[i % HV]!) * softplus(a + dt[i % HV]!)));
  const [o, state] = gatedDeltaRuleReference({ q, k, v, g, beta, s0: s0 ? hostArray([B, HV, dk, dv], s0.recurrent) : null, scale: null, l2norm: true });
  const normed = rmsNormGatedReference(hostArray([N * HV, dv], o.data), hostArray([N * HV, dv], z), P('norm.weight'), cfg.rmsNormEps, null, true, 'silu');
  return { out: refLinear(normed.data, N, P('out_proj.weight')), conv: convFinal.data, recurrent: state.data };
}

/** Neox-style rotary of the first `rot` dims of each head (pairs i, i + rot / 2), inv_freq over rot. */
function partialRope(x: Float64Array, positions: ArrayLike<number>, heads: number, D: number, rot: number, theta: number): void {
  const half = rot / 2;
  for (let t = 0; t < positions.length; t++) {
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * D;
      for (let i = 0; i < half; i++) {
        const ang = positions[t]! * Math.pow(theta, (-2 * i) / rot);
        const [c, s] = [Math.cos(ang), Math.sin(ang)];
        const [x1, x2] = [x[base + i]!, x[base + half + i]!];
        x[base + i] = x1 * c - x2 * s;
        x[base + half + i] = x2 * c + x1 * s;
      }
    }
  }
}

/**
 * Qwen3NextAttention on hidden [T, D] (tokens of `seqs`, with their cached context keys / values already rotated):
 * q_proj gives each head's query then its gate, zero-centred q_norm / k_norm per head, partial rotary, causal attention
 * (GQA), times sigmoid(gate), o_proj.
 */
export function refGatedAttention(hidden: Float64Array, positions: ArrayLike<number>, p: Params, prefix: string, cfg: Qwen3NextConfig, seqs: readonly DenseSeq[], layer: number): Float64Array {
  const T = positions.length;
  const { numAttentionHeads: nq, numKeyValueHeads: nk, headDim: hd } = cfg;
  const P = (n: string) => param(p, prefix + n);
  const qg = refLinear(hidden, T, P('q_proj.weight'));
  const q = new Float64Array(T * nq * hd);
  const gate = new Float64Array(T * nq * hd);
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < nq; h++) {
      q.set(qg.subarray((t * nq + h) * 2 * hd, (t * nq + h) * 2 * hd + hd), (t * nq + h) * hd);
      gate.set(qg.subarray((t * nq + h) * 2 * hd + hd, (t * nq + h + 1) * 2 * hd), (t * nq + h) * hd);
    }
  }
  const qn = refZcRmsNorm(q, P('q_norm.weight'), cfg.rmsNormEps);
  const kn = refZcRmsNorm(refLinear(hidden, T, P('k_proj.weight')), P('k_norm.weight'), cfg.rmsNormEps);
  const v = refLinear(hidden, T, P('v_proj.weight'));
  partialRope(qn, positions, nq, hd, cfg.rotaryDim, cfg.ropeTheta);
  partialRope(kn, positions, nk, hd, cfg.rotaryDim, cfg.ropeTheta);
  const geom = { hiddenSize: cfg.hiddenSize, numHeads: nq, numKvHeads: nk, headDim: hd, ropeTheta: cfg.ropeTheta, ropeScaling: null, slidingWindow: 0 };
  const attn = denseCausalAttention(qn, kn, v, seqs, layer, geom, 1 / Math.sqrt(hd));
  return refLinear(attn.map((a, i) => a * sigmoid(gate[i]!)), T, P('o_proj.weight'));
}

/** Qwen3NextSparseMoeBlock on x [rows, D]: routed experts (softmax top-k, renormalised with norm_topk_prob) + sigmoid(shared_expert_gate(x)) * shared_expert(x). */
export function refSharedExpertMoe(x: Float64Array, rows: number, p: Params, prefix: string, cfg: Qwen3NextConfig): Float64Array {
  const routed = denseMoeBlock(x, rows, p, prefix, cfg.numExpertsPerTok, cfg.normTopkProb);
  const shared = refGlaMlp(x, rows, p, `${prefix}shared_expert.`);
  const gate = refLinear(x, rows, param(p, `${prefix}shared_expert_gate.weight`));
  const D = cfg.hiddenSize;
  return routed.map((y, i) => y + sigmoid(gate[Math.floor(i / D)]!) * shared[i]!);
}

/**
 * A decoder layer on the step's tokens [T, D] (sequences `seqs`, token-major), vLLM's form: r = h + residual; x =
 * input_layernorm(r); mixer (gated DeltaNet per sequence from its state, or gated attention); r' = r + mixer;
 * mlp(post_attention_layernorm(r')). Returns [mlp output, r'] and, for a DeltaNet layer, each sequence's final state.
 */
export function refQwen3NextDecoderLayer(hidden: Float64Array, residual: Float64Array | null, positions: ArrayLike<number>, p: Params, prefix: string, cfg: Qwen3NextConfig, layer: number, seqs: readonly DenseSeq[], states: readonly (GdnState | null)[]): { out: Float64Array; residual: Float64Array; states: GdnState[] } {
  return refHybridDecoderLayer<GdnState>(hidden, residual, cfg.hiddenSize, {
    norm: (x, weight) => refZcRmsNorm(x, param(p, `${prefix}${weight}`), cfg.rmsNormEps),
    recurrent:
      cfg.layerTypes[layer] === 'linear_attention'
        ? (x, n, state) => {
            const r = refGatedDeltaNet(x, 1, n, state, p, `${prefix}linear_attn.`, cfg);
            return { out: r.out, state: { conv: r.conv, recurrent: r.recurrent } };
          }
        : null,
    attention: (x) => refGatedAttention(x, positions, p, `${prefix}self_attn.`, cfg, seqs, layer),
    feedForward: (y, T) => (cfg.sparseLayers[layer] ? refSharedExpertMoe(y, T, p, `${prefix}mlp.`, cfg) : refGlaMlp(y, T, p, `${prefix}mlp.`)),
  }, seqs, states);
}

/**
 * Qwen3NextModel on the step's tokens: embed, the layers, the final norm; hidden states [T, D]. `states[l][i]` is
 * sequence i's state in DeltaNet layer l (absent: zeros, a fresh sequence).
 */
export function refQwen3NextModel(ids: ArrayLike<number>, positions: ArrayLike<number>, p: Params, cfg: Qwen3NextConfig, seqs: readonly DenseSeq[], states: readonly (readonly (GdnState | null)[])[] = []): Float64Array {
  return refHybridModel(
    ids,
    param(p, 'model.embed_tokens.weight'),
    cfg.hiddenSize,
    cfg.numHiddenLayers,
    (h, res, l) => refQwen3NextDecoderLayer(h, res, positions, p, `model.layers.${l}.`, cfg, l, seqs, states[l] ?? []),
    (x) => refZcRmsNorm(x, param(p, 'model.norm.weight'), cfg.rmsNormEps),
  );
}

/** Greedy continuation of `prompt` by full forwards of the whole sequence (no cache): the tokens the model picks. */
export function refQwen3NextGreedy(prompt: readonly number[], steps: number, p: Params, cfg: Qwen3NextConfig): number[] {
  const head = cfg.tieWordEmbeddings && !p.has('lm_head.weight') ? param(p, 'model.embed_tokens.weight') : param(p, 'lm_head.weight');
  return refHybridGreedy(prompt, steps, head, cfg.hiddenSize, cfg.numHiddenLayers, (seq, positions, seqs) => refQwen3NextModel(seq, positions, p, cfg, seqs));
}
