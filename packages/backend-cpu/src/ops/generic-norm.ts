/** The norm group of the op registry in float64 (statistics and results in float64, rounded once on store). */
import { finfoEps, numel, roundToDType, sigmoid, silu, type Backend, type OpCall, type OpKernelTable, type RmsNormAttrs, type Tensor } from '@fastkernels/core';
import { gather, gatherBroadcast, output } from '../strided.js';

const valuesOrNull = (t: Tensor | null | number, what: string) => (t === null || typeof t === 'number' ? null : gather(t, what));

/** Mean and biased variance of X[base + k * step] for k < n. */
function moments(X: Float64Array, base: number, n: number, step = 1): [number, number] {
  let s = 0;
  for (let k = 0; k < n; k++) s += X[base + k * step]!;
  const mean = s / n;
  let q = 0;
  for (let k = 0; k < n; k++) q += (X[base + k * step]! - mean) ** 2;
  return [mean, q / n];
}

/** Float64 LayerNorm of consecutive rows of K values (biased variance), times weight plus bias where given. */
function layerNormRows(X: Float64Array, W: Float64Array | null, B: Float64Array | null, K: number, eps: number): Float64Array {
  const Y = new Float64Array(X.length);
  for (let base = 0; K > 0 && base < X.length; base += K) {
    const [mean, v] = moments(X, base, K);
    const inv = 1 / Math.sqrt(v + eps);
    for (let k = 0; k < K; k++) Y[base + k] = (X[base + k]! - mean) * inv * (W ? W[k]! : 1) + (B ? B[k]! : 0);
  }
  return Y;
}

function layerNorm(backend: Backend) {
  return (call: OpCall<{ normalized_shape: number[]; eps: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const X = gather(x, 'layer_norm');
    const W = valuesOrNull(call.inputs[1]!, 'layer_norm weight');
    const B = valuesOrNull(call.inputs[2]!, 'layer_norm bias');
    return output(backend, x.shape, x.dtype, layerNormRows(X, W, B, numel(call.attrs.normalized_shape), call.attrs.eps), 'layer_norm');
  };
}

/** adaLN: layer_norm over the last dim (no affine), then * (scale_offset + scale) + shift, both broadcast to x. */
function layerNormModulate(backend: Backend) {
  return (call: OpCall<{ eps: number; scale_offset: number }>): Tensor => {
    const [x, scale, shift] = call.inputs as [Tensor, Tensor, Tensor];
    const X = gather(x, 'layer_norm_modulate');
    const SC = gatherBroadcast(scale, x.shape, 'layer_norm_modulate scale');
    const SH = gatherBroadcast(shift, x.shape, 'layer_norm_modulate shift');
    const K = x.shape[x.rank - 1]!;
    const Y = new Float64Array(X.length);
    for (let base = 0; K > 0 && base < X.length; base += K) {
      const [mean, v] = moments(X, base, K);
      const inv = 1 / Math.sqrt(v + call.attrs.eps);
      for (let k = 0; k < K; k++) Y[base + k] = (X[base + k]! - mean) * inv * (call.attrs.scale_offset + SC[base + k]!) + SH[base + k]!;
    }
    return output(backend, x.shape, x.dtype, Y, 'layer_norm_modulate');
  };
}

function groupNorm(backend: Backend) {
  return (call: OpCall<{ num_groups: number; eps: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const X = gather(x, 'group_norm');
    const W = valuesOrNull(call.inputs[1]!, 'group_norm weight');
    const B = valuesOrNull(call.inputs[2]!, 'group_norm bias');
    const [N, C] = x.shape as [number, number];
    const S = numel(x.shape.slice(2));
    const G = call.attrs.num_groups;
    const per = (C / G) * S; // a group's elements are contiguous in [N, C, S]
    const Y = new Float64Array(X.length);
    for (let n = 0; n < N; n++) {
      for (let g = 0; per > 0 && g < G; g++) {
        const base = (n * G + g) * per;
        const [mean, v] = moments(X, base, per);
        const inv = 1 / Math.sqrt(v + call.attrs.eps);
        for (let k = 0; k < per; k++) {
          const c = g * (C / G) + Math.floor(k / S);
          Y[base + k] = (X[base + k]! - mean) * inv * (W ? W[c]! : 1) + (B ? B[c]! : 0);
        }
      }
    }
    return output(backend, x.shape, x.dtype, Y, 'group_norm');
  };
}

function batchNorm(backend: Backend) {
  return (call: OpCall<{ eps: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const X = gather(x, 'batch_norm');
    const M = gather(call.inputs[1] as Tensor, 'batch_norm running_mean');
    const V = gather(call.inputs[2] as Tensor, 'batch_norm running_var');
    const W = valuesOrNull(call.inputs[3]!, 'batch_norm weight');
    const B = valuesOrNull(call.inputs[4]!, 'batch_norm bias');
    const C = x.shape[1]!;
    const S = numel(x.shape.slice(2));
    const Y = new Float64Array(X.length);
    for (let i = 0; i < X.length; i++) {
      const c = Math.floor(i / S) % C;
      Y[i] = ((X[i]! - M[c]!) / Math.sqrt(V[c]! + call.attrs.eps)) * (W ? W[c]! : 1) + (B ? B[c]! : 0);
    }
    return output(backend, x.shape, x.dtype, Y, 'batch_norm');
  };
}

/** RMS-normalise X in rows of K (sub-rows of `group` when set), optionally gated; W indexed by position in the row. */
function rmsRows(X: Float64Array, W: Float64Array | null, Z: Float64Array | null, K: number, a: Pick<RmsNormAttrs, 'weight_offset' | 'norm_before_gate' | 'group_size' | 'activation'>, eps: number): Float64Array {
  const act = a.activation === 'sigmoid' ? sigmoid : silu;
  const Y = new Float64Array(X.length);
  const G = a.group_size ?? K;
  const pre = Z && !a.norm_before_gate ? X.map((v, i) => v * act(Z[i]!)) : X;
  for (let base = 0; G > 0 && base < X.length; base += G) {
    let ss = 0;
    for (let k = 0; k < G; k++) ss += pre[base + k]! ** 2;
    const inv = 1 / Math.sqrt(ss / G + eps);
    for (let k = 0; k < G; k++) {
      const i = base + k;
      const w = W ? W[i % K]! + a.weight_offset : 1;
      Y[i] = pre[i]! * inv * w * (Z && a.norm_before_gate ? act(Z[i]!) : 1);
    }
  }
  return Y;
}

function rmsNorm(backend: Backend) {
  return (call: OpCall<RmsNormAttrs>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const a = call.attrs;
    const K = numel(a.normalized_shape ?? [x.shape[x.rank - 1]!]);
    const Y = rmsRows(gather(x, 'rms_norm'), valuesOrNull(call.inputs[1]!, 'rms_norm weight'), valuesOrNull(call.inputs[2]!, 'rms_norm z'), K, a, a.eps ?? finfoEps(x.dtype));
    return output(backend, x.shape, x.dtype, Y, 'rms_norm');
  };
}

/** vLLM's order: the sum is stored in the input dtype and the norm reads that stored value. */
function fusedAddRmsNorm(backend: Backend) {
  return (call: OpCall<{ eps: number; weight_offset: number }>): Tensor[] => {
    const [x, r, w] = call.inputs as [Tensor, Tensor, Tensor];
    const S = gather(x, 'fused_add_rms_norm input');
    const R = gather(r, 'fused_add_rms_norm residual');
    for (let i = 0; i < S.length; i++) S[i] = roundToDType(S[i]! + R[i]!, x.dtype);
    const opts = { weight_offset: call.attrs.weight_offset, norm_before_gate: false, group_size: null, activation: 'silu' as const };
    const Y = rmsRows(S, gather(w, 'fused_add_rms_norm weight'), null, x.shape[x.rank - 1]!, opts, call.attrs.eps);
    return [output(backend, x.shape, x.dtype, Y, 'fused_add_rms_norm'), output(backend, x.shape, x.dtype, S, 'fused_add_rms_norm')];
  };
}

/** layer_norm(input + residual): the sum rounded to the input dtype (as the unfused add stores it), then the norm. */
function addLayerNorm(backend: Backend) {
  return (call: OpCall<{ normalized_shape: number[]; eps: number }>): Tensor => {
    const [x, r] = call.inputs as [Tensor, Tensor];
    const S = gather(x, 'add_layer_norm input');
    const R = gather(r, 'add_layer_norm residual');
    for (let i = 0; i < S.length; i++) S[i] = roundToDType(S[i]! + R[i]!, x.dtype);
    const W = valuesOrNull(call.inputs[2]!, 'add_layer_norm weight');
    const B = valuesOrNull(call.inputs[3]!, 'add_layer_norm bias');
    return output(backend, x.shape, x.dtype, layerNormRows(S, W, B, numel(call.attrs.normalized_shape), call.attrs.eps), 'add_layer_norm');
  };
}

function normalize(backend: Backend) {
  return (call: OpCall<{ p: number; dim: number; eps: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const X = gather(x, 'normalize');
    const { p, eps } = call.attrs;
    const d = x.rank === 0 ? 0 : call.attrs.dim < 0 ? call.attrs.dim + x.rank : call.attrs.dim;
    const D = x.rank === 0 ? 1 : x.shape[d]!;
    const inner = numel(x.shape.slice(d + 1));
    const outer = D * inner === 0 ? 0 : X.length / (D * inner);
    const Y = new Float64Array(X.length);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const base = o * D * inner + i;
        let s = 0;
        for (let k = 0; k < D; k++) s += Math.abs(X[base + k * inner]!) ** p;
        const den = Math.max(s ** (1 / p), eps);
        for (let k = 0; k < D; k++) Y[base + k * inner] = X[base + k * inner]! / den;
      }
    }
    return output(backend, x.shape, x.dtype, Y, 'normalize');
  };
}

function l2Norm(backend: Backend) {
  return (call: OpCall<{ eps: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const X = gather(x, 'l2_norm');
    const K = x.shape[x.rank - 1]!;
    const Y = new Float64Array(X.length);
    for (let base = 0; K > 0 && base < X.length; base += K) {
      let ss = 0;
      for (let k = 0; k < K; k++) ss += X[base + k]! ** 2;
      const inv = 1 / Math.sqrt(ss + call.attrs.eps);
      for (let k = 0; k < K; k++) Y[base + k] = X[base + k]! * inv;
    }
    return output(backend, x.shape, x.dtype, Y, 'l2_norm');
  };
}

export function registerNormKernels(table: OpKernelTable, backend: Backend): void {
  table.register('layer_norm', layerNorm(backend));
  table.register('layer_norm_modulate', layerNormModulate(backend));
  table.register('group_norm', groupNorm(backend));
  table.register('batch_norm', batchNorm(backend));
  table.register('rms_norm', rmsNorm(backend));
  table.register('fused_add_rms_norm', fusedAddRmsNorm(backend));
  table.register('add_layer_norm', addLayerNorm(backend));
  table.register('normalize', normalize(backend));
  table.register('l2_norm', l2Norm(backend));
}
