/**
 * The parameter block native cudnnConv reads (layout: native/cudnn.cc), written into one reused Float64Array: the
 * first CUDNN_KEY_LEN entries are the plan key (the graph API's execution plan, or the legacy descriptors and
 * algorithm, are cached per key in the addon, which adds the pointers' alignment to it), the rest the pointers and the
 * stream of this call.
 */
import type { ConvFormat, ConvGeometry } from './plan.js';
import { strides5 } from './plan.js';
import type { ConvDType } from './implicit-gemm-source.js';

export const CUDNN_KEY_LEN = 44;
export const CUDNN_PARAM_COUNT = 50;
/** cudnnDataType_t values. */
export const CUDNN_DATA: Readonly<Record<ConvDType, number>> = { f32: 0, f16: 2, bf16: 9 };
/** Most workspace an algorithm may ask for; the heuristics' next choice is taken above it. */
export const CUDNN_WORKSPACE_LIMIT = 256 * 1024 * 1024;
/**
 * Which cuDNN API runs the conv: 'auto' the backend (graph) API, the legacy API where the graph API is missing or no
 * engine takes the shape; 'graph' / 'legacy' only that one (the other's refusal declines the call to the fallback).
 */
export type CudnnApi = 'auto' | 'graph' | 'legacy';
export const CUDNN_API: Readonly<Record<CudnnApi, number>> = { auto: 0, graph: 1, legacy: 2 };

export interface TensorView {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
}

const scratch = new Float64Array(5);

/** [n, c, (d), h, w] dims and strides of a tensor of the op's rank into p[dimAt..], p[strideAt..] (4 or 5 entries). */
function putTensor(p: Float64Array, dimAt: number, strideAt: number, g: ConvGeometry, channels: number, spatial: Int32Array, t: TensorView): void {
  strides5(scratch, 0, g.nd, g.batched, t.shape, t.strides);
  const nb = g.nd === 3 ? 5 : 4;
  p[dimAt] = g.N;
  p[dimAt + 1] = channels;
  p[strideAt] = scratch[0]!;
  p[strideAt + 1] = scratch[1]!;
  for (let i = 0; i < nb - 2; i++) {
    const s = 3 - (nb - 2) + i; // the last nb - 2 of (d, h, w)
    p[dimAt + 2 + i] = spatial[s]!;
    p[strideAt + 2 + i] = scratch[2 + s]!;
  }
}

/**
 * Fill the key part of `p` for a conv (mode 0: the forward convolution) or conv_transpose (mode 1: the backward-data
 * convolution with x as dy and y as dx). x, w and y must already be in `format` (w packed: KCRS or KRSC). The
 * pointers follow with setCudnnPointers. `search`: the key's engine (or legacy algorithm) is measured on its first
 * call (what torch.backends.cudnn.benchmark does) rather than taken from the heuristics; in a graph capture only for a key
 * measured before (cudnnPlanKey). `api`: which cuDNN API may run it.
 */
export function fillCudnnParams(
  p: Float64Array,
  g: ConvGeometry,
  format: ConvFormat,
  dtype: ConvDType,
  tensorOps: boolean,
  device: number,
  x: TensorView,
  y: TensorView,
  search = false,
  api: CudnnApi = 'auto',
): Float64Array {
  p.fill(0, 0, CUDNN_KEY_LEN);
  const nb = g.nd === 3 ? 5 : 4;
  p[0] = g.transposed ? 1 : 0;
  p[1] = nb;
  p[2] = CUDNN_DATA[dtype];
  p[3] = tensorOps ? 1 : 0;
  p[4] = g.G;
  p[5] = device;
  putTensor(p, 6, 11, g, g.C, g.in, x);
  // filter [out role, in role / G, *k]: forward [K, C / G, ...], transposed [C, K / G, ...]
  p[16] = g.transposed ? g.C : g.K;
  p[17] = g.transposed ? g.K / g.G : g.C / g.G;
  for (let i = 0; i < nb - 2; i++) p[18 + i] = g.k[3 - (nb - 2) + i]!;
  p[21] = format === 'channels_last' ? 1 : 0;
  putTensor(p, 22, 27, g, g.K, g.out, y);
  for (let i = 0; i < nb - 2; i++) {
    const s = 3 - (nb - 2) + i;
    p[32 + i] = g.pad[s]!;
    p[35 + i] = g.stride[s]!;
    p[38 + i] = g.dil[s]!;
  }
  p[41] = CUDNN_WORKSPACE_LIMIT;
  p[42] = search ? 1 : 0; // measure the candidates once instead of taking the heuristics' first
  p[43] = CUDNN_API[api];
  return p;
}

/** The call's device pointers, workspace and stream (p[44..50)). */
export function setCudnnPointers(p: Float64Array, x: number, w: number, y: number, workspace: number, workspaceBytes: number, stream: number): Float64Array {
  p[44] = x;
  p[45] = w;
  p[46] = y;
  p[47] = workspace;
  p[48] = workspaceBytes;
  p[49] = stream;
  return p;
}

/** The addon's alignment of a pointer in its plan key (native/cudnn.cc Alignment): the largest power of 2 up to 16 dividing it. */
function keyAlignment(ptr: number): number {
  let al = 1;
  while (al < 16 && ptr % (al * 2) === 0) al *= 2;
  return al;
}

/**
 * The addon's plan key of a filled parameter block (key entries and the x, w, y pointers' alignment), as a string: the
 * conv kernels remember the keys they ran with the search on outside a capture, so a graph capture of the same conv
 * asks for that key (already measured: the addon runs its measured plan, nothing is timed) rather than a key of its
 * own with the heuristics' plan; a key never measured keeps the search off in a capture (timing cannot run there).
 */
export function cudnnPlanKey(p: Float64Array): string {
  return `${Array.from(p.subarray(0, CUDNN_KEY_LEN)).join(',')}|${keyAlignment(p[44]!)},${keyAlignment(p[45]!)},${keyAlignment(p[46]!)}`;
}
