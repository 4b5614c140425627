/**
 * grouped_gemm on CUDA: one launch of the CUDA-core GEMV kernel (grouped-gemm-source.ts) for calls of up to
 * `GROUPED_GEMM_EAGER_ROWS` rows (decode steps), and the tensor-core grouped GEMM (grouped-gemm-tc.ts: bf16 / f16, the
 * weight read in place, k or n contiguous) past them, both with the routing read on the device, so MoE layers that call
 * it (gpt-oss's experts, fused_moe_gemm's decomposition at f32) stay capturable in a CUDA graph. A larger call the
 * tensor-core kernel declines (f32, unaligned weights) takes the GEMV kernel under a graph capture and otherwise the
 * op's decomposition: one cuBLAS GEMM per expert run with the routing read on the host.
 */
import { Tensor, type OpCall } from '@fastkernels/core';
import type { ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { captureHooks, type CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { GROUPED_GEMM_SIGNATURE, GROUPED_GEMM_THREADS, groupedGemmColumnsPerCta, groupedGemmSource, type GroupedGemmVariant } from './grouped-gemm-source.js';
import { GroupedGemmTc, groupedTcDecline, type GroupedTcCall } from './grouped-gemm-tc.js';

/** Rows a call may have and still take the CUDA-core GEMV kernel (a decode step's routed rows); more take the tensor-core kernel. */
export const GROUPED_GEMM_EAGER_ROWS = 64;
const MAX_GRID_Y = 65535;
const DTYPES = new Set(['f32', 'f16', 'bf16']);

/** Why the kernel cannot take the call at all (dtypes, layouts, sizes), or null. */
export function groupedGemmDecline(x: Tensor, w: Tensor, route: Tensor, bias: Tensor | null): string | null {
  if (!DTYPES.has(x.dtype) || w.dtype !== x.dtype || (bias && bias.dtype !== x.dtype)) return `dtypes ${x.dtype} / ${w.dtype}${bias ? ` / ${bias.dtype}` : ''}: the kernel takes one of f32, f16, bf16 throughout`;
  if (route.dtype !== 'i32' && route.dtype !== 'i64') return `routing dtype ${route.dtype}: the kernel reads i32 or i64`;
  if (x.shape[0]! > MAX_GRID_Y) return `${x.shape[0]} rows: more than a grid's ${MAX_GRID_Y}`;
  if (w.shape[1]! * x.shape[0]! >= 2 ** 31) return 'output too large for 32-bit indexing';
  return null;
}

/**
 * null when a call of `rows` rows takes the GEMV kernel: few rows, or any number inside a graph capture; `tcWhy` says why
 * the tensor-core kernel declined it (the caller asks it first past GROUPED_GEMM_EAGER_ROWS rows).
 */
export function groupedGemmRowsDecline(rows: number, runtime: () => CudaRuntime, tcWhy: string): string | null {
  if (rows <= GROUPED_GEMM_EAGER_ROWS) return null;
  return runtime().capturing ? null : `${rows} rows outside a graph capture, and the tensor-core kernel declines: ${tcWhy}`;
}

/** Whether a call takes the tensor-core kernel: past the GEMV's rows and accepted by it (else why not). */
export function tensorCoreRoute(c: GroupedTcCall): { readonly take: boolean; readonly why: string } {
  if (c.x.shape[0]! <= GROUPED_GEMM_EAGER_ROWS) return { take: false, why: 'a decode-sized call' };
  const why = groupedTcDecline(c);
  return { take: why === null, why: why ?? '' };
}

/**
 * Kernels an eager call declined (too many rows) that a capture of the same call will launch: compiled by a capture
 * hook before the stream is captured, since a module load during capture fails (the engine's warm-up runs each decode
 * shape eagerly first, and at more than GROUPED_GEMM_EAGER_ROWS rows that run took the decomposition).
 */
export class CompileBeforeCapture {
  private readonly pending = new Map<string, () => CudaKernel>();

  constructor(runtime: () => CudaRuntime) {
    captureHooks.push((rt) => {
      if (this.pending.size === 0 || rt !== runtime()) return;
      for (const kernel of this.pending.values()) kernel().compile();
      this.pending.clear();
    });
  }

  add(key: string, kernel: () => CudaKernel): void {
    this.pending.set(key, kernel);
  }
}

export class GroupedGemm {
  private readonly args: ArgValue[] = new Array<ArgValue>(GROUPED_GEMM_SIGNATURE.length).fill(0);
  private readonly beforeCapture: CompileBeforeCapture;

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
    private readonly tc: GroupedGemmTc = new GroupedGemmTc(cache),
  ) {
    this.beforeCapture = new CompileBeforeCapture(runtime);
  }

  readonly supports = (call: OpCall): true | string => {
    const [x, w, offs, ids, bias] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor | null, Tensor | null];
    const route = (ids ?? offs)!;
    const tc = tensorCoreRoute(tcCall(x, w, offs, ids, bias));
    if (tc.take) return true;
    const shapeWhy = groupedGemmDecline(x, w, route, bias);
    if (shapeWhy) return shapeWhy;
    const rowsWhy = groupedGemmRowsDecline(x.shape[0]!, this.runtime, tc.why);
    if (rowsWhy === null) return true;
    // a capture of this call will take the kernel: compile it before then
    const v = variantOf(x, w, ids !== null, route, bias);
    this.beforeCapture.add(JSON.stringify(v), () => this.kernel(v));
    return rowsWhy;
  };

  readonly run = (call: OpCall): Tensor => {
    const [xIn, w, offs, ids, biasIn] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor | null, Tensor | null];
    const meta = call.outputs[0]!;
    const out = Tensor.empty(call.backend, meta.shape, meta.dtype, { device: xIn.device });
    const [rows, N] = meta.shape as [number, number];
    if (out.numel === 0) return out;
    const temps: Tensor[] = [];
    try {
      // x rows and bias rows are read with a unit last stride; routing contiguous (graph-safe device copies otherwise)
      const x = xIn.strides[1] === 1 || xIn.shape[1]! <= 1 ? xIn : keep(temps, xIn.contiguous());
      const route0 = (ids ?? offs)!;
      const route = route0.isContiguous() ? route0 : keep(temps, route0.contiguous());
      const bias = biasIn && !(biasIn.strides[1] === 1 || biasIn.shape[1]! <= 1) ? keep(temps, biasIn.contiguous()) : biasIn;
      if (tensorCoreRoute(tcCall(x, w, offs, ids, bias)).take) {
        this.tc.run(out, { x, weight: { kind: 'dense', w }, route, byIds: ids !== null, bias, N, E: w.shape[0]! });
        return out;
      }
      const variant = variantOf(x, w, ids !== null, route, bias);
      const layout = variant.layout;
      const g = this.args;
      let i = 0;
      g[i++] = out; g[i++] = x; g[i++] = w; g[i++] = route; g[i++] = bias ?? 0;
      g[i++] = rows; g[i++] = N; g[i++] = w.shape[2]!; g[i++] = w.shape[0]!;
      g[i++] = x.strides[0]!; g[i++] = w.strides[0]!; g[i++] = w.strides[1]!; g[i++] = w.strides[2]!; g[i++] = bias ? bias.strides[0]! : 0;
      const cols = groupedGemmColumnsPerCta(layout);
      this.kernel(variant).launch([Math.ceil(N / cols), rows, 1], GROUPED_GEMM_THREADS, 0, g);
    } catch (e) {
      out.dispose();
      throw e;
    } finally {
      for (const t of temps) t.dispose();
    }
    return out;
  };

  private kernel(v: GroupedGemmVariant): CudaKernel {
    return this.cache.kernel(`grouped_gemm ${JSON.stringify(v)}`, () => groupedGemmSource(v), 'grouped_gemm');
  }
}

/** The generated variant a call runs (x's dtype throughout, the routing's form and index type, the weight's layout). */
function variantOf(x: Tensor, w: Tensor, byIds: boolean, route: Tensor, bias: Tensor | null): GroupedGemmVariant {
  const layout = w.strides[2] === 1 || w.shape[2]! <= 1 ? 'k-contiguous' : 'n-contiguous';
  return { dtype: x.dtype as GroupedGemmVariant['dtype'], routing: byIds ? 'ids' : 'offsets', index: route.dtype as 'i32' | 'i64', bias: bias !== null, layout };
}

/** The call as the tensor-core kernel sees it. */
function tcCall(x: Tensor, w: Tensor, offs: Tensor | null, ids: Tensor | null, bias: Tensor | null): GroupedTcCall {
  return { x, weight: { kind: 'dense', w }, route: (ids ?? offs)!, byIds: ids !== null, bias, N: w.shape[1]!, E: w.shape[0]! };
}

function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.push(t);
  return t;
}
