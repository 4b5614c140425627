/**
 * The CUDA source of grouped_gemm on CUDA cores (the registry op: out[t] = input[t] @ weight[e(t)]^T + bias[e(t)], rows
 * choosing their expert by expert_ids or by offsets): a GEMV per row, f32 accumulation, one rounding at the store. The
 * expert of a row is read on the device (an id, or a binary search of the offsets), so a launch depends on shapes alone
 * and can be captured in a CUDA graph; a row without an expert (-1, out of range, or past offsets[E]) is a zero row.
 * Two thread layouts by the weight's layout:
 * - 'k-contiguous' (weight [E, N, K] rows, vLLM's w13 / w2): a warp a column, its lanes striding over k (coalesced);
 *   8 warps a CTA take 8 columns of one row;
 * - 'n-contiguous' (a transposed view, HF's gate_up_proj [E, K, N] seen as [E, N, K]): a thread a column, 256 columns a
 *   CTA, each k step one coalesced row of the weight.
 * Weights are read once per row (no reuse across rows of one expert): the path for decode steps and CUDA graphs; large
 * prefills take the tensor-core grouped GEMM (grouped-gemm-tc.ts) at bf16 / f16, else the op's decomposition (one
 * cuBLAS GEMM per expert run, the routing read on the host).
 * `mxfp4GroupedGemmSource` is the same kernel over MXFP4 experts (mxfp4_grouped_gemm: blocks u8 [E, N, K / 32, 16],
 * scales u8 [E, N, K / 32]): a warp a column, a lane a 32-value block (one 16-byte load and its scale, decoded in
 * registers), so a decode step reads the hit experts' 4.25 bits a weight and nothing else.
 */
import type { ArgType } from '../../args.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { MXFP4_DEVICE_FUNCTIONS } from '../quant/mxfp4-source.js';

export type GroupedGemmDType = 'f32' | 'f16' | 'bf16';
export type GroupedGemmLayout = 'k-contiguous' | 'n-contiguous';

export interface GroupedGemmVariant {
  readonly dtype: GroupedGemmDType;
  /** how rows find their expert: expert_ids [T] or offsets [E + 1] */
  readonly routing: 'ids' | 'offsets';
  readonly index: 'i32' | 'i64';
  readonly bias: boolean;
  readonly layout: GroupedGemmLayout;
}

export const GROUPED_GEMM_ENTRY = 'fk_grouped_gemm';
/** threads a CTA (8 warps) */
export const GROUPED_GEMM_THREADS = 256;

/** out, x, w, route, bias; rows N K E; x row stride, w strides (expert, n, k), bias row stride. */
export const GROUPED_GEMM_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64'];

const CTYPE: Record<GroupedGemmDType, { t: string; load: string; store: string; header: string }> = {
  f32: { t: 'float', load: '(v)', store: '(v)', header: '' },
  f16: { t: '__half', load: '__half2float(v)', store: '__float2half_rn(v)', header: '#include <cuda_fp16.h>' },
  bf16: { t: '__nv_bfloat16', load: '__bfloat162float(v)', store: '__float2bfloat16_rn(v)', header: '#include <cuda_bf16.h>' },
};

/** Columns one CTA computes: 8 (a warp each) or 256 (a thread each). */
export function groupedGemmColumnsPerCta(layout: GroupedGemmLayout): number {
  return layout === 'k-contiguous' ? GROUPED_GEMM_THREADS / 32 : GROUPED_GEMM_THREADS;
}

/** The element / index types and the float load / rounding store. */
function prelude(dtype: GroupedGemmDType, index: 'i32' | 'i64'): string {
  const c = CTYPE[dtype];
  return `${c.header}
typedef ${c.t} T;
typedef ${index === 'i64' ? 'long long' : 'int'} IDX;
__device__ __forceinline__ float ld(T v) { return ${c.load}; }
__device__ __forceinline__ T st(float v) { return ${c.store}; }`;
}

/** `e`, the row's expert: expert_ids[row], or the run of the offsets that holds the row (-1 past offsets[E]). */
function expertLookup(routing: 'ids' | 'offsets'): string {
  if (routing === 'ids') return `  const long long e = (long long)route[row];`;
  return `  // the expert whose run [offsets[e], offsets[e + 1]) holds the row: the count of run ends at or before it
  int lo = 0, hi = E;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if ((long long)route[mid + 1] <= (long long)row) lo = mid + 1; else hi = mid;
  }
  const long long e = (long long)route[0] <= (long long)row ? (long long)lo : -1LL;`;
}

export function groupedGemmSource(v: GroupedGemmVariant): GeneratedKernel {
  const expertOf = expertLookup(v.routing);
  const body =
    v.layout === 'k-contiguous'
      ? `  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * ${groupedGemmColumnsPerCta('k-contiguous')} + (threadIdx.x >> 5);
  if (n >= N) return;
  float acc = 0.f;
  if (valid) {
    const T* wr = w + e * ws_e + (long long)n * ws_n;
    for (int k = lane; k < K; k += 32) acc += ld(xr[k]) * ld(wr[(long long)k * ws_k]);
  }
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane != 0) return;`
      : `  const int n = blockIdx.x * ${GROUPED_GEMM_THREADS} + threadIdx.x;
  if (n >= N) return;
  float acc = 0.f;
  if (valid) {
    const T* wc = w + e * ws_e + (long long)n * ws_n;
    for (int k = 0; k < K; k++) acc += ld(xr[k]) * ld(wc[(long long)k * ws_k]);
  }`;
  const source = `// grouped_gemm on CUDA cores (generated by grouped-gemm-source.ts): ${JSON.stringify(v)}
${prelude(v.dtype, v.index)}

extern "C" __global__ void __launch_bounds__(${GROUPED_GEMM_THREADS}) ${GROUPED_GEMM_ENTRY}(
    T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ w, const IDX* __restrict__ route,
    const T* __restrict__ bias, int rows, int N, int K, int E, long long xs, long long ws_e, long long ws_n,
    long long ws_k, long long bs) {
  const int row = blockIdx.y;
  if (row >= rows) return;
${expertOf}
  const bool valid = e >= 0 && e < (long long)E;
  const T* xr = x + (long long)row * xs;
${body}
${v.bias ? '  if (valid) acc += ld(bias[e * bs + n]);' : ''}
  out[(long long)row * N + n] = st(acc);
}
`;
  return { source, entry: GROUPED_GEMM_ENTRY, signature: GROUPED_GEMM_SIGNATURE };
}

export type Mxfp4GroupedGemmVariant = Omit<GroupedGemmVariant, 'layout'>;
export const MXFP4_GROUPED_GEMM_ENTRY = 'fk_mxfp4_grouped_gemm';
/** out, x, blocks, scales, route, bias; rows N K E; x row stride, bias row stride. */
export const MXFP4_GROUPED_GEMM_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i64', 'i64'];

export function mxfp4GroupedGemmSource(v: Mxfp4GroupedGemmVariant): GeneratedKernel {
  const source = `// mxfp4_grouped_gemm on CUDA cores (generated by grouped-gemm-source.ts): ${JSON.stringify(v)}
${prelude(v.dtype, v.index)}
${MXFP4_DEVICE_FUNCTIONS}

extern "C" __global__ void __launch_bounds__(${GROUPED_GEMM_THREADS}) ${MXFP4_GROUPED_GEMM_ENTRY}(
    T* __restrict__ out, const T* __restrict__ x, const unsigned char* __restrict__ blocks,
    const unsigned char* __restrict__ scales, const IDX* __restrict__ route, const T* __restrict__ bias, int rows, int N,
    int K, int E, long long xs, long long bs) {
  const int row = blockIdx.y;
  if (row >= rows) return;
${expertLookup(v.routing)}
  const bool valid = e >= 0 && e < (long long)E;
  const T* xr = x + (long long)row * xs;
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * ${groupedGemmColumnsPerCta('k-contiguous')} + (threadIdx.x >> 5);
  if (n >= N) return;
  float acc = 0.f;
  if (valid) {
    const int G = K >> 5;
    const long long rowBlocks = (e * (long long)N + n) * G;
    for (int g = lane; g < G; g += 32) {
      const uint4 raw = *reinterpret_cast<const uint4*>(blocks + (rowBlocks + g) * 16);
      const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
      const T* xg = xr + (long long)g * 32;
      float part = 0.f;
      #pragma unroll
      for (int i = 0; i < 16; i++) {
        const unsigned byte = (words[i >> 2] >> ((i & 3) * 8)) & 0xffu;
        part += fk_fp4_e2m1(byte & 15u) * ld(xg[2 * i]) + fk_fp4_e2m1(byte >> 4) * ld(xg[2 * i + 1]);
      }
      acc += part * fk_e8m0(scales[rowBlocks + g]);
    }
  }
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane != 0) return;
${v.bias ? '  if (valid) acc += ld(bias[e * bs + n]);' : ''}
  out[(long long)row * N + n] = st(acc);
}
`;
  return { source, entry: MXFP4_GROUPED_GEMM_ENTRY, signature: MXFP4_GROUPED_GEMM_SIGNATURE };
}
