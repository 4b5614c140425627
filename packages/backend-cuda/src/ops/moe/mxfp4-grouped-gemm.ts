/**
 * mxfp4_grouped_gemm on CUDA: gpt-oss's MXFP4 experts read in their packed form, the routing read on the device. Calls
 * of up to GROUPED_GEMM_EAGER_ROWS rows (decode steps) take a GEMV a routed row (grouped-gemm-source.ts,
 * `mxfp4GroupedGemmSource`); past them bf16 / f16 calls take the tensor-core grouped GEMM (grouped-gemm-tc.ts), which
 * decodes each weight tile in shared memory, never to a bf16 copy of the experts. A larger call it declines (f32) takes
 * the GEMV under a graph capture and otherwise the op's decomposition (mxfp4_dequant of every expert, then grouped_gemm).
 */
import { Tensor, type OpCall } from '@fastkernels/core';
import type { ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { CompileBeforeCapture, groupedGemmRowsDecline, tensorCoreRoute } from './grouped-gemm.js';
import { GroupedGemmTc, type GroupedTcCall } from './grouped-gemm-tc.js';
import { GROUPED_GEMM_THREADS, MXFP4_GROUPED_GEMM_SIGNATURE, groupedGemmColumnsPerCta, mxfp4GroupedGemmSource, type Mxfp4GroupedGemmVariant } from './grouped-gemm-source.js';

const DTYPES = new Set(['f32', 'f16', 'bf16']);
const MAX_GRID_Y = 65535;

export class Mxfp4GroupedGemm {
  private readonly args: ArgValue[] = new Array<ArgValue>(MXFP4_GROUPED_GEMM_SIGNATURE.length).fill(0);
  private readonly beforeCapture: CompileBeforeCapture;

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
    private readonly tc: GroupedGemmTc = new GroupedGemmTc(cache),
  ) {
    this.beforeCapture = new CompileBeforeCapture(runtime);
  }

  readonly supports = (call: OpCall): true | string => {
    const [x, blocks, , offs, ids, bias] = call.inputs as [Tensor, Tensor, Tensor, Tensor | null, Tensor | null, Tensor | null];
    const route = (ids ?? offs)!;
    const tc = tensorCoreRoute(tcCall(x, blocks, call.inputs[2] as Tensor, offs, ids, bias));
    if (tc.take) return true;
    if (!DTYPES.has(x.dtype)) return `dtype ${x.dtype}: the kernel takes f32, f16, bf16`;
    if (route.dtype !== 'i32' && route.dtype !== 'i64') return `routing dtype ${route.dtype}: the kernel reads i32 or i64`;
    if (x.shape[0]! > MAX_GRID_Y) return `${x.shape[0]} rows: more than a grid's ${MAX_GRID_Y}`;
    if (blocks.shape[1]! * x.shape[0]! >= 2 ** 31) return 'output too large for 32-bit indexing';
    const rowsWhy = groupedGemmRowsDecline(x.shape[0]!, this.runtime, tc.why);
    if (rowsWhy === null) return true;
    // a capture of this call will take the kernel: compile it before then (route and bias may be made contiguous, not retyped)
    const v: Mxfp4GroupedGemmVariant = { dtype: x.dtype as Mxfp4GroupedGemmVariant['dtype'], routing: ids ? 'ids' : 'offsets', index: route.dtype as 'i32' | 'i64', bias: bias !== null };
    this.beforeCapture.add(JSON.stringify(v), () => this.kernel(v));
    return rowsWhy;
  };

  readonly run = (call: OpCall): Tensor => {
    const [xIn, blocksIn, scalesIn, offs, ids, biasIn] = call.inputs as [Tensor, Tensor, Tensor, Tensor | null, Tensor | null, Tensor | null];
    const meta = call.outputs[0]!;
    const out = Tensor.empty(call.backend, meta.shape, meta.dtype, { device: xIn.device });
    const [rows, N] = meta.shape as [number, number];
    if (out.numel === 0) return out;
    const temps: Tensor[] = [];
    const keep = (t: Tensor) => (temps.push(t), t);
    try {
      // x and bias rows with a unit last stride; blocks contiguous from a 16-byte boundary; scales and routing contiguous
      const x = xIn.strides[1] === 1 || xIn.shape[1]! <= 1 ? xIn : keep(xIn.contiguous());
      const aligned = blocksIn.isContiguous() && ((blocksIn.storage.devicePtr ?? 0) + blocksIn.offset) % 16 === 0;
      const blocks = aligned ? blocksIn : keep(blocksIn.clone());
      const scales = scalesIn.isContiguous() ? scalesIn : keep(scalesIn.contiguous());
      const route0 = (ids ?? offs)!;
      const route = route0.isContiguous() ? route0 : keep(route0.contiguous());
      const bias = biasIn && !(biasIn.strides[1] === 1 || biasIn.shape[1]! <= 1) ? keep(biasIn.contiguous()) : biasIn;
      if (tensorCoreRoute(tcCall(x, blocks, scales, offs, ids, bias)).take) {
        this.tc.run(out, { x, weight: { kind: 'mxfp4', blocks, scales }, route, byIds: ids !== null, bias, N, E: blocks.shape[0]! });
        return out;
      }
      const v: Mxfp4GroupedGemmVariant = { dtype: x.dtype as Mxfp4GroupedGemmVariant['dtype'], routing: ids ? 'ids' : 'offsets', index: route.dtype as 'i32' | 'i64', bias: bias !== null };
      const g = this.args;
      let i = 0;
      g[i++] = out; g[i++] = x; g[i++] = blocks; g[i++] = scales; g[i++] = route; g[i++] = bias ?? 0;
      g[i++] = rows; g[i++] = N; g[i++] = x.shape[1]!; g[i++] = blocks.shape[0]!;
      g[i++] = x.strides[0]!; g[i++] = bias ? bias.strides[0]! : 0;
      this.kernel(v).launch([Math.ceil(N / groupedGemmColumnsPerCta('k-contiguous')), rows, 1], GROUPED_GEMM_THREADS, 0, g);
    } catch (e) {
      out.dispose();
      throw e;
    } finally {
      for (const t of temps) t.dispose();
    }
    return out;
  };

  private kernel(v: Mxfp4GroupedGemmVariant): CudaKernel {
    return this.cache.kernel(`mxfp4_grouped_gemm ${JSON.stringify(v)}`, () => mxfp4GroupedGemmSource(v), 'mxfp4_grouped_gemm');
  }
}

/** The call as the tensor-core kernel sees it. */
function tcCall(x: Tensor, blocks: Tensor, scales: Tensor, offs: Tensor | null, ids: Tensor | null, bias: Tensor | null): GroupedTcCall {
  return { x, weight: { kind: 'mxfp4', blocks, scales }, route: (ids ?? offs)!, byIds: ids !== null, bias, N: blocks.shape[1]!, E: blocks.shape[0]! };
}
