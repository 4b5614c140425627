/**
 * fused_recurrent_gla and chunk_gla on CUDA (gla-source.ts): the registry call's q / k / v / g read in place through
 * their (batch, token, head) strides (a copy only where the head dim is not contiguous), the state pool read and
 * written in place through ssm_state_indices, cu_seqlens read on the device. No host read of any tensor: the launch
 * depends on shapes alone, so it is safe inside a captured CUDA graph. chunk_gla takes the tensor-core kernels
 * (gla-tc.ts) where glaTcDecline accepts the call (bf16 / f16 on sm_80+, recurrent.chunkGlaTensorCore on), else the
 * CUDA-core fk_gla_chunk.
 */
import { Tensor, type OpCall } from '@fastkernels/core';
import type { ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { cudaTuning } from '../../tuning/load.js';
import { glaDecline, planGla, type GlaPlan } from './gla-plan.js';
import { GLA_SIGNATURE, glaSource, type GlaDType, type GlaIndexDType } from './gla-source.js';
import { GlaTcRunner } from './gla-tc.js';
import { glaTcDecline } from './gla-tc-plan.js';

export type GlaAttrs = { scale: number | null; output_final_state: boolean; chunk_size?: number };
export type GlaOp = 'fused_recurrent_gla' | 'chunk_gla';

/** The largest state access (floats) every state tensor allows: its address and its slot stride both aligned. */
export function stateVec(ptrs: readonly { byteAddress: number; slotStride: number }[]): number {
  for (const v of [4, 2, 1]) if (ptrs.every((p) => p.byteAddress % (4 * v) === 0 && p.slotStride % v === 0)) return v;
  return 1;
}

/** What a call's launch needs, worked out from the shapes: shared by the launcher and its CPU tests. */
export interface GlaLaunch {
  readonly plan: GlaPlan;
  readonly key: string;
  readonly args: ArgValue[];
}

export class GlaKernels {
  private readonly kernels = new Map<string, CudaKernel>();
  private readonly tc: GlaTcRunner;

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {
    this.tc = new GlaTcRunner(cache);
  }

  /** Why a chunk_gla call does not take the tensor-core kernels, or null (they do). */
  tensorCoreDecline(q: Tensor, v: Tensor, N: number): string | null {
    const [, T, H, K] = q.shape as [number, number, number, number];
    const props = this.runtime().properties() as { major?: number; sharedPerBlockOptin?: number };
    return glaTcDecline({
      dtype: q.dtype, N, T, H, K, V: v.shape[3]!, smMajor: props.major, enabled: cudaTuning().recurrent.chunkGlaTensorCore,
      sharedPerBlockOptin: props.sharedPerBlockOptin,
    });
  }

  /** true, or why the kernel declines (fused_recurrent_gla has no decomposition: the call then fails with the reason). */
  readonly supports = (op: GlaOp) => (call: OpCall<GlaAttrs>): true | string => {
    const [q, , v, , s0, , idx] = call.inputs as (Tensor | null)[];
    const [, , H, K] = q!.shape as [number, number, number, number];
    const cu = call.inputs[5] as Tensor | null;
    const N = cu ? cu.shape[0]! - 1 : q!.shape[0]!;
    const pool = idx && s0 ? { dtype: s0.dtype, slotContiguous: slotContiguous(s0) } : null;
    const optin = op === 'chunk_gla' ? (this.runtime().properties() as { sharedPerBlockOptin?: number }).sharedPerBlockOptin : undefined;
    return glaDecline({ op, dtype: q!.dtype, N, H, K, V: v!.shape[3]!, pool, sharedPerBlockOptin: optin }) ?? true;
  };

  readonly run = (op: GlaOp) => (call: OpCall<GlaAttrs>): Tensor[] => {
    const kind = op === 'chunk_gla' ? 'chunk' : 'recurrent';
    const temps: Tensor[] = [];
    try {
      const [q, k, v, g, s0, cu, idx] = (call.inputs as (Tensor | null)[]).map((t, i) => (t && i !== 4 ? headContiguous(t, temps) : t));
      const [B, T, H, K] = q!.shape as [number, number, number, number];
      const V = v!.shape[3]!;
      const N = cu ? cu.shape[0]! - 1 : B;
      const o = Tensor.empty(call.backend, [B, T, H, V], q!.dtype, { device: q!.device });
      let sIn: Tensor | null = null;
      let sOut: Tensor | null = null;
      let fin: Tensor | null = null;
      if (idx) sIn = sOut = s0!; // the pool, in place
      else {
        if (s0) sIn = s0.dtype === 'f32' && s0.isContiguous() ? s0 : keep(temps, (s0.dtype === 'f32' ? s0 : keep(temps, s0.to('f32'))).contiguous());
        if (call.attrs.output_final_state) sOut = fin = Tensor.empty(call.backend, [N, H, K, V], 'f32', { device: q!.device });
      }
      const outs = fin ? [o, fin] : [o];
      if (N === 0 || H === 0) return outs;
      const operands: GlaOperands = { o, q: q!, k: k!, v: v!, g: g!, sIn, sOut, cu, idx, pooled: idx !== null };
      const sms = this.runtime().properties().multiprocessors;
      if (kind === 'chunk' && T > 0 && this.tensorCoreDecline(q!, v!, N) === null) {
        this.tc.run(operands, call.attrs.scale, sms, temps);
        return outs;
      }
      const launch = glaLaunch(kind, operands, call.attrs.scale, sms);
      const kernel = this.kernel(launch.key, () =>
        glaSource({ kind, dtype: q!.dtype as GlaDType, cuDType: idxDType(cu), idxDType: idxDType(idx), K, bv: launch.plan.bv, vec: launch.plan.vec, threads: launch.plan.threads, chunk: launch.plan.chunk }),
      );
      kernel.launch(launch.plan.grid, launch.plan.threads, launch.plan.sharedBytes, launch.args);
      return outs;
    } finally {
      for (const t of temps) t.dispose();
    }
  };

  private kernel(key: string, make: () => ReturnType<typeof glaSource>): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = this.cache.kernel(key, make, 'gla-generated')));
    return k;
  }
}

export interface GlaOperands {
  readonly o: Tensor;
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  readonly g: Tensor;
  /** The state read (the pool, a contiguous f32 initial state, or null: zeros) and written (the pool, the final state, or null). */
  readonly sIn: Tensor | null;
  readonly sOut: Tensor | null;
  readonly cu: Tensor | null;
  readonly idx: Tensor | null;
  readonly pooled: boolean;
}

/** The plan, the kernel's cache key and the packed arguments of one call (GLA_SIGNATURE's order). */
export function glaLaunch(kind: 'recurrent' | 'chunk', x: GlaOperands, scale: number | null, sms: number): GlaLaunch {
  const [B, T, H, K] = x.q.shape as [number, number, number, number];
  const V = x.v.shape[3]!;
  const N = x.cu ? x.cu.shape[0]! - 1 : B;
  const slotStride = (t: Tensor) => (x.pooled ? t.strides[0]! : H * K * V);
  const states = [x.sIn, x.sOut].filter((t): t is Tensor => t !== null).map((t) => ({ byteAddress: addr(t), slotStride: slotStride(t) }));
  const plan = planGla(kind, { N, H, K, V }, stateVec(states), sms);
  const key = `gla|${kind}|${x.q.dtype}|${idxDType(x.cu)}|${idxDType(x.idx)}|${K}|${plan.bv}|${plan.vec}|${plan.threads}|${plan.chunk}`;
  const strides = (t: Tensor) => [t.strides[0]!, t.strides[1]!, t.strides[2]!];
  const args: ArgValue[] = [
    addr(x.o), addr(x.q), addr(x.k), addr(x.v), addr(x.g),
    ...strides(x.q), ...strides(x.k), ...strides(x.v), ...strides(x.g),
    x.sIn ? addr(x.sIn) : 0, x.sIn ? slotStride(x.sIn) : 0,
    x.sOut ? addr(x.sOut) : 0, x.sOut ? slotStride(x.sOut) : 0,
    x.cu ? addr(x.cu) : 0, x.idx ? addr(x.idx) : 0,
    T, H, V, scale ?? 1 / Math.sqrt(K),
  ];
  if (args.length !== GLA_SIGNATURE.length) throw new Error(`gla: ${args.length} arguments for a signature of ${GLA_SIGNATURE.length}`);
  return { plan, key, args };
}

/** The index type a kernel build reads cu_seqlens / ssm_state_indices as (absent: i32). */
export function idxDType(t: Tensor | null): GlaIndexDType {
  return t?.dtype === 'i64' ? 'i64' : 'i32';
}

/** Every slot of the pool one contiguous [H, K, V] block (the kernel addresses slot * stride0 + (h K + i) V + j; the delta rule's pools alike). */
export function slotContiguous(pool: Tensor): boolean {
  const [, H, K, V] = pool.shape as [number, number, number, number];
  const s = pool.strides;
  return (V <= 1 || s[3] === 1) && (K <= 1 || s[2] === V) && (H <= 1 || s[1] === K * V);
}

/** t itself where its last dim is contiguous (or of size 1), else a contiguous copy (kept for disposal). */
export function headContiguous(t: Tensor, temps: Tensor[]): Tensor {
  if (t.shape[t.rank - 1]! <= 1 || t.strides[t.rank - 1] === 1) return t;
  return keep(temps, t.contiguous());
}

/** t, kept in temps for disposal. */
export function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.push(t);
  return t;
}
