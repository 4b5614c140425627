/**
 * Float64 references of the Kimi-Linear modules (the remote code's modeling_kimi.py and FLA's KDA, as vLLM runs them),
 * in plain loops over host arrays: what the Kimi-Linear L2-L4 tasks and the model tests check against. Parameters by
 * the module tree's names under a prefix ('model.layers.0.self_attn.'); the sparse block's experts as the tree stacks
 * them (FusedMoE's experts.w13_weight / w2_weight) and its correction bias beside the gate. Independent of the
 * modules: the projections, the three short convs, the KDA gate and the per-channel-decay delta rule, the gated norm,
 * the MLA decompression and attention, the grouped sigmoid routing are each written out here.
 */
import { hostArray, type HostArray } from '@fastkernels/core';
import { rmsNormReference } from '../../tasks/L1/norm/rms_norm.js';
import { causalConv1dReference } from '../../tasks/L1/recurrent/causal_conv1d.js';
import type { DenseSeq } from '../dense-moe-llm/reference.js';
import type { KimiLinearConfig } from './kimi-linear-config.js';
import { refHybridDecoderLayer, refHybridGreedy, refHybridModel } from './hybrid-reference.js';
import { refGlaMlp, refLinear } from './reference.js';

type Params = ReadonlyMap<string, HostArray>;

function param(p: Params, name: string): HostArray {
  const t = p.get(name);
  if (!t) throw new Error(`kimi-linear reference: no parameter '${name}' (have ${[...p.keys()].slice(0, 8).join(', ')}, ...)`);
  return t;
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const softplus = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)));

/** RMSNorm over rows of the weight's width: x / rms(x) * w. */
export function refRmsNorm(x: Float64Array, w: HostArray, eps: number): Float64Array {
  return rmsNormReference(hostArray([x.length / w.data.length, w.data.length], x), w, eps).data;
}

/** A KDA layer's state per sequence: the three conv states [projSize, W - 1] (q, k, v) and the delta-rule state [H, K, V]. */
export interface KdaState {
  readonly qConv: Float64Array;
  readonly kConv: Float64Array;
  readonly vConv: Float64Array;
  readonly recurrent: Float64Array;
}

/**
 * KimiDeltaAttention on x [B, T, D] from the states s0 (zeros when null): q / k / v projections each through its own
 * short causal conv (silu), the decay g = -exp(A_log[h]) * softplus(f_b(f_a(x)) + dt_bias) per key channel, beta =
 * sigmoid(b_proj(x)); per head, with q and k l2-normalised (x / sqrt(sum x^2 + 1e-6)) and scale K^-0.5:
 * S = diag(exp(g_t)) S; u = beta_t (v_t - k_t^T S); S += k_t u^T; o_t = scale q_t^T S. Then the gated norm
 * rmsnorm(o) * w * sigmoid(g_b(g_a(x))) per head, o_proj. Returns the output and the final states.
 */
export function refKda(x: Float64Array, B: number, T: number, s0: KdaState | null, p: Params, prefix: string, cfg: KimiLinearConfig): { out: Float64Array } & KdaState {
  const { kdaNumHeads: H, kdaHeadDim: dk, kdaProjSize: C, kdaConvKernelSize: W } = cfg;
  const dv = dk;
  const N = B * T;
  const P = (n: string) => param(p, prefix + n);
  const conv = (name: string, init: Float64Array | null): [Float64Array, Float64Array] => {
    const y = refLinear(x, N, P(`${name}_proj.weight`)); // [N, C]
    const xt = new Float64Array(B * C * T);
    for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) for (let c = 0; c < C; c++) xt[(b * C + c) * T + t] = y[(b * T + t) * C + c]!;
    const [o, fin] = causalConv1dReference(hostArray([B, C, T], xt), hostArray([C, W], P(`${name}_conv1d.weight`).data), null, init ? hostArray([B, C, W - 1], init) : null, 'silu');
    const back = new Float64Array(N * C);
    for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) for (let c = 0; c < C; c++) back[(b * T + t) * C + c] = o.data[(b * C + c) * T + t]!;
    return [back, fin.data];
  };
  const [q, qConv] = conv('q', s0?.qConv ?? null);
  const [k, kConv] = conv('k', s0?.kConv ?? null);
  const [v, vConv] = conv('v', s0?.vConv ?? null);
  const A = P('A_log').data; // [1, 1, H, 1]
  const dt = P('dt_bias').data; // [C]
  const graw = refLinear(refLinear(x, N, P('f_a_proj.weight')), N, P('f_b_proj.weight'));
  const g = graw.map((a, i) => -Math.exp(A[Math.floor((i % C) / dk)]!) * softplus(a + dt[i % C]!));
  const beta = refLinear(x, N, P('b_proj.weight')).map(sigmoid); // [N, H]
  const l2 = (y: Float64Array) => {
    const z = Float64Array.from(y);
    for (let r = 0; r < z.length / dk; r++) {
      let ss = 0;
      for (let i = 0; i < dk; i++) ss += z[r * dk + i]! ** 2;
      const inv = 1 / Math.sqrt(ss + 1e-6);
      for (let i = 0; i < dk; i++) z[r * dk + i]! *= inv;
    }
    return z;
  };
  const [qn, kn] = [l2(q), l2(k)];
  const scale = 1 / Math.sqrt(dk);
  const state = s0 ? Float64Array.from(s0.recurrent) : new Float64Array(B * H * dk * dv);
  const o = new Float64Array(N * C);
  const u = new Float64Array(dv);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const S = state.subarray((b * H + h) * dk * dv, (b * H + h + 1) * dk * dv);
      for (let t = 0; t < T; t++) {
        const n = b * T + t;
        const base = n * C + h * dk;
        for (let i = 0; i < dk; i++) {
          const d = Math.exp(g[base + i]!);
          for (let j = 0; j < dv; j++) S[i * dv + j]! *= d;
        }
        for (let j = 0; j < dv; j++) {
          let kS = 0;
          for (let i = 0; i < dk; i++) kS += kn[base + i]! * S[i * dv + j]!;
          u[j] = beta[n * H + h]! * (v[base + j]! - kS);
        }
        for (let i = 0; i < dk; i++) for (let j = 0; j < dv; j++) S[i * dv + j]! += kn[base + i]! * u[j]!;
        for (let j = 0; j < dv; j++) {
          let acc = 0;
          for (let i = 0; i < dk; i++) acc += qn[base + i]! * S[i * dv + j]!;
          o[base + j] = scale * acc;
        }
      }
    }
  }
  // the gated output norm per head: rmsnorm(o) * w * sigmoid(gate)
  const gate = refLinear(refLinear(x, N, P('g_a_proj.weight')), N, P('g_b_proj.weight'));
  const normed = refRmsNorm(o, P('o_norm.weight'), cfg.rmsNormEps).map((y, i) => y * sigmoid(gate[i]!));
  return { out: refLinear(normed, N, P('o_proj.weight')), qConv, kConv, vConv, recurrent: state };
}

/**
 * KimiMLAAttention (NoPE, no query LoRA) on hidden [T, D], tokens of `seqs` whose cached context is given per layer as
 * the cache keeps it, one row [normed latent (kv_lora_rank) | k_rope] per position ([ctx, 1, R + dr]): q = q_proj(x) per
 * head [nope | rope]; kv_a_proj_with_mqa(x) = [latent | k_rope (one for all heads)]; every position's row decompressed
 * by kv_b_proj into each head's [k_nope | v]; k = [k_nope | k_rope], no rotary; causal softmax attention with scale
 * qHeadDim^-0.5; o_proj over the heads' values. Decompressed explicitly (not the absorbed form the module runs).
 */
export function refMla(hidden: Float64Array, p: Params, prefix: string, cfg: KimiLinearConfig, seqs: readonly DenseSeq[], layer: number): Float64Array {
  const { numAttentionHeads: H, kvLoraRank: R, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, qHeadDim: dq } = cfg;
  const T = hidden.length / cfg.hiddenSize;
  const P = (n: string) => param(p, prefix + n);
  const q = refLinear(hidden, T, P('q_proj.weight')); // [T, H, dq]
  const ckv = refLinear(hidden, T, P('kv_a_proj_with_mqa.weight')); // [T, R + dr]
  const latent = new Float64Array(T * R);
  for (let t = 0; t < T; t++) latent.set(ckv.subarray(t * (R + dr), t * (R + dr) + R), t * R);
  const normed = refRmsNorm(latent, P('kv_a_layernorm.weight'), cfg.rmsNormEps);
  const row = R + dr;
  const rows = new Float64Array(T * row); // this step's cache rows
  for (let t = 0; t < T; t++) {
    rows.set(normed.subarray(t * R, (t + 1) * R), t * row);
    rows.set(ckv.subarray(t * row + R, (t + 1) * row), t * row + R);
  }
  const wb = P('kv_b_proj.weight'); // [H * (dn + dv), R]
  const out = new Float64Array(T * H * dv);
  const scale = 1 / Math.sqrt(dq);
  for (const s of seqs) {
    const L = s.ctx + s.n;
    const all = new Float64Array(L * row);
    if (s.ctx > 0) all.set(s.prefixK[layer]!.subarray(0, s.ctx * row));
    all.set(rows.subarray(s.start * row, (s.start + s.n) * row), s.ctx * row);
    const c = new Float64Array(L * R);
    for (let j = 0; j < L; j++) c.set(all.subarray(j * row, j * row + R), j * R);
    const kvb = refLinear(c, L, wb); // [L, H, dn + dv]
    for (let i = 0; i < s.n; i++) {
      const pos = s.ctx + i;
      for (let h = 0; h < H; h++) {
        const qo = ((s.start + i) * H + h) * dq;
        const sc = new Float64Array(pos + 1);
        let m = -Infinity;
        for (let j = 0; j <= pos; j++) {
          const kb = (j * H + h) * (dn + dv);
          let dot = 0;
          for (let d = 0; d < dn; d++) dot += q[qo + d]! * kvb[kb + d]!;
          for (let d = 0; d < dr; d++) dot += q[qo + dn + d]! * all[j * row + R + d]!;
          sc[j] = dot * scale;
          m = Math.max(m, sc[j]!);
        }
        let sum = 0;
        for (let j = 0; j <= pos; j++) sum += sc[j] = Math.exp(sc[j]! - m);
        const oo = ((s.start + i) * H + h) * dv;
        for (let j = 0; j <= pos; j++) {
          const pj = sc[j]! / sum;
          const vb = (j * H + h) * (dn + dv) + dn;
          for (let d = 0; d < dv; d++) out[oo + d]! += pj * kvb[vb + d]!;
        }
      }
    }
  }
  return refLinear(out, T, P('o_proj.weight'));
}

/**
 * The routing of KimiMoE as vLLM runs it (grouped_topk, DeepSeek-V3's noaux_tc): scores = sigmoid (or softmax) of the
 * router logits; choice scores = scores + e_score_correction_bias; each group scored by the sum of its two best choice
 * scores; the topk_group best groups kept; the top-k experts of those by choice score; weights the unbiased scores,
 * renormalised when moe_renormalize, times routed_scaling_factor. Returns [ids, weights] per row, best first.
 */
export function refKimiRouting(logits: Float64Array, rows: number, bias: ArrayLike<number>, cfg: KimiLinearConfig): { ids: number[][]; weights: number[][] } {
  const { numExperts: E, numExpertsPerToken: K, numExpertGroup: G, topkGroup } = cfg;
  const per = E / G;
  const ids: number[][] = [];
  const weights: number[][] = [];
  for (let r = 0; r < rows; r++) {
    const l = logits.subarray(r * E, (r + 1) * E);
    let scores: number[];
    if (cfg.moeRouterActivationFunc === 'sigmoid') scores = Array.from(l, sigmoid);
    else {
      const m = Math.max(...l);
      const e = Array.from(l, (x) => Math.exp(x - m));
      const s = e.reduce((a, b) => a + b, 0);
      scores = e.map((x) => x / s);
    }
    const choice = scores.map((s, e) => s + bias[e]!);
    const groupScore = Array.from({ length: G }, (_, gi) => {
      const g = choice.slice(gi * per, (gi + 1) * per).sort((a, b) => b - a);
      return g[0]! + (g[1] ?? 0);
    });
    const keptGroups = new Set(groupScore.map((s, gi) => [s, gi] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, topkGroup).map(([, gi]) => gi));
    const order = choice
      .map((s, e) => [s, e] as const)
      .filter(([, e]) => keptGroups.has(Math.floor(e / per)))
      .sort((a, b) => b[0] - a[0] || a[1] - b[1])
      .slice(0, K)
      .map(([, e]) => e);
    let w = order.map((e) => scores[e]!);
    if (cfg.moeRenormalize) {
      const s = w.reduce((a, b) => a + b, 0);
      w = w.map((x) => x / s);
    }
    ids.push(order);
    weights.push(w.map((x) => x * cfg.routedScalingFactor));
  }
  return { ids, weights };
}

/** KimiSparseMoeBlock (vLLM's KimiMoE) on x [rows, D]: the routed SwiGLU experts (stacked w13 / w2) plus the shared experts. */
export function refKimiMoe(x: Float64Array, rows: number, p: Params, prefix: string, cfg: KimiLinearConfig): Float64Array {
  const { hiddenSize: D, moeIntermediateSize: I } = cfg;
  const logits = refLinear(x, rows, param(p, `${prefix}gate.weight`));
  const { ids, weights } = refKimiRouting(logits, rows, param(p, `${prefix}e_score_correction_bias`).data, cfg);
  const w13 = param(p, `${prefix}experts.w13_weight`).data; // [E, 2I, D]
  const w2 = param(p, `${prefix}experts.w2_weight`).data; // [E, D, I]
  const out = cfg.numSharedExperts > 0 ? refGlaMlp(x, rows, p, `${prefix}shared_experts.`) : new Float64Array(rows * D);
  const h = new Float64Array(I);
  for (let r = 0; r < rows; r++) {
    const xr = x.subarray(r * D, (r + 1) * D);
    ids[r]!.forEach((e, j) => {
      for (let i = 0; i < I; i++) {
        let gate = 0;
        let up = 0;
        for (let d = 0; d < D; d++) {
          gate += w13[(e * 2 * I + i) * D + d]! * xr[d]!;
          up += w13[(e * 2 * I + I + i) * D + d]! * xr[d]!;
        }
        h[i] = (gate / (1 + Math.exp(-gate))) * up;
      }
      for (let d = 0; d < D; d++) {
        let acc = 0;
        for (let i = 0; i < I; i++) acc += w2[(e * D + d) * I + i]! * h[i]!;
        out[r * D + d]! += weights[r]![j]! * acc;
      }
    });
  }
  return out;
}

/**
 * A decoder layer on the step's tokens [T, D] (sequences `seqs`, token-major), vLLM's residual form: r = h + residual;
 * x = input_layernorm(r); self_attn (KDA per sequence from its state, or MLA); r' = r + mixer; the feed-forward
 * (block_sparse_moe or mlp) of post_attention_layernorm(r'). Returns [ff output, r'] and, for a KDA layer, each
 * sequence's final states.
 */
export function refKimiDecoderLayer(hidden: Float64Array, residual: Float64Array | null, p: Params, prefix: string, cfg: KimiLinearConfig, layer: number, seqs: readonly DenseSeq[], states: readonly (KdaState | null)[]): { out: Float64Array; residual: Float64Array; states: KdaState[] } {
  return refHybridDecoderLayer<KdaState>(hidden, residual, cfg.hiddenSize, {
    norm: (x, weight) => refRmsNorm(x, param(p, `${prefix}${weight}`), cfg.rmsNormEps),
    recurrent:
      cfg.layerTypes[layer] === 'kda'
        ? (x, n, state) => {
            const { out, ...st } = refKda(x, 1, n, state, p, `${prefix}self_attn.`, cfg);
            return { out, state: st };
          }
        : null,
    attention: (x) => refMla(x, p, `${prefix}self_attn.`, cfg, seqs, layer),
    feedForward: (y, T) => (cfg.sparseLayers[layer] ? refKimiMoe(y, T, p, `${prefix}block_sparse_moe.`, cfg) : refGlaMlp(y, T, p, `${prefix}mlp.`)),
  }, seqs, states);
}

/** KimiLinearModel on the step's tokens: embed, the layers, the final norm; hidden states [T, D]. states[l][i]: sequence i's KDA state in layer l (absent: zeros). */
export function refKimiLinearModel(ids: ArrayLike<number>, p: Params, cfg: KimiLinearConfig, seqs: readonly DenseSeq[], states: readonly (readonly (KdaState | null)[])[] = []): Float64Array {
  return refHybridModel(
    ids,
    param(p, 'model.embed_tokens.weight'),
    cfg.hiddenSize,
    cfg.numHiddenLayers,
    (h, res, l) => refKimiDecoderLayer(h, res, p, `model.layers.${l}.`, cfg, l, seqs, states[l] ?? []),
    (x) => refRmsNorm(x, param(p, 'model.norm.weight'), cfg.rmsNormEps),
  );
}

/** Greedy continuation of `prompt` by full forwards of the whole sequence (no cache, no state carried): the tokens the model picks. */
export function refKimiLinearGreedy(prompt: readonly number[], steps: number, p: Params, cfg: KimiLinearConfig): number[] {
  const head = cfg.tieWordEmbeddings && !p.has('lm_head.weight') ? param(p, 'model.embed_tokens.weight') : param(p, 'lm_head.weight');
  return refHybridGreedy(prompt, steps, head, cfg.hiddenSize, cfg.numHiddenLayers, (seq, _positions, seqs) => refKimiLinearModel(seq, p, cfg, seqs));
}
