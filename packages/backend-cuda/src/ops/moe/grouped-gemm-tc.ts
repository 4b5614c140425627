/**
 * The tensor-core grouped GEMM (kernels/grouped_gemm_route.cu, then kernels/grouped_gemm_tc.cu): the prefill path of
 * grouped_gemm (bf16 / f16 weights [E, N, K] read in place, k or n contiguous) and mxfp4_grouped_gemm (MXFP4 blocks decoded inside the
 * GEMM, never to a bf16 copy of the experts). Two launches planned from shapes alone (grouped-gemm-tc-plan.ts): the
 * routing kernel groups the rows by expert on the device into two small scratch tensors, the GEMM reads them, so the
 * call never synchronises and can be captured in a CUDA graph. The launchers (grouped-gemm.ts, mxfp4-grouped-gemm.ts)
 * take it past GROUPED_GEMM_EAGER_ROWS rows, eagerly and under capture alike (a captured call computes what the eager
 * one does, bit for bit); decode-sized calls keep the CUDA-core GEMV kernel.
 */
import { Tensor } from '@fastkernels/core';
import type { ArgType, ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { GenKernelCache } from '../gen-cache.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { rowsAligned } from './fused-moe.js';
import { GROUPED_TC_ROUTE_THREADS, groupedTcDefines, groupedTcRouteDefines, planGroupedTc, type GroupedTcDType, type GroupedTcFormat } from './grouped-gemm-tc-plan.js';

/** route, perm, tiles; T E BM slots */
export const GROUPED_TC_ROUTE_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32'];
/** out, x, w (rows or blocks), scales, perm, tiles, bias; N K E slots n_tiles group_m; x row stride, w expert / row (n's, or k's when n is contiguous) strides, bias row stride */
export const GROUPED_TC_SIGNATURE: readonly ArgType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr',
  'i32', 'i32', 'i32', 'i32', 'i32', 'i32',
  'i64', 'i64', 'i64', 'i64',
];

const DTYPES = new Set(['bf16', 'f16']);
const MAX_GRID = 2 ** 31 - 1;
/** Experts the routing kernel's shared memory (3 (E + 2) ints) holds within the default 48 KiB. */
const MAX_EXPERTS = 4000;

/** The weight operand: bf16 / f16 rows [E, N, K], or MXFP4 blocks [E, N, K / 32, 16] + scales [E, N, K / 32]. */
export type GroupedTcWeight = { readonly kind: 'dense'; readonly w: Tensor } | { readonly kind: 'mxfp4'; readonly blocks: Tensor; readonly scales: Tensor };

export interface GroupedTcCall {
  readonly x: Tensor;
  readonly weight: GroupedTcWeight;
  /** expert_ids [T] or offsets [E + 1], i32 / i64 */
  readonly route: Tensor;
  readonly byIds: boolean;
  readonly bias: Tensor | null;
  /** output columns and experts */
  readonly N: number;
  readonly E: number;
}

/** The embedded kernel file with #defines prepended (the cubin cache keys on the whole source). */
function fileSource(file: string, entry: string, signature: readonly ArgType[], defines: Readonly<Record<string, string | number>>): GeneratedKernel {
  const source = KERNEL_SOURCES[file];
  if (source === undefined) throw new Error(`kernel source ${file} is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)`);
  const head = Object.entries(defines).map(([k, v]) => `#define ${k} ${v}`).join('\n');
  return { source: `${head}\n${source}`, entry, signature };
}

export function groupedTcSource(defines: Readonly<Record<string, string | number>>): GeneratedKernel {
  return fileSource('grouped_gemm_tc.cu', 'fk_grouped_gemm_tc', GROUPED_TC_SIGNATURE, defines);
}

export function groupedTcRouteSource(defines: Readonly<Record<string, string | number>>): GeneratedKernel {
  return fileSource('grouped_gemm_route.cu', 'fk_grouped_gemm_route', GROUPED_TC_ROUTE_SIGNATURE, defines);
}

/**
 * Why the tensor-core kernel cannot take a call (dtype, layouts, sizes), or null. x rows that are not 16-byte aligned
 * are copied, not declined; the weight is read in place, so a weight it cannot read declines.
 */
export function groupedTcDecline(c: GroupedTcCall): string | null {
  const { x, weight } = c;
  if (!DTYPES.has(x.dtype)) return `dtype ${x.dtype}: the tensor-core kernel takes bf16 and f16`;
  if (weight.kind === 'dense' && weight.w.dtype !== x.dtype) return `weight dtype ${weight.w.dtype} differs from the input's ${x.dtype}`;
  if (c.bias && c.bias.dtype !== x.dtype) return `bias dtype ${c.bias.dtype} differs from the input's ${x.dtype}`;
  if (c.route.dtype !== 'i32' && c.route.dtype !== 'i64') return `routing dtype ${c.route.dtype}: the kernel reads i32 or i64`;
  const K = x.shape[1]!;
  if (K % 8 !== 0) return `K = ${K} is not a multiple of 8 (the tensor-core kernel copies 16-byte chunks)`;
  if (c.E > MAX_EXPERTS) return `${c.E} experts: more than the routing kernel's ${MAX_EXPERTS}`;
  if (x.shape[0]! >= 2 ** 31 / 2) return `${x.shape[0]} rows: too many for the routing kernel's 32-bit positions`;
  const format = formatOf(weight);
  if (format === 'k-contiguous' && !rowsAligned((weight as { w: Tensor }).w)) return 'weight rows are not 16-byte aligned';
  if (format === 'n-contiguous') {
    const w = (weight as { w: Tensor }).w;
    if (w.strides[1] !== 1 && w.shape[1]! > 1) return 'weight has neither k nor n contiguous';
    if (c.N % 8 !== 0) return `N = ${c.N} is not a multiple of 8 (an n-contiguous weight is copied in 16-byte chunks)`;
    const p = w.storage.devicePtr;
    if (p === undefined || (p + w.offset * w.itemsize) % 16 !== 0 || w.strides[0]! % 8 !== 0 || w.strides[2]! % 8 !== 0) return 'weight columns are not 16-byte aligned';
  }
  const plan = planGroupedTc({ T: x.shape[0]!, N: c.N, K, E: c.E, format });
  if (plan.grid > MAX_GRID) return 'grid too large';
  return null;
}

/** The kernel's weight format: MXFP4, or dense by which of k / n is contiguous (k where both are: a single column). */
export function formatOf(weight: GroupedTcWeight): GroupedTcFormat {
  if (weight.kind === 'mxfp4') return 'mxfp4';
  const w = weight.w;
  return w.strides[2] === 1 || w.shape[2]! <= 1 ? 'k-contiguous' : 'n-contiguous';
}

export class GroupedGemmTc {
  private readonly args: ArgValue[] = new Array<ArgValue>(GROUPED_TC_SIGNATURE.length).fill(0);
  private readonly routeArgs: ArgValue[] = new Array<ArgValue>(GROUPED_TC_ROUTE_SIGNATURE.length).fill(0);

  constructor(private readonly cache: GenKernelCache) {}

  /** out [T, N] (contiguous, x's dtype) = the grouped GEMM of a call groupedTcDecline accepted; bias / routing contiguous. */
  run(out: Tensor, c: GroupedTcCall): void {
    const T = c.x.shape[0]!;
    const K = c.x.shape[1]!;
    const format = formatOf(c.weight);
    const plan = planGroupedTc({ T, N: c.N, K, E: c.E, format });
    const temps: Tensor[] = [];
    const keep = (t: Tensor) => (temps.push(t), t);
    try {
      const x = rowsAligned(c.x) ? c.x : keep(c.x.clone()); // a fresh, aligned copy
      // the routing kernel's output: rows in expert order, and one {group, first, end, 0} a slot (graph-safe scratch)
      const perm = keep(Tensor.empty(out.backend, [T], 'i32', { device: out.device }));
      const tiles = keep(Tensor.empty(out.backend, [plan.slots, 4], 'i32', { device: out.device }));
      const r = this.routeArgs;
      let i = 0;
      r[i++] = c.route; r[i++] = perm; r[i++] = tiles; r[i++] = T; r[i++] = c.E; r[i++] = plan.tile.BM; r[i++] = plan.slots;
      const routeDefines = groupedTcRouteDefines(c.route.dtype as 'i32' | 'i64', c.byIds);
      this.kernel(`grouped_gemm_route ${JSON.stringify(routeDefines)}`, () => groupedTcRouteSource(routeDefines)).launch(1, GROUPED_TC_ROUTE_THREADS, plan.routeSmemBytes, r);

      const defines = groupedTcDefines(plan, x.dtype as GroupedTcDType, format, c.bias !== null);
      const w = c.weight;
      const g = this.args;
      i = 0;
      g[i++] = out; g[i++] = x; g[i++] = w.kind === 'dense' ? w.w : w.blocks; g[i++] = w.kind === 'mxfp4' ? w.scales : 0;
      g[i++] = perm; g[i++] = tiles; g[i++] = c.bias ?? 0;
      g[i++] = c.N; g[i++] = K; g[i++] = c.E; g[i++] = plan.slots; g[i++] = plan.nTiles; g[i++] = plan.tile.groupM;
      g[i++] = x.strides[0]!; g[i++] = w.kind === 'dense' ? w.w.strides[0]! : 0;
      g[i++] = w.kind === 'dense' ? w.w.strides[format === 'n-contiguous' ? 2 : 1]! : 0;
      g[i++] = c.bias ? c.bias.strides[0]! : 0;
      this.kernel(`grouped_gemm_tc ${JSON.stringify(defines)}`, () => groupedTcSource(defines)).launch(plan.grid, plan.threads, plan.smemBytes, g);
    } finally {
      for (const t of temps) t.dispose();
    }
  }

  private kernel(key: string, generate: () => GeneratedKernel): CudaKernel {
    return this.cache.kernel(key, generate, key.split(' ')[0]!);
  }
}
