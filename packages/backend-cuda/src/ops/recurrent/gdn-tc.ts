/**
 * The tensor-core chunk_gated_delta_rule launcher (kernels/gdn_chunk_tc.cu, planned by gdn-tc-plan.ts): five workspaces
 * sized from shapes (W [B T, HV, 2, K], U [B T, HV, 2, V], Aqk [slots, HV, 2, 64, 64]: hi, lo pairs in the input
 * dtype; G [B T, HV] and the inverse q / k norms [B T, H, 2] in f32), then fk_gdn_chunk_prep and fk_gdn_chunk_tc, both
 * reading q / k / v in place (a contiguous copy only where a row is not 16-byte aligned). No host read of any tensor,
 * so the call can be captured in a CUDA graph; the workspaces go back to the stream-ordered allocator when the call
 * returns, as the launcher's other temporaries do.
 */
import { Tensor, type DType } from '@fastkernels/core';
import type { ArgType, ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { cudaTuning } from '../../tuning/load.js';
import type { GdnAttrs, GdnOperands } from './gdn.js';
import { GDN_TC_MAX_SHARED, GDN_TC_PREP_THREADS, gdnTcDefines, planGdnTc, type GdnTcPlan } from './gdn-tc-plan.js';
import { rowsReadable16 } from './gla-tc.js';

const I64 = (n: number): ArgType[] => new Array<ArgType>(n).fill('i64');

/** q, k, v, g, beta; their (batch, token, head) element strides; cu_seqlens; T, H, HV, N, nc_max, scale; W, U, Aqk, G, norms. */
export const GDN_TC_PREP_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...I64(15), 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr'];
/** o; q, k and their strides; W, U, Aqk, G, norms; s_in and its slot stride, s_out and its; cu_seqlens, ssm_state_indices; T, H, HV, nc_max, scale. */
export const GDN_TC_MAIN_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', ...I64(6), 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'ptr', 'i64', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'f32'];

export const GDN_TC_FILE = 'gdn_chunk_tc.cu';
export type GdnTcEntry = 'fk_gdn_chunk_prep' | 'fk_gdn_chunk_tc';

/** The embedded file with the build's #defines prepended, for one of its two entries. */
export function gdnTcSource(entry: GdnTcEntry, defines: Readonly<Record<string, string | number>>): GeneratedKernel {
  const source = KERNEL_SOURCES[GDN_TC_FILE];
  if (source === undefined) throw new Error(`kernel source ${GDN_TC_FILE} is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)`);
  const head = Object.entries(defines).map(([k, v]) => `#define ${k} ${v}`).join('\n');
  return { source: `${head}\n${source}`, entry, signature: entry === 'fk_gdn_chunk_prep' ? GDN_TC_PREP_SIGNATURE : GDN_TC_MAIN_SIGNATURE };
}

/** The workspaces' shapes (elements) for a plan: hi, lo pairs (the 2) in the input dtype; G and the norms in f32. */
export function gdnTcWorkspaceShapes(B: number, T: number, H: number, HV: number, K: number, V: number, p: GdnTcPlan): Record<'w' | 'u' | 'aqk' | 'gc' | 'nrm', number[]> {
  return { w: [B * T, HV, 2, K], u: [B * T, HV, 2, V], aqk: [p.slots, HV, 2, 64, 64], gc: [B * T, HV], nrm: [B * T, H, 2] };
}

export interface GdnTcWorkspaces {
  readonly w: Tensor;
  readonly u: Tensor;
  readonly aqk: Tensor;
  readonly gc: Tensor;
  readonly nrm: Tensor;
}

/** Both launches of one call: the plan, the kernels' cache key, and the packed arguments (the signatures' order). */
export interface GdnTcLaunch {
  readonly plan: GdnTcPlan;
  readonly defines: Record<string, string | number>;
  readonly key: string;
  readonly prepArgs: ArgValue[];
  readonly mainArgs: ArgValue[];
}

export function gdnTcLaunch(x: GdnOperands, w: GdnTcWorkspaces, attrs: GdnAttrs, sms: number, sharedLimit = GDN_TC_MAX_SHARED, tileColumns = 0): GdnTcLaunch {
  const [B, T, H, K] = x.q.shape as [number, number, number, number];
  const [HV, V] = [x.v.shape[2]!, x.v.shape[3]!];
  const N = x.cu ? x.cu.shape[0]! - 1 : B;
  const plan = planGdnTc({ N, T, H, HV, K, V, varlen: x.cu !== null }, sms, sharedLimit, tileColumns);
  const idx = (t: Tensor | null) => (t?.dtype === 'i64' ? 'i64' : 'i32');
  const defines = gdnTcDefines([x.q.dtype, x.g.dtype, x.beta.dtype], K, V, plan, attrs.use_qk_l2norm_in_kernel, idx(x.cu), idx(x.idx));
  const key = `gdn-tc|${Object.values(defines).join('|')}`;
  const strides = (t: Tensor) => [t.strides[0]!, t.strides[1]!, t.strides[2]!];
  const slotStride = (t: Tensor) => (x.pooled ? t.strides[0]! : HV * K * V);
  const cu = x.cu ? addr(x.cu) : 0;
  const scale = attrs.scale ?? 1 / Math.sqrt(K);
  const prepArgs: ArgValue[] = [
    addr(x.q), addr(x.k), addr(x.v), addr(x.g), addr(x.beta), ...strides(x.q), ...strides(x.k), ...strides(x.v), ...strides(x.g), ...strides(x.beta),
    cu, T, H, HV, N, plan.ncMax, scale,
    addr(w.w), addr(w.u), addr(w.aqk), addr(w.gc), addr(w.nrm),
  ];
  const mainArgs: ArgValue[] = [
    addr(x.o), addr(x.q), addr(x.k), ...strides(x.q), ...strides(x.k), addr(w.w), addr(w.u), addr(w.aqk), addr(w.gc), addr(w.nrm),
    x.sIn ? addr(x.sIn) : 0, x.sIn ? slotStride(x.sIn) : 0,
    x.sOut ? addr(x.sOut) : 0, x.sOut ? slotStride(x.sOut) : 0,
    cu, x.idx ? addr(x.idx) : 0,
    T, H, HV, plan.ncMax, scale,
  ];
  if (prepArgs.length !== GDN_TC_PREP_SIGNATURE.length || mainArgs.length !== GDN_TC_MAIN_SIGNATURE.length) throw new Error('gdn tc: arguments do not match the signatures');
  return { plan, defines, key, prepArgs, mainArgs };
}

/** Runs a call gdnTcDecline accepted: the workspaces, then both launches. */
export class GdnTcRunner {
  private readonly kernels = new Map<string, CudaKernel>();

  constructor(private readonly cache: GenKernelCache) {}

  /** sharedLimit: gdnTcSharedLimit of the device (the one gdnTcDecline accepted the call for). */
  run(x: GdnOperands, attrs: GdnAttrs, sms: number, sharedLimit: number, temps: Tensor[]): void {
    const [B, T, H, K] = x.q.shape as [number, number, number, number];
    const [HV, V] = [x.v.shape[2]!, x.v.shape[3]!];
    const N = x.cu ? x.cu.shape[0]! - 1 : B;
    const tileColumns = cudaTuning().recurrent.chunkDeltaTileColumns;
    const plan = planGdnTc({ N, T, H, HV, K, V, varlen: x.cu !== null }, sms, sharedLimit, tileColumns);
    const shapes = gdnTcWorkspaceShapes(B, T, H, HV, K, V, plan);
    const make = (shape: number[], dtype: DType) => {
      const t = Tensor.empty(x.q.backend, shape, dtype, { device: x.q.device });
      temps.push(t);
      return t;
    };
    const dt = x.q.dtype;
    const w = { w: make(shapes.w, dt), u: make(shapes.u, dt), aqk: make(shapes.aqk, dt), gc: make(shapes.gc, 'f32'), nrm: make(shapes.nrm, 'f32') };
    // q, k, v rows are read by 16-byte cp.async
    const rows16 = (t: Tensor) => (rowsReadable16(t) ? t : (temps.push(t.contiguous()), temps[temps.length - 1]!));
    const l = gdnTcLaunch({ ...x, q: rows16(x.q), k: rows16(x.k), v: rows16(x.v) }, w, attrs, sms, sharedLimit, tileColumns);
    this.kernel(`${l.key}|prep`, 'fk_gdn_chunk_prep', l.defines).launch(l.plan.prepGrid, GDN_TC_PREP_THREADS, l.plan.prepSharedBytes, l.prepArgs);
    this.kernel(`${l.key}|main`, 'fk_gdn_chunk_tc', l.defines).launch(l.plan.mainGrid, l.plan.threads, l.plan.mainSharedBytes, l.mainArgs);
  }

  private kernel(key: string, entry: GdnTcEntry, defines: Record<string, string | number>): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = this.cache.kernel(key, () => gdnTcSource(entry, defines), 'gdn-chunk-tc')));
    return k;
  }
}
