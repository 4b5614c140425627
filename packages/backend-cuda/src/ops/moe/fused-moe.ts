/**
 * fused_moe_gemm on CUDA: one launch of kernels/fused_moe.cu over every block moe_align laid out, planned from shapes
 * (fused-moe-plan.ts) with the routing read on the device, so the call never synchronises and can be captured in a CUDA
 * graph. The kernel reads A and the weights in place where their rows are 16-byte aligned (A is copied otherwise; a
 * weight it cannot read declines, and the registry runs the op's decomposition); the routing tensors are taken as i32
 * and the routed weights as contiguous f32 (converted where they are not: graph-safe device copies).
 * With moe.fusedMoeWgmma on in the tuning, a prefill call on sm_90a takes the wgmma + TMA kernel instead
 * (fused-moe-wgmma.ts: its decline says when it does not).
 */
import { Tensor, type FusedMoeGemmAttrs, type OpCall } from '@fastkernels/core';
import type { ArgType, ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { MOE_TILES, moeDefines, planFusedMoe, type MoeDType, type MoePlan, type MoeShape, type MoeTile } from './fused-moe-plan.js';
import { FusedMoeWgmma } from './fused-moe-wgmma.js';

const FILE = 'fused_moe.cu';
const ENTRY = 'fk_fused_moe';

/** c, a, b, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded; N K E top_k slots R bs m_tiles n_tiles group_m; A / W strides. */
export const FUSED_MOE_SIGNATURE: readonly ArgType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr',
  'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32',
  'i64', 'i64', 'i64',
];

const DTYPES = new Set(['bf16', 'f16']);
const MAX_GRID = 2 ** 31 - 1;

/** The call's shape as the planner sees it. */
export function moeShape(call: OpCall<FusedMoeGemmAttrs>): MoeShape {
  const [a, b, , sorted, experts] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor, Tensor];
  return { M: a.shape[0]!, topK: call.attrs.top_k, E: b.shape[0]!, N: b.shape[1]!, K: b.shape[2]!, P: sorted.shape[0]!, NB: experts.shape[0]! };
}

/** Whether the kernel reads rows of `t` (last dim contiguous, 16-byte aligned start and leading strides) in place. */
export function rowsAligned(t: Tensor): boolean {
  const r = t.rank;
  if (t.shape[r - 1]! > 1 && t.strides[r - 1] !== 1) return false;
  const p = t.storage.devicePtr;
  if (p === undefined || (p + t.offset * t.itemsize) % 16 !== 0) return false;
  const vec = 16 / t.itemsize;
  for (let d = 0; d < r - 1; d++) if (t.shape[d]! > 1 && t.strides[d]! % vec !== 0) return false;
  return true;
}

/** The reason the kernel declines a call (the registry then decomposes it), or null. */
export function fusedMoeDecline(a: Tensor, b: Tensor, shape: MoeShape, plan: () => MoePlan): string | null {
  if (!DTYPES.has(a.dtype)) return `dtype ${a.dtype}: the tensor-core kernel takes bf16 and f16`;
  if (shape.K % 8 !== 0) return `K = ${shape.K} is not a multiple of 8 (the kernel copies 16-byte chunks)`;
  if (!rowsAligned(b)) return 'weight rows are not contiguous and 16-byte aligned';
  if (plan().grid > MAX_GRID) return 'grid too large';
  return null;
}

export class FusedMoeGemm {
  private readonly kernels = new Map<number, CudaKernel>();
  private readonly args: ArgValue[] = new Array<ArgValue>(FUSED_MOE_SIGNATURE.length).fill(0);
  /** A tile configuration every call takes instead of the planner's choice (tests run each variant; A/B runs). */
  forceTile: MoeTile | undefined;
  /** The plan of the last mma.sync launch (tests check which tile ran); undefined when the wgmma route ran. */
  lastPlan: MoePlan | undefined;
  /** The Hopper prefill route (moe.fusedMoeWgmma); its lastPlan says when it ran. */
  readonly wgmma: FusedMoeWgmma;
  /** Why the last call did not take the wgmma route (null: it did). */
  lastWgmmaDecline: string | null = null;

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {
    this.wgmma = new FusedMoeWgmma(cache, runtime);
  }

  private sms(): number {
    return this.runtime().properties().multiprocessors;
  }

  readonly supports = (call: OpCall<FusedMoeGemmAttrs>): true | string => {
    const [a, b] = call.inputs as [Tensor, Tensor];
    const s = moeShape(call);
    return fusedMoeDecline(a, b, s, () => planFusedMoe(s, this.sms(), this.forceTile)) ?? true;
  };

  readonly run = (call: OpCall<FusedMoeGemmAttrs>): Tensor => {
    const [aIn, b, twIn, sortedIn, expertsIn, postIn] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor, Tensor, Tensor];
    const meta = call.outputs[0]!;
    const out = Tensor.empty(call.backend, meta.shape, meta.dtype, { device: aIn.device });
    const s = moeShape(call);
    const plan = planFusedMoe(s, this.sms(), this.forceTile);
    this.lastPlan = plan;
    this.wgmma.lastPlan = undefined;
    if (plan.grid === 0 || out.numel === 0) return out;
    const mul = call.attrs.mul_routed_weight;
    const temps: Tensor[] = [];
    try {
      // A is read in place or as an aligned copy: the wgmma route's gather sees aligned rows either way
      const wgmmaDecline = this.forceTile ? 'a tile is forced' : this.wgmma.decline(call, s, true);
      this.lastWgmmaDecline = wgmmaDecline;
      const a = rowsAligned(aIn) ? aIn : keep(temps, aIn.clone()); // a fresh, aligned copy
      const ints = (t: Tensor) => (t.dtype === 'i32' && t.isContiguous() ? t : keep(temps, t.to('i32')));
      const tw = mul ? (twIn!.dtype === 'f32' && twIn!.isContiguous() ? twIn! : keep(temps, twIn!.to('f32'))) : null;
      const [sorted, experts, post] = [ints(sortedIn), ints(expertsIn), ints(postIn)];
      if (wgmmaDecline === null) {
        if (this.wgmma.run(call, s, { out, a, b, topkWeights: tw, sorted, experts, post })) {
          this.lastPlan = undefined;
          return out;
        }
        this.lastWgmmaDecline = 'a tensor map was refused by the driver';
      }
      const k = this.kernel(plan, a.dtype as MoeDType, mul);
      const g = this.args;
      let i = 0;
      g[i++] = out; g[i++] = a; g[i++] = b; g[i++] = tw ?? 0;
      g[i++] = sorted; g[i++] = experts; g[i++] = post;
      g[i++] = s.N; g[i++] = s.K; g[i++] = s.E; g[i++] = s.topK; g[i++] = s.M * s.topK;
      g[i++] = plan.rowsPerCta; g[i++] = plan.blockSize; g[i++] = plan.mTiles; g[i++] = plan.nTiles; g[i++] = plan.tile.groupM;
      g[i++] = a.rank > 1 ? a.strides[0]! : s.K; g[i++] = b.strides[0]!; g[i++] = b.strides[1]!;
      k.launch(plan.grid, plan.threads, plan.smemBytes, g);
    } catch (e) {
      out.dispose();
      throw e;
    } finally {
      for (const t of temps) t.dispose();
    }
    return out;
  };

  private kernel(plan: MoePlan, dtype: MoeDType, mul: boolean): CudaKernel {
    const key = (MOE_TILES.indexOf(plan.tile) * 2 + (dtype === 'f16' ? 1 : 0)) * 2 + (mul ? 1 : 0);
    let k = this.kernels.get(key);
    if (!k) {
      const defines = moeDefines(plan.tile, dtype, mul);
      k = this.cache.kernel(`fused_moe ${JSON.stringify(defines)}`, () => fusedMoeSource(defines), 'fused_moe');
      this.kernels.set(key, k);
    }
    return k;
  }
}

/** The kernel file with its specialisation prepended as #defines (the cubin cache keys on the whole source). */
export function fusedMoeSource(defines: Readonly<Record<string, string | number>>): { source: string; entry: string; signature: readonly ArgType[] } {
  const source = KERNEL_SOURCES[FILE];
  if (source === undefined) throw new Error(`kernel source ${FILE} is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)`);
  const head = Object.entries(defines).map(([k, v]) => `#define ${k} ${v}`).join('\n');
  return { source: `${head}\n${source}`, entry: ENTRY, signature: FUSED_MOE_SIGNATURE };
}

function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.push(t);
  return t;
}
