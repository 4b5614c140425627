/**
 * Qwen3-Next's gated-DeltaNet ops on CUDA (gdn-source.ts): fused_recurrent_gated_delta_rule, chunk_gated_delta_rule
 * (its own CUDA-core chunked kernel; where that declines, its decomposition into the recurrent one), causal_conv1d and
 * causal_conv1d_update; chunk_gated_delta_rule takes the tensor-core kernels (gdn-tc.ts) where gdnTcDecline accepts the
 * call (bf16 / f16 on sm_80+, recurrent.chunkDeltaTensorCore on). Kimi-Linear's fused_recurrent_kda and chunk_kda are
 * the CUDA-core kernels with the decay per key channel (g [B, T, HV, K], read through its strides with the channels
 * contiguous). The registry call's tensors are read in place through their strides (a copy only where a head dim, the
 * conv weight or the bias is not contiguous), the state pools read and written in place through the index tensors,
 * cu_seqlens / query_start_loc / has_initial_state read on the device. No host read of any tensor: the launch depends
 * on shapes alone, so it is safe inside a captured CUDA graph.
 */
import { Tensor, type OpCall } from '@fastkernels/core';
import type { ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { cudaTuning } from '../../tuning/load.js';
import { headContiguous, idxDType, keep, slotContiguous, stateVec } from './gla.js';
import type { GlaPlan } from './gla-plan.js';
import { DELTA_OPS, convDecline, gdnDecline, planConv, planGdn, type ConvPlan, type DeltaOp } from './gdn-plan.js';
import { CONV_SIGNATURE, GDN_SIGNATURE, convSource, gdnSource, type ConvHasInitDType, type GdnDType } from './gdn-source.js';
import { GdnTcRunner } from './gdn-tc.js';
import { gdnTcDecline, gdnTcSharedLimit } from './gdn-tc-plan.js';

export type GdnAttrs = { scale: number | null; output_final_state: boolean; use_qk_l2norm_in_kernel: boolean };
export type ConvAttrs = { activation: 'silu' | 'swish' | null; return_final_states?: boolean };
export type GdnOp = DeltaOp | 'causal_conv1d' | 'causal_conv1d_update';

export class GdnKernels {
  private readonly kernels = new Map<string, CudaKernel>();
  private readonly tc: GdnTcRunner;

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {
    this.tc = new GdnTcRunner(cache);
  }

  /** Why a chunked delta-rule call does not take the tensor-core kernels (gdn-tc-plan.ts), or null (they do). */
  tensorCoreDecline(op: DeltaOp, q: Tensor, v: Tensor, g: Tensor, beta: Tensor, N: number): string | null {
    const [, T, H, K] = q.shape as [number, number, number, number];
    const props = this.runtime().properties() as { major?: number; sharedPerBlockOptin?: number };
    return gdnTcDecline({
      op, dtypes: [q.dtype, g.dtype, beta.dtype], N, T, H, HV: v.shape[2]!, K, V: v.shape[3]!, smMajor: props.major, enabled: cudaTuning().recurrent.chunkDeltaTensorCore,
      sharedPerBlockOptin: props.sharedPerBlockOptin,
    });
  }

  /** true, or why the kernel declines (chunk_gated_delta_rule / chunk_kda then run their decomposition, the others fail with the reason). */
  readonly supports = (op: GdnOp) => (call: OpCall<GdnAttrs & ConvAttrs>): true | string => {
    const ins = call.inputs as (Tensor | null)[];
    if (op !== 'causal_conv1d' && op !== 'causal_conv1d_update') {
      const [q, , v, g, beta, s0, cu, idx] = ins;
      const N = cu ? cu.shape[0]! - 1 : q!.shape[0]!;
      const pool = idx && s0 ? { dtype: s0.dtype, slotContiguous: slotContiguous(s0) } : null;
      const optin = DELTA_OPS[op].kind === 'chunk' ? (this.runtime().properties() as { sharedPerBlockOptin?: number }).sharedPerBlockOptin : undefined;
      return gdnDecline({ op, dtypes: [q!.dtype, g!.dtype, beta!.dtype], N, H: q!.shape[2]!, HV: v!.shape[2]!, K: q!.shape[3]!, V: v!.shape[3]!, pool, sharedPerBlockOptin: optin }) ?? true;
    }
    const c = convOperands(op, call as unknown as OpCall<ConvAttrs>);
    return convDecline({ op, dtypes: [c.x.dtype, c.w.dtype, c.bias?.dtype ?? null, c.sIn?.dtype ?? null, c.sOutDType], hisDType: c.his?.dtype ?? null, N: c.N, W: c.W }) ?? true;
  };

  readonly run = (op: GdnOp) => (call: OpCall<GdnAttrs & ConvAttrs>): Tensor[] => (op === 'causal_conv1d' || op === 'causal_conv1d_update' ? this.runConv(op, call as unknown as OpCall<ConvAttrs>) : this.runDelta(op, call as unknown as OpCall<GdnAttrs>));

  private runDelta(op: DeltaOp, call: OpCall<GdnAttrs>): Tensor[] {
    const { kind, gate } = DELTA_OPS[op];
    const temps: Tensor[] = [];
    try {
      // q, k, v and KDA's g [B, T, HV, K] are read along their last dim at stride 1
      const [q, k, v, g, beta, s0, cu, idx] = (call.inputs as (Tensor | null)[]).map((t, i) => (t && (i < 3 || (i === 3 && gate === 'channel')) ? headContiguous(t, temps) : t));
      const [B, T, , K] = q!.shape as [number, number, number, number];
      const [HV, V] = [v!.shape[2]!, v!.shape[3]!];
      const N = cu ? cu.shape[0]! - 1 : B;
      const o = Tensor.empty(call.backend, [B, T, HV, V], q!.dtype, { device: q!.device });
      let sIn: Tensor | null = null;
      let sOut: Tensor | null = null;
      let fin: Tensor | null = null;
      if (idx) sIn = sOut = s0!; // the pool, in place
      else {
        if (s0) sIn = s0.dtype === 'f32' && s0.isContiguous() ? s0 : keep(temps, (s0.dtype === 'f32' ? s0 : keep(temps, s0.to('f32'))).contiguous());
        if (call.attrs.output_final_state) sOut = fin = Tensor.empty(call.backend, [N, HV, K, V], 'f32', { device: q!.device });
      }
      const outs = fin ? [o, fin] : [o];
      if (N === 0 || HV === 0 || T === 0) {
        if (fin && sIn) fin.copy_(sIn);
        else if (fin) fin.fill_(0);
        return outs;
      }
      const operands: GdnOperands = { o, q: q!, k: k!, v: v!, g: g!, beta: beta!, sIn, sOut, cu, idx, pooled: idx !== null };
      const sms = this.runtime().properties().multiprocessors;
      if (kind === 'chunk' && this.tensorCoreDecline(op, q!, v!, g!, beta!, N) === null) {
        const optin = (this.runtime().properties() as { sharedPerBlockOptin?: number }).sharedPerBlockOptin;
        this.tc.run(operands, call.attrs, sms, gdnTcSharedLimit(optin), temps);
        return outs;
      }
      const launch = gdnLaunch(kind, operands, call.attrs, sms, gate);
      const kernel = this.kernel(launch.key, () =>
        gdnSource({
          kind, gate, chunk: launch.plan.chunk, dtype: q!.dtype as GdnDType, gDType: g!.dtype as GdnDType, betaDType: beta!.dtype as GdnDType, cuDType: idxDType(cu), idxDType: idxDType(idx),
          K, bv: launch.plan.bv, vec: launch.plan.vec, threads: launch.plan.threads, l2norm: call.attrs.use_qk_l2norm_in_kernel,
        }),
      );
      kernel.launch(launch.plan.grid, launch.plan.threads, launch.plan.sharedBytes, launch.args);
      return outs;
    } finally {
      for (const t of temps) t.dispose();
    }
  }

  private runConv(op: 'causal_conv1d' | 'causal_conv1d_update', call: OpCall<ConvAttrs>): Tensor[] {
    const temps: Tensor[] = [];
    try {
      const c = convOperands(op, call);
      const w = c.w.isContiguous() ? c.w : keep(temps, c.w.contiguous());
      const bias = c.bias && !c.bias.isContiguous() ? keep(temps, c.bias.contiguous()) : c.bias;
      const out = Tensor.empty(call.backend, [...c.xShape], c.x.dtype, { device: c.x.device });
      let sOut: Tensor | null = null;
      let fresh: Tensor | null = null;
      if (c.pooled) sOut = c.sIn; // the pool, in place
      else if (c.sOutDType) sOut = fresh = Tensor.empty(call.backend, [c.B, c.D, c.S], c.sOutDType, { device: c.x.device });
      const outs = fresh ? [out, fresh] : [out];
      if (c.N === 0 || c.D === 0) return outs;
      const launch = convLaunch({ ...c, w, bias, out, sOut }, call.attrs.activation !== null);
      const kernel = this.kernel(launch.key, () =>
        convSource({
          dtype: c.x.dtype as GdnDType, wDType: w.dtype as GdnDType, sInDType: (c.sIn?.dtype ?? 'f32') as GdnDType, sOutDType: (sOut?.dtype ?? 'f32') as GdnDType,
          cuDType: idxDType(c.qsl), idxDType: idxDType(c.idx), hisDType: (c.his?.dtype ?? 'bool') as ConvHasInitDType,
          W: c.W, ct: launch.plan.ct, tg: launch.plan.tg, silu: call.attrs.activation !== null,
        }),
      );
      kernel.launch(launch.plan.grid, launch.plan.ct * launch.plan.tg, 0, launch.args);
      return outs;
    } finally {
      for (const t of temps) t.dispose();
    }
  }

  private kernel(key: string, make: () => ReturnType<typeof gdnSource>): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = this.cache.kernel(key, make, 'gdn-generated')));
    return k;
  }
}

export interface GdnOperands {
  readonly o: Tensor;
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  readonly g: Tensor;
  readonly beta: Tensor;
  readonly sIn: Tensor | null;
  readonly sOut: Tensor | null;
  readonly cu: Tensor | null;
  readonly idx: Tensor | null;
  readonly pooled: boolean;
}

/** The plan, the kernel's cache key and the packed arguments of one delta-rule call (GDN_SIGNATURE's order). */
export function gdnLaunch(kind: 'recurrent' | 'chunk', x: GdnOperands, attrs: GdnAttrs, sms: number, gate: 'head' | 'channel' = 'head'): { plan: GlaPlan; key: string; args: ArgValue[] } {
  const [B, T, H, K] = x.q.shape as [number, number, number, number];
  const [HV, V] = [x.v.shape[2]!, x.v.shape[3]!];
  const N = x.cu ? x.cu.shape[0]! - 1 : B;
  const slotStride = (t: Tensor) => (x.pooled ? t.strides[0]! : HV * K * V);
  const states = [x.sIn, x.sOut].filter((t): t is Tensor => t !== null).map((t) => ({ byteAddress: addr(t), slotStride: slotStride(t) }));
  const plan = planGdn({ N, HV, K, V }, stateVec(states), sms, kind, gate);
  const key = `${gate === 'channel' ? 'kda' : 'gdn'}|${kind}|${plan.chunk}|${x.q.dtype}|${x.g.dtype}|${x.beta.dtype}|${idxDType(x.cu)}|${idxDType(x.idx)}|${K}|${plan.bv}|${plan.vec}|${plan.threads}|${attrs.use_qk_l2norm_in_kernel ? 1 : 0}`;
  const strides = (t: Tensor) => [t.strides[0]!, t.strides[1]!, t.strides[2]!];
  const args: ArgValue[] = [
    addr(x.o), addr(x.q), addr(x.k), addr(x.v), addr(x.g), addr(x.beta),
    ...strides(x.q), ...strides(x.k), ...strides(x.v), ...strides(x.g), ...strides(x.beta),
    x.sIn ? addr(x.sIn) : 0, x.sIn ? slotStride(x.sIn) : 0,
    x.sOut ? addr(x.sOut) : 0, x.sOut ? slotStride(x.sOut) : 0,
    x.cu ? addr(x.cu) : 0, x.idx ? addr(x.idx) : 0,
    T, HV, V, HV / H, attrs.scale ?? 1 / Math.sqrt(K),
  ];
  if (args.length !== GDN_SIGNATURE.length) throw new Error(`gdn: ${args.length} arguments for a signature of ${GDN_SIGNATURE.length}`);
  return { plan, key, args };
}

/** A conv call's operands, either op: x seen as [B, D, L], the sequences, the state read and the new state's dtype. */
export interface ConvOperands {
  readonly x: Tensor;
  readonly xShape: readonly number[];
  /** x's element strides as [batch, channel, token] (token 0 for a [B, D] decode x). */
  readonly xStrides: readonly [number, number, number];
  readonly B: number;
  readonly D: number;
  readonly L: number;
  readonly w: Tensor;
  readonly W: number;
  readonly bias: Tensor | null;
  /** The pool (pooled), an initial state, or null (zeros); S its columns. */
  readonly sIn: Tensor | null;
  readonly S: number;
  /** The new state's dtype when one is returned (unpooled), else null. */
  readonly sOutDType: Tensor['dtype'] | null;
  readonly pooled: boolean;
  readonly qsl: Tensor | null;
  readonly idx: Tensor | null;
  readonly his: Tensor | null;
  readonly N: number;
}

export function convOperands(op: 'causal_conv1d' | 'causal_conv1d_update', call: OpCall<ConvAttrs>): ConvOperands {
  const ins = call.inputs as (Tensor | null)[];
  if (op === 'causal_conv1d') {
    const [x, w, bias, init, qsl, idx, his] = ins;
    const [B, D, L] = x!.shape as [number, number, number];
    const W = w!.shape[1]!;
    const pooled = idx !== null && idx !== undefined;
    return {
      x: x!, xShape: x!.shape, xStrides: [x!.strides[0]!, x!.strides[1]!, x!.strides[2]!], B, D, L, w: w!, W, bias: bias ?? null,
      sIn: init ?? null, S: pooled ? init!.shape[2]! : W - 1,
      sOutDType: !pooled && call.attrs.return_final_states ? x!.dtype : null,
      pooled, qsl: qsl ?? null, idx: idx ?? null, his: his ?? null, N: qsl ? qsl.shape[0]! - 1 : B,
    };
  }
  const [x, st, w, bias, idx] = ins;
  const [B, D] = x!.shape as [number, number];
  const L = x!.rank === 3 ? x!.shape[2]! : 1;
  const pooled = idx !== null && idx !== undefined;
  return {
    x: x!, xShape: x!.shape, xStrides: [x!.strides[0]!, x!.strides[1]!, x!.rank === 3 ? x!.strides[2]! : 0], B, D, L, w: w!, W: w!.shape[1]!, bias: bias ?? null,
    sIn: st!, S: st!.shape[2]!, sOutDType: pooled ? null : st!.dtype, pooled, qsl: null, idx: idx ?? null, his: null, N: B,
  };
}

/** The plan, the kernel's cache key and the packed arguments of one conv call (CONV_SIGNATURE's order). */
export function convLaunch(c: ConvOperands & { w: Tensor; bias: Tensor | null; out: Tensor; sOut: Tensor | null }, silu: boolean): { plan: ConvPlan; key: string; args: ArgValue[] } {
  const plan = planConv(c.N, c.D, c.qsl ? Math.ceil(c.L / Math.max(1, c.N)) : c.L);
  const st = (t: Tensor | null) => (t ? [t.strides[0]!, t.strides[1]!, t.strides[2]!] : [0, 0, 0]);
  const key = `conv|${c.x.dtype}|${c.w.dtype}|${c.sIn?.dtype ?? '-'}|${c.sOut?.dtype ?? '-'}|${idxDType(c.qsl)}|${idxDType(c.idx)}|${c.his?.dtype ?? '-'}|${c.W}|${plan.ct}|${plan.tg}|${silu ? 1 : 0}`;
  const args: ArgValue[] = [
    addr(c.out), addr(c.x), addr(c.w), c.bias ? addr(c.bias) : 0,
    ...c.xStrides,
    c.sIn ? addr(c.sIn) : 0, ...st(c.sIn),
    c.sOut ? addr(c.sOut) : 0, ...st(c.sOut),
    c.qsl ? addr(c.qsl) : 0, c.idx ? addr(c.idx) : 0, c.his ? addr(c.his) : 0,
    c.L, c.D, c.S,
  ];
  if (args.length !== CONV_SIGNATURE.length) throw new Error(`causal_conv1d: ${args.length} arguments for a signature of ${CONV_SIGNATURE.length}`);
  return { plan, key, args };
}
