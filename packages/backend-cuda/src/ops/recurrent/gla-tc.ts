/**
 * The tensor-core chunk_gla launcher (kernels/gla_chunk_tc.cu, planned by gla-tc-plan.ts): four workspaces sized from
 * shapes (Qg and Kd [B T, H, 2, K] and A [slots, H, 2, 64, 64]: hi, lo pairs in the input dtype; the decay [slots, H, K]
 * f32), then
 * fk_gla_chunk_prep and fk_gla_chunk_tc. No host read of any tensor, so the call can be captured in a CUDA graph; the
 * workspaces go back to the stream-ordered allocator when the call returns, as the launcher's other temporaries do.
 */
import { Tensor, type DType } from '@fastkernels/core';
import type { ArgType, ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { cudaTuning } from '../../tuning/load.js';
import type { GlaOperands } from './gla.js';
import { GLA_TC_PREP_THREADS, glaTcDefines, planGlaTc, type GlaTcPlan } from './gla-tc-plan.js';

const I64 = (n: number): ArgType[] => new Array<ArgType>(n).fill('i64');

/** q, k, g; their (batch, token, head) element strides; cu_seqlens; T, H, N, nc_max, scale; Qg, Kd, A, decay. */
export const GLA_TC_PREP_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', ...I64(9), 'ptr', 'i32', 'i32', 'i32', 'i32', 'f32', 'ptr', 'ptr', 'ptr', 'ptr'];
/** o, v, v's strides; Qg, Kd, A, decay; s_in and its slot stride, s_out and its; cu_seqlens, ssm_state_indices; T, H, V, nc_max. */
export const GLA_TC_MAIN_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', ...I64(3), 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'ptr', 'i64', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32'];

export const GLA_TC_FILE = 'gla_chunk_tc.cu';

/** The embedded file with the build's #defines prepended, for one of its two entries. */
export function glaTcSource(entry: 'fk_gla_chunk_prep' | 'fk_gla_chunk_tc', defines: Readonly<Record<string, string | number>>): GeneratedKernel {
  const source = KERNEL_SOURCES[GLA_TC_FILE];
  if (source === undefined) throw new Error(`kernel source ${GLA_TC_FILE} is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)`);
  const head = Object.entries(defines).map(([k, v]) => `#define ${k} ${v}`).join('\n');
  return { source: `${head}\n${source}`, entry, signature: entry === 'fk_gla_chunk_prep' ? GLA_TC_PREP_SIGNATURE : GLA_TC_MAIN_SIGNATURE };
}

/** The workspaces' shapes (elements) for a plan: Qg / Kd and A as hi, lo pairs (the 2), the decay in f32. */
export function glaTcWorkspaceShapes(B: number, T: number, H: number, K: number, p: GlaTcPlan): { qk: number[]; A: number[]; dec: number[] } {
  return { qk: [B * T, H, 2, K], A: [p.slots, H, 2, 64, 64], dec: [p.slots, H, K] };
}

export interface GlaTcWorkspaces {
  readonly qg: Tensor;
  readonly kd: Tensor;
  readonly A: Tensor;
  readonly dec: Tensor;
}

/** Both launches of one call: the plan, the kernels' cache key, and the packed arguments (the signatures' order). */
export interface GlaTcLaunch {
  readonly plan: GlaTcPlan;
  readonly defines: Record<string, string | number>;
  readonly key: string;
  readonly prepArgs: ArgValue[];
  readonly mainArgs: ArgValue[];
}

/** v's rows are read by 16-byte cp.async: its address and (batch, token, head) strides must keep 16-byte alignment. */
export function rowsReadable16(t: Tensor): boolean {
  return addr(t) % 16 === 0 && [0, 1, 2].every((d) => t.shape[d]! <= 1 || (t.strides[d]! * t.itemsize) % 16 === 0);
}

export function glaTcLaunch(x: GlaOperands, w: GlaTcWorkspaces, scale: number | null, sms: number, tileColumns = 0): GlaTcLaunch {
  const [B, T, H, K] = x.q.shape as [number, number, number, number];
  const V = x.v.shape[3]!;
  const N = x.cu ? x.cu.shape[0]! - 1 : B;
  const plan = planGlaTc({ N, T, H, K, V, varlen: x.cu !== null }, sms, tileColumns);
  const idx = (t: Tensor | null) => (t?.dtype === 'i64' ? 'i64' : 'i32');
  const defines = glaTcDefines(x.q.dtype as 'bf16' | 'f16', K, plan, idx(x.cu), idx(x.idx));
  const key = `gla-tc|${Object.values(defines).join('|')}`;
  const strides = (t: Tensor) => [t.strides[0]!, t.strides[1]!, t.strides[2]!];
  const slotStride = (t: Tensor) => (x.pooled ? t.strides[0]! : H * K * V);
  const cu = x.cu ? addr(x.cu) : 0;
  const prepArgs: ArgValue[] = [
    addr(x.q), addr(x.k), addr(x.g), ...strides(x.q), ...strides(x.k), ...strides(x.g),
    cu, T, H, N, plan.ncMax, scale ?? 1 / Math.sqrt(K),
    addr(w.qg), addr(w.kd), addr(w.A), addr(w.dec),
  ];
  const mainArgs: ArgValue[] = [
    addr(x.o), addr(x.v), ...strides(x.v),
    addr(w.qg), addr(w.kd), addr(w.A), addr(w.dec),
    x.sIn ? addr(x.sIn) : 0, x.sIn ? slotStride(x.sIn) : 0,
    x.sOut ? addr(x.sOut) : 0, x.sOut ? slotStride(x.sOut) : 0,
    cu, x.idx ? addr(x.idx) : 0,
    T, H, V, plan.ncMax,
  ];
  if (prepArgs.length !== GLA_TC_PREP_SIGNATURE.length || mainArgs.length !== GLA_TC_MAIN_SIGNATURE.length) throw new Error('gla tc: arguments do not match the signatures');
  return { plan, defines, key, prepArgs, mainArgs };
}

/** Runs a call glaTcDecline accepted: the workspaces, then both launches. */
export class GlaTcRunner {
  private readonly kernels = new Map<string, CudaKernel>();

  constructor(private readonly cache: GenKernelCache) {}

  run(x: GlaOperands, scale: number | null, sms: number, temps: Tensor[]): void {
    const [B, T, H, K] = x.q.shape as [number, number, number, number];
    const V = x.v.shape[3]!;
    const N = x.cu ? x.cu.shape[0]! - 1 : B;
    const tileColumns = cudaTuning().recurrent.chunkGlaTileColumns;
    const plan = planGlaTc({ N, T, H, K, V, varlen: x.cu !== null }, sms, tileColumns);
    const shapes = glaTcWorkspaceShapes(B, T, H, K, plan);
    const make = (shape: number[], dtype: DType) => {
      const t = Tensor.empty(x.q.backend, shape, dtype, { device: x.q.device });
      temps.push(t);
      return t;
    };
    const w = { qg: make(shapes.qk, x.q.dtype), kd: make(shapes.qk, x.q.dtype), A: make(shapes.A, x.q.dtype), dec: make(shapes.dec, 'f32') };
    const v = rowsReadable16(x.v) ? x.v : (temps.push(x.v.contiguous()), temps[temps.length - 1]!);
    const l = glaTcLaunch({ ...x, v }, w, scale, sms, tileColumns);
    this.kernel(`${l.key}|prep`, 'fk_gla_chunk_prep', l.defines).launch(l.plan.prepGrid, GLA_TC_PREP_THREADS, l.plan.prepSharedBytes, l.prepArgs);
    this.kernel(`${l.key}|main`, 'fk_gla_chunk_tc', l.defines).launch(l.plan.mainGrid, l.plan.threads, l.plan.mainSharedBytes, l.mainArgs);
  }

  private kernel(key: string, entry: 'fk_gla_chunk_prep' | 'fk_gla_chunk_tc', defines: Record<string, string | number>): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = this.cache.kernel(key, () => glaTcSource(entry, defines), 'gla-chunk-tc')));
    return k;
  }
}
