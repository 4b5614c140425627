/**
 * What the three gated-linear-attention L1 tasks (chunk_gla, fused_recurrent_gla, gla_recurrence) share: the float64
 * recurrence they are all checked against, their forward inputs (FLA layout [B, T, H, K], gates as GLA makes them) and
 * their work count. Plain loops, written from the definition (fla.ops.gla.naive.naive_recurrent_gla), not from any
 * backend's kernel.
 */
import { DTYPE_INFO, F, hostArray, type ExecutionContext, type HostArray, type Rng, type TaskCase, type TaskCaseInput, type Tensor, type WorkCount } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { OpTensorArg } from '../../define-op-task.js';

/**
 * Per (batch, head): S_t = diag(exp(g_t)) S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t, S_0 = initial state (zeros when
 * null); scale defaults to K^-0.5. Returns o [B, T, H, V] and the final state [B, H, K, V].
 */
export function glaRecurrenceReference(q: HostArray, k: HostArray, v: HostArray, g: HostArray, s0: HostArray | null, scale: number | null): [HostArray, HostArray] {
  const [B, T, H, K] = q.shape as [number, number, number, number];
  const V = v.shape[3]!;
  const sc = scale ?? 1 / Math.sqrt(K);
  const o = hostArray([B, T, H, V]);
  const state = hostArray([B, H, K, V], s0 ? s0.data : undefined);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const S = state.data.subarray((b * H + h) * K * V, (b * H + h + 1) * K * V);
      for (let t = 0; t < T; t++) {
        const row = (b * T + t) * H + h;
        for (let i = 0; i < K; i++) {
          const a = Math.exp(g.data[row * K + i]!);
          const ki = k.data[row * K + i]!;
          for (let j = 0; j < V; j++) S[i * V + j] = a * S[i * V + j]! + ki * v.data[row * V + j]!;
        }
        for (let j = 0; j < V; j++) {
          let acc = 0;
          for (let i = 0; i < K; i++) acc += q.data[row * K + i]! * S[i * V + j]!;
          o.data[row * V + j] = sc * acc;
        }
      }
    }
  }
  return [o, state];
}

/**
 * The op inputs as forward arguments: q, k, the gate [B, T, H, K], v [B, T, H, V], initial_state f32 (optional), and the
 * engine's pooled form (optional): FLA's cu_seqlens, vLLM's ssm_state_indices (initial_state is then the pool).
 */
export function glaForward(gate: 'g' | 'gk', pooled = false): Record<string, OpTensorArg> {
  const base: Record<string, OpTensorArg> = {
    q: { shape: ['B', 'T', 'H', 'K'] },
    k: { shape: ['B', 'T', 'H', 'K'] },
    v: { shape: ['B', 'T', 'H', 'V'] },
    [gate]: { shape: ['B', 'T', 'H', 'K'], doc: 'log forget gate (<= 0): GLA gives logsigmoid(gk_proj(x)) / 16' },
    initial_state: { shape: ['B', 'H', 'K', 'V'], dtype: 'f32', doc: `the state carried in (prefill chunk or decode); zeros when absent${pooled ? '. With ssm_state_indices: the state pool [slots, H, K, V], updated in place' : ''}` },
  };
  if (!pooled) return base;
  return {
    ...base,
    cu_seqlens: { shape: ['N1'], dtype: 'i32', doc: 'FLA varlen: offsets of the sequences packed along T (B = 1); absent in the benchmark cases' },
    ssm_state_indices: { shape: ['N'], dtype: 'i32', doc: "vLLM: each sequence's pool slot (-1: padding); only o is returned. The engine's form; absent in the benchmark cases" },
  };
}

/** The pooled form's dims on cases that do not use it: N sequences = the B rows (cu_seqlens would hold N + 1 offsets). */
export function withSequenceDims(cases: readonly TaskCaseInput[]): TaskCaseInput[] {
  return cases.map((c) => ({ ...c, dims: { ...c.dims, N: c.dims.B!, N1: c.dims.B! + 1 } }));
}

export const GLA_OUTPUTS: readonly OpTensorArg[] = [{ shape: ['B', 'T', 'H', 'V'] }, { shape: ['B', 'H', 'K', 'V'], dtype: 'f32' }];

/**
 * q, k, v ~ N(0, 1); the gate as GatedLinearAttention makes it, logsigmoid(N(0, 1)) / normalizer (options.gateNormalizer,
 * default 16: GLA's gate_logit_normalizer); initial_state ~ N(0, 1) f32 when options.initial_state.
 */
export function makeGlaInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): (Tensor | null)[] {
  const { B, T, H, K, V } = c.dims as Record<'B' | 'T' | 'H' | 'K' | 'V', number>;
  const q = randn(ctx, rng, [B, T, H, K], c.dtype);
  const k = randn(ctx, rng, [B, T, H, K], c.dtype);
  const v = randn(ctx, rng, [B, T, H, V], c.dtype);
  const x = randn(ctx, rng, [B, T, H, K], c.dtype);
  const ls = F.logSigmoid(x);
  const g = F.div(ls, (c.options.gateNormalizer as number | undefined) ?? 16);
  x.dispose();
  ls.dispose();
  const s0 = c.options.initial_state ? randn(ctx, rng, [B, H, K, V], 'f32') : null;
  return [q, k, v, g, s0];
}

/** Reads q, k, v, g (and the state in and out) once, writes o; 4 K V flops per token and head (update and read-out). */
export function glaWork(c: TaskCase): WorkCount {
  const { B, T, H, K, V } = c.dims as Record<'B' | 'T' | 'H' | 'K' | 'V', number>;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const state = bytesOf([B, H, K, V], 4) * (c.options.initial_state ? 2 : 1);
  return { bytes: 3 * bytesOf([B, T, H, K], it) + 2 * bytesOf([B, T, H, V], it) + state, flops: 4 * B * T * H * K * V };
}

/** The init args every GLA task case gives: (scale, ...rest). */
export const caseScale = (c: Pick<TaskCase, 'init'>): number | null => (c.init[0] as number | null | undefined) ?? null;

/**
 * fla-hub/gla-2.7B-100B's head shape: hidden 2560, 5 heads, expand_k 0.5 / expand_v 1 -> K = 256, V = 512 per head (the
 * shapes the original's captures of this model hold).
 */
export const GLA_2_7B_HEADS = { H: 5, K: 256, V: 512 } as const;
