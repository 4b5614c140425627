/**
 * What the gated-delta-rule L1 tasks (chunk_gated_delta_rule, fused_recurrent_gated_delta_rule) and KDA's (chunk_kda,
 * fused_recurrent_kda: the decay per key channel, g [B, T, HV, K]) share: the float64 recurrence they are checked against, the same function computed chunk by chunk (the WY / UT-transform form FLA's
 * chunked kernel uses: within a chunk the delta updates are one unit-lower-triangular solve), their inputs as
 * Qwen3-Next's gated DeltaNet makes them, and their work count. Plain loops written from the definition (FLA
 * fla/ops/gated_delta_rule/naive.py and the Gated DeltaNet paper), not from any backend's kernel.
 *
 * Layout (FLA, head_first = False): q, k [B, T, H, K]; v [B, T, HV, V]; g, beta [B, T, HV] (KDA's g [B, T, HV, K]);
 * states [B, HV, K, V]. With HV = r * H value heads, value head hv reads q/k head floor(hv / r) (HF's repeat_interleave
 * of q and k).
 */
import { DTYPE_INFO, F, Module, hostArray, type ExecutionContext, type HostArray, type Rng, type TaskCase, type TaskCaseInput, type Tensor, type WorkCount } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { OpTensorArg } from '../../define-op-task.js';

/** FLA's l2norm (x / sqrt(sum x^2 + 1e-6)) over rows of K, on a copy. */
function l2normRows(x: Float64Array, K: number): Float64Array {
  const y = Float64Array.from(x);
  for (let r = 0; r < y.length / K; r++) {
    let ss = 0;
    for (let i = 0; i < K; i++) ss += y[r * K + i]! ** 2;
    const inv = 1 / Math.sqrt(ss + 1e-6);
    for (let i = 0; i < K; i++) y[r * K + i]! *= inv;
  }
  return y;
}

interface DeltaArgs {
  readonly q: HostArray;
  readonly k: HostArray;
  readonly v: HostArray;
  readonly g: HostArray;
  readonly beta: HostArray;
  readonly s0: HostArray | null;
  readonly scale: number | null;
  readonly l2norm: boolean;
}

function prepare({ q, k, v, g, s0, scale, l2norm }: DeltaArgs) {
  const [B, T, H, K] = q.shape as [number, number, number, number];
  const [HV, V] = [v.shape[2]!, v.shape[3]!];
  // KDA: g [B, T, HV, K], a log decay a key channel; else one a value head
  const GK = g.shape.length === 4 ? K : 1;
  return {
    B, T, H, K, HV, V, GK,
    /** The log decay of (value-head row, key channel i). */
    gAt: (row: number, i: number) => g.data[row * GK + (GK === 1 ? 0 : i)]!,
    r: HV / H,
    sc: scale ?? 1 / Math.sqrt(K),
    Q: l2norm ? l2normRows(q.data, K) : q.data,
    Kt: l2norm ? l2normRows(k.data, K) : k.data,
    state: hostArray([B, HV, K, V], s0 ? s0.data : undefined),
  };
}

/**
 * The definition, token by token, per value head: S = exp(g_t) S (KDA: S = diag(exp(g_t)) S, row i by its channel's
 * decay); u = beta_t (v_t - k_t^T S); S = S + k_t u^T; o_t = scale * q_t S (scale defaults to K^-0.5; q, k
 * l2-normalised first when l2norm). Returns o [B, T, HV, V] and the final state [B, HV, K, V] (from s0, zeros when null).
 */
export function gatedDeltaRuleReference(args: DeltaArgs): [HostArray, HostArray] {
  const { B, T, H, K, HV, V, r, sc, Q, Kt, state, gAt } = prepare(args);
  const { v, beta } = args;
  const o = hostArray([B, T, HV, V]);
  const u = new Float64Array(V);
  for (let b = 0; b < B; b++) {
    for (let hv = 0; hv < HV; hv++) {
      const S = state.data.subarray((b * HV + hv) * K * V, (b * HV + hv + 1) * K * V);
      const h = Math.floor(hv / r);
      for (let t = 0; t < T; t++) {
        const qk = ((b * T + t) * H + h) * K;
        const row = (b * T + t) * HV + hv;
        for (let i = 0; i < K; i++) {
          const decay = Math.exp(gAt(row, i));
          for (let j = 0; j < V; j++) S[i * V + j]! *= decay;
        }
        for (let j = 0; j < V; j++) {
          let kS = 0;
          for (let i = 0; i < K; i++) kS += Kt[qk + i]! * S[i * V + j]!;
          u[j] = beta.data[row]! * (v.data[row * V + j]! - kS);
        }
        for (let i = 0; i < K; i++) for (let j = 0; j < V; j++) S[i * V + j]! += Kt[qk + i]! * u[j]!;
        for (let j = 0; j < V; j++) {
          let acc = 0;
          for (let i = 0; i < K; i++) acc += Q[qk + i]! * S[i * V + j]!;
          o.data[row * V + j] = sc * acc;
        }
      }
    }
  }
  return [o, state];
}

/**
 * The same function chunk by chunk (FLA's chunk_gated_delta_rule algorithm, in float64). In a chunk of C tokens starting
 * from the state S0, with G_t the cumulative log decay inside the chunk and γ_t = exp(G_t), the state after token t is
 * γ_t S0 + Σ_{j<=t} (γ_t / γ_j) k_j u_j^T, so the corrections u solve the unit lower-triangular system
 * u_t + β_t Σ_{j<t} (γ_t / γ_j) (k_t · k_j) u_j = β_t (v_t - γ_t k_t^T S0) (the UT transform), all tokens of the chunk
 * at once; then o_t = scale (γ_t q_t^T S0 + Σ_{j<=t} (γ_t / γ_j) (q_t · k_j) u_j) and the next chunk starts from
 * γ_C S0 + Σ_j (γ_C / γ_j) k_j u_j^T. No token-to-token state update: what a chunked kernel computes. KDA (g a decay a
 * key channel): γ_t is the diagonal diag(exp(G_t[i])), so γ_t / γ_j weighs each key channel inside the products
 * (k_t · k_j becomes Σ_i k_t[i] exp(G_t[i] - G_j[i]) k_j[i]) and row i of the state decays by its own γ.
 */
export function chunkGatedDeltaRuleReference(args: DeltaArgs, chunkSize: number): [HostArray, HostArray] {
  if (!Number.isInteger(chunkSize) || chunkSize < 1) throw new RangeError(`chunkGatedDeltaRuleReference: chunk size ${chunkSize}`);
  const { B, T, H, K, HV, V, r, sc, Q, Kt, state, GK, gAt } = prepare(args);
  const { v, beta } = args;
  const o = hostArray([B, T, HV, V]);
  for (let b = 0; b < B; b++) {
    for (let hv = 0; hv < HV; hv++) {
      const S = state.data.subarray((b * HV + hv) * K * V, (b * HV + hv + 1) * K * V);
      const h = Math.floor(hv / r);
      for (let t0 = 0; t0 < T; t0 += chunkSize) {
        const C = Math.min(chunkSize, T - t0);
        const qk = (t: number) => ((b * T + t0 + t) * H + h) * K;
        const row = (t: number) => (b * T + t0 + t) * HV + hv;
        // G[t * GK + i]: the running log decay of token t (key channel i for KDA)
        const G = new Float64Array(C * GK);
        for (let i = 0; i < GK; i++) for (let t = 0, acc = 0; t < C; t++) G[t * GK + i] = acc += gAt(row(t), i);
        const Gi = (t: number, i: number) => G[t * GK + (GK === 1 ? 0 : i)]!;
        /** Σ_i X[a + i] Y[c + i] exp(G_t[i] - G_s[i]): the decayed product of token t's row with token s's. */
        const dot = (X: Float64Array, a: number, Y: Float64Array, c: number, t: number, s: number) => {
          let acc = 0;
          for (let i = 0; i < K; i++) acc += X[a + i]! * Y[c + i]! * Math.exp(Gi(t, i) - Gi(s, i));
          return acc;
        };
        // right-hand side beta_t (v_t - gamma_t k_t^T S0), then forward substitution
        const U = new Float64Array(C * V);
        for (let t = 0; t < C; t++) {
          const bt = beta.data[row(t)]!;
          for (let j = 0; j < V; j++) {
            let kS = 0;
            for (let i = 0; i < K; i++) kS += Kt[qk(t) + i]! * Math.exp(Gi(t, i)) * S[i * V + j]!;
            U[t * V + j] = bt * (v.data[row(t) * V + j]! - kS);
          }
          for (let s = 0; s < t; s++) {
            const a = bt * dot(Kt, qk(t), Kt, qk(s), t, s);
            for (let j = 0; j < V; j++) U[t * V + j]! -= a * U[s * V + j]!;
          }
        }
        for (let t = 0; t < C; t++) {
          const qkt = Array.from({ length: t + 1 }, (_, s) => dot(Q, qk(t), Kt, qk(s), t, s));
          for (let j = 0; j < V; j++) {
            let acc = 0;
            for (let i = 0; i < K; i++) acc += Q[qk(t) + i]! * Math.exp(Gi(t, i)) * S[i * V + j]!;
            for (let s = 0; s <= t; s++) acc += qkt[s]! * U[s * V + j]!;
            o.data[row(t) * V + j] = sc * acc;
          }
        }
        for (let i = 0; i < K; i++) {
          const gC = Math.exp(Gi(C - 1, i));
          for (let j = 0; j < V; j++) S[i * V + j]! *= gC;
        }
        for (let s = 0; s < C; s++) {
          for (let i = 0; i < K; i++) {
            const ki = Math.exp(Gi(C - 1, i) - Gi(s, i)) * Kt[qk(s) + i]!;
            for (let j = 0; j < V; j++) S[i * V + j]! += ki * U[s * V + j]!;
          }
        }
      }
    }
  }
  return [o, state];
}

/** The op inputs as forward arguments (initial_state optional; the engine's pooled form: cu_seqlens, ssm_state_indices). */
export const DELTA_FORWARD: Readonly<Record<string, OpTensorArg>> = {
  q: { shape: ['B', 'T', 'H', 'K'] },
  k: { shape: ['B', 'T', 'H', 'K'] },
  v: { shape: ['B', 'T', 'HV', 'V'] },
  g: { shape: ['B', 'T', 'HV'], doc: 'log decay (<= 0): Qwen3-Next gives -exp(A_log) * softplus(a + dt_bias)' },
  beta: { shape: ['B', 'T', 'HV'], doc: 'write strength in (0, 1): sigmoid(b)' },
  initial_state: { shape: ['B', 'HV', 'K', 'V'], dtype: 'f32', doc: 'the state carried in (prefill chunk or decode); zeros when absent. With ssm_state_indices: the state pool [slots, HV, K, V], updated in place' },
  cu_seqlens: { shape: ['N1'], dtype: 'i32', doc: 'FLA varlen: offsets of the sequences packed along T (B = 1); absent in the benchmark cases' },
  ssm_state_indices: { shape: ['N'], dtype: 'i32', doc: "vLLM: each sequence's pool slot (-1: padding); only o is returned. The engine's form; absent in the benchmark cases" },
};

/** KDA's forward arguments: the delta rule's, with g a log decay a key channel. */
export const KDA_FORWARD: Readonly<Record<string, OpTensorArg>> = {
  ...DELTA_FORWARD,
  g: { shape: ['B', 'T', 'HV', 'K'], doc: 'log decay per key channel (<= 0): Kimi-Linear gives -exp(A_log) * softplus(f_b_proj(f_a_proj(x)) + dt_bias) (FLA fused_kda_gate)' },
};

export const DELTA_OUTPUTS: readonly OpTensorArg[] = [{ shape: ['B', 'T', 'HV', 'V'] }, { shape: ['B', 'HV', 'K', 'V'], dtype: 'f32' }];

/** The init args the delta-rule cases give: (scale, useQkL2normInKernel). */
export const deltaScale = (c: Pick<TaskCase, 'init'>): number | null => (c.init[0] as number | null | undefined) ?? null;
export const deltaL2norm = (c: Pick<TaskCase, 'init'>): boolean => (c.init[1] as boolean | undefined) ?? false;

/**
 * q, k, v ~ N(0, 1) (q and k l2-normalised here when the case does not ask the kernel to: the delta rule is only stable
 * for |k| ~ 1); g = -softplus(N(0, 1)) / 2 and beta = sigmoid(N(0, 1)), as the gated DeltaNet's gates; the state
 * ~ N(0, 1) f32 when options.initial_state.
 */
export function makeDeltaInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): (Tensor | null)[] {
  return deltaInputs(c, ctx, rng, false);
}

/** KDA's inputs: as makeDeltaInputs, with g [B, T, HV, K] (a decay a key channel). */
export function makeKdaInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): (Tensor | null)[] {
  return deltaInputs(c, ctx, rng, true);
}

function deltaInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng, channelGate: boolean): (Tensor | null)[] {
  const { B, T, H, HV, K, V } = c.dims as Record<'B' | 'T' | 'H' | 'HV' | 'K' | 'V', number>;
  const qk = () => {
    const x = randn(ctx, rng, [B, T, H, K], c.dtype);
    if (deltaL2norm(c)) return x;
    const n = F.l2Norm(x);
    x.dispose();
    return n;
  };
  const q = qk();
  const k = qk();
  const v = randn(ctx, rng, [B, T, HV, V], c.dtype);
  const a = randn(ctx, rng, channelGate ? [B, T, HV, K] : [B, T, HV], c.dtype);
  const sp = F.softplus(a);
  const g = F.mul(sp, -0.5);
  const b = randn(ctx, rng, [B, T, HV], c.dtype);
  const beta = F.sigmoid(b);
  for (const t of [a, sp, b]) t.dispose();
  const s0 = c.options.initial_state ? randn(ctx, rng, [B, HV, K, V], 'f32') : null;
  return [q, k, v, g, beta, s0];
}

/** Reads q, k, v, g, beta (and the state in and out) once, writes o; about 6 K V flops per token and value head. */
export function deltaWork(c: TaskCase): WorkCount {
  return work(c, false);
}

/** KDA's: as deltaWork, g read per key channel. */
export function kdaWork(c: TaskCase): WorkCount {
  return work(c, true);
}

function work(c: TaskCase, channelGate: boolean): WorkCount {
  const { B, T, H, HV, K, V } = c.dims as Record<'B' | 'T' | 'H' | 'HV' | 'K' | 'V', number>;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const state = bytesOf([B, HV, K, V], 4) * (c.options.initial_state ? 2 : 1);
  const gates = bytesOf([B, T, HV], it) + bytesOf(channelGate ? [B, T, HV, K] : [B, T, HV], it);
  return { bytes: 2 * bytesOf([B, T, H, K], it) + 2 * bytesOf([B, T, HV, V], it) + gates + state, flops: 6 * B * T * HV * K * V };
}

/** Qwen3-Next-80B-A3B's gated DeltaNet heads: 16 q/k heads, 32 value heads, 128 each. */
export const QWEN3_NEXT_80B_DELTA_HEADS = { H: 16, HV: 32, K: 128, V: 128 } as const;

/** A case over the Qwen3-Next-80B heads. */
export const qwen3NextDeltaCase = (name: string, B: number, T: number, state: boolean): TaskCaseInput => ({
  name,
  dtype: 'bf16',
  dims: { B, T, ...QWEN3_NEXT_80B_DELTA_HEADS },
  init: [null, true],
  options: state ? { initial_state: true } : {},
});

/** Kimi-Linear-48B-A3B's KDA heads (linear_attn_config): 32 heads for q, k and v alike, head_dim 128. */
export const KIMI_LINEAR_48B_KDA_HEADS = { H: 32, HV: 32, K: 128, V: 128 } as const;

/** A case over the Kimi-Linear-48B KDA heads (in-kernel q / k l2norm, as KimiDeltaAttention calls it). */
export const kimiKdaCase = (name: string, B: number, T: number, state: boolean): TaskCaseInput => ({
  name,
  dtype: 'bf16',
  dims: { B, T, ...KIMI_LINEAR_48B_KDA_HEADS },
  init: [null, true],
  options: state ? { initial_state: true } : {},
});

/** The four delta-rule ops' call: the registry op's name on F and its pooled / unpooled arguments. */
type DeltaOpCall = (q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, opts: {
  scale: number | null; initial_state: Tensor | null; output_final_state: boolean; use_qk_l2norm_in_kernel: boolean; cu_seqlens: Tensor | null; ssm_state_indices: Tensor | null;
}) => Tensor[];

/**
 * What the four FLA delta-rule modules share (fused_recurrent / chunk x gated delta rule / KDA): scale and
 * use_qk_l2norm_in_kernel as constructor arguments (FLA takes them per call), forward(q, k, v, g, beta, initial_state?)
 * -> [o, final_state]; the engine's pooled form (vLLM's): initialState is the state pool [slots, HV, K, V] f32,
 * ssmStateIndices [N] picks each sequence's row, updated in place (-1: padding), and only o is returned; cuSeqlens packs
 * N sequences along T of a B = 1 input (FLA's varlen).
 */
export abstract class DeltaRuleModule extends Module {
  protected abstract readonly op: DeltaOpCall;
  constructor(
    readonly scale: number | null = null,
    readonly useQkL2normInKernel = false,
  ) {
    super();
  }

  forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initialState: Tensor | null = null, cuSeqlens: Tensor | null = null, ssmStateIndices: Tensor | null = null): Tensor[] {
    return this.op(q, k, v, g, beta, { scale: this.scale, initial_state: initialState, output_final_state: !ssmStateIndices, use_qk_l2norm_in_kernel: this.useQkL2normInKernel, cu_seqlens: cuSeqlens, ssm_state_indices: ssmStateIndices });
  }
}

/**
 * The task fields the four delta-rule L1 tasks share; `gate` picks the gated delta rule's per-head decay (g [B, T, HV])
 * or KDA's per-key-channel one (g [B, T, HV, K]): inputs, work and the forward spec follow it; the reference is the
 * recurrence for all four (the chunked algorithm is checked against it in delta-rule.test.ts).
 */
export function deltaRuleTaskFields(gate: 'head' | 'channel') {
  return {
    init: [
      { name: 'scale', type: 'float' as const, optional: true, default: null, doc: 'null: K^-0.5' },
      { name: 'useQkL2normInKernel', type: 'bool' as const, optional: true, default: false },
    ],
    forward: gate === 'head' ? DELTA_FORWARD : KDA_FORWARD,
    params: {},
    outputs: DELTA_OUTPUTS,
    attrs: (c: TaskCase) => ({ scale: deltaScale(c), output_final_state: true, use_qk_l2norm_in_kernel: deltaL2norm(c) }),
    makeInputs: gate === 'head' ? makeDeltaInputs : makeKdaInputs,
    reference: ([q, k, v, g, beta, s0]: readonly (HostArray | null)[], _p: unknown, c: TaskCase) =>
      gatedDeltaRuleReference({ q: q!, k: k!, v: v!, g: g!, beta: beta!, s0: s0 ?? null, scale: deltaScale(c), l2norm: deltaL2norm(c) }),
    work: gate === 'head' ? deltaWork : kdaWork,
  };
}
