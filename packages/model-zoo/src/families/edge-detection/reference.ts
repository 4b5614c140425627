/**
 * The float64 reference of YOLOv10 on host arrays, written from ultralytics' module definitions with plain loops (the
 * L1 references) and no registry op: parameters are read by their checkpoint paths under a prefix, BatchNorm is applied
 * unfused (eps 1e-3, as ultralytics' initialize_weights sets), so a fused module is checked against the unfused math.
 */
import { hostArray, type HostArray } from '@fastkernels/core';
import { sigmoid64 } from '../../tasks/L1/activation/sigmoid.js';
import { conv2dReference } from '../../tasks/L1/conv/conv2d.js';
import { maxPool2dReference } from '../../tasks/L1/conv/max_pool2d.js';
import { interpolateReference } from '../../tasks/L1/layout/interpolate.js';
import { batchNorm2dReference } from '../../tasks/L1/norm/batch_norm2d.js';
import { autopad } from './cases.js';
import { BACKBONE_OUTPUTS, DETECT_STRIDES, NECK_OUTPUTS, type LayerSpec } from './graph.js';

export type Params = ReadonlyMap<string, HostArray>;
export const BN_EPS = 1e-3;

const get = (P: Params, name: string): HostArray => {
  const t = P.get(name);
  if (!t) throw new Error(`reference: no parameter '${name}' (have ${[...P.keys()].slice(0, 8).join(', ')}, ...)`);
  return t;
};
const join = (prefix: string, name: string) => (prefix ? `${prefix}.${name}` : name);

export function add(a: HostArray, b: HostArray): HostArray {
  return hostArray(a.shape, a.data.map((v, i) => v + b.data[i]!));
}

const silu = (x: HostArray) => hostArray(x.shape, x.data.map((v) => v * sigmoid64(v)));

/** Concatenate [N, Ci, H, W] maps along channels. */
export function catChannels(xs: readonly HostArray[]): HostArray {
  const [N, , H, W] = xs[0]!.shape as [number, number, number, number];
  const C = xs.reduce((a, x) => a + x.shape[1]!, 0);
  const out = hostArray([N, C, H, W]);
  const plane = H * W;
  for (let n = 0; n < N; n++) {
    let c0 = 0;
    for (const x of xs) {
      const Ci = x.shape[1]!;
      out.data.set(x.data.subarray(n * Ci * plane, (n + 1) * Ci * plane), (n * C + c0) * plane);
      c0 += Ci;
    }
  }
  return out;
}

/** Channels [start, start + len) of a [N, C, ...] map. */
export function channels(x: HostArray, start: number, len: number): HostArray {
  const [N, C] = x.shape as [number, number];
  const plane = x.shape.slice(2).reduce((a, b) => a * b, 1);
  const out = hostArray([N, len, ...x.shape.slice(2)]);
  for (let n = 0; n < N; n++) out.data.set(x.data.subarray((n * C + start) * plane, (n * C + start + len) * plane), n * len * plane);
  return out;
}

/** ultralytics Conv: act(bn(conv(x))) with a bias-free k x k conv, autopad, groups g; act SiLU or none. */
export function refConv(x: HostArray, P: Params, prefix: string, k: number, s = 1, g = 1, act = true, p: number | null = null): HostArray {
  const y = conv2dReference(x, get(P, join(prefix, 'conv.weight')), null, s, autopad(k, p), 1, g);
  const b = batchNorm2dReference(y, get(P, join(prefix, 'bn.running_mean')), get(P, join(prefix, 'bn.running_var')), get(P, join(prefix, 'bn.weight')), get(P, join(prefix, 'bn.bias')), BN_EPS);
  return act ? silu(b) : b;
}

/** Bottleneck(c1, c2, shortcut, g, k, e): cv2(cv1(x)), plus x when shortcut and c1 == c2. */
export function refBottleneck(x: HostArray, P: Params, prefix: string, c2: number, shortcut: boolean, g = 1, k: readonly [number, number] = [3, 3]): HostArray {
  const y = refConv(refConv(x, P, join(prefix, 'cv1'), k[0]), P, join(prefix, 'cv2'), k[1], 1, g);
  return shortcut && x.shape[1] === c2 ? add(x, y) : y;
}

/** RepVGGDW(ed): SiLU(dw7x7-bn(x) + dw3x3-bn(x)). */
export function refRepVGGDW(x: HostArray, P: Params, prefix: string): HostArray {
  const ed = x.shape[1]!;
  return silu(add(refConv(x, P, join(prefix, 'conv'), 7, 1, ed, false, 3), refConv(x, P, join(prefix, 'conv1'), 3, 1, ed, false, 1)));
}

/** CIB(c1, c2, shortcut, e, lk): dw3x3, 1x1 to 2c_, RepVGGDW or dw3x3, 1x1 to c2, dw3x3; plus x when it can. */
export function refCIB(x: HostArray, P: Params, prefix: string, c2: number, shortcut: boolean, e: number, lk: boolean): HostArray {
  const c1 = x.shape[1]!;
  const c_ = Math.trunc(c2 * e);
  const at = (i: number) => join(prefix, `cv1.${i}`);
  let y = refConv(x, P, at(0), 3, 1, c1);
  y = refConv(y, P, at(1), 1);
  y = lk ? refRepVGGDW(y, P, at(2)) : refConv(y, P, at(2), 3, 1, 2 * c_);
  y = refConv(y, P, at(3), 1);
  y = refConv(y, P, at(4), 3, 1, c2);
  return shortcut && c1 === c2 ? add(x, y) : y;
}

/** C2f / C2fCIB: cv1 to 2c, split, n blocks chained on the last chunk, cat everything, cv2. */
export function refC2f(x: HostArray, P: Params, prefix: string, c2: number, n: number, shortcut: boolean, e = 0.5, cib: { lk: boolean } | null = null): HostArray {
  const c = Math.trunc(c2 * e);
  const y0 = refConv(x, P, join(prefix, 'cv1'), 1);
  const ys = [channels(y0, 0, c), channels(y0, c, c)];
  for (let i = 0; i < n; i++) {
    const at = join(prefix, `m.${i}`);
    ys.push(cib ? refCIB(ys[ys.length - 1]!, P, at, c, shortcut, 1, cib.lk) : refBottleneck(ys[ys.length - 1]!, P, at, c, shortcut, 1, [3, 3]));
  }
  return refConv(catChannels(ys), P, join(prefix, 'cv2'), 1);
}

/** SCDown(c1, c2, k, s): pointwise conv, then a depthwise k x k stride-s conv without activation. */
export function refSCDown(x: HostArray, P: Params, prefix: string, c2: number, k: number, s: number): HostArray {
  return refConv(refConv(x, P, join(prefix, 'cv1'), 1), P, join(prefix, 'cv2'), k, s, c2, false);
}

/** SPPF(c1, c2, k): cv1 to c1 / 2, three chained k x k max pools (stride 1, padding k / 2), cat the four, cv2. */
export function refSPPF(x: HostArray, P: Params, prefix: string, k: number): HostArray {
  const ys = [refConv(x, P, join(prefix, 'cv1'), 1)];
  for (let i = 0; i < 3; i++) ys.push(maxPool2dReference(ys[i]!, k, 1, Math.floor(k / 2)));
  return refConv(catChannels(ys), P, join(prefix, 'cv2'), 1);
}

/**
 * Attention(dim, num_heads, attn_ratio): qkv 1x1 conv, per head [q (key_dim), k (key_dim), v (head_dim)] channels over
 * N = H * W positions; softmax(q^T k * key_dim^-0.5) over keys; v attn^T, plus a depthwise 3x3 positional conv of v; proj.
 */
export function refAttention(x: HostArray, P: Params, prefix: string, numHeads: number, attnRatio = 0.5): HostArray {
  const [B, C, H, W] = x.shape as [number, number, number, number];
  const N = H * W;
  const hd = Math.floor(C / numHeads);
  const kd = Math.trunc(hd * attnRatio);
  const scale = kd ** -0.5;
  const qkv = refConv(x, P, join(prefix, 'qkv'), 1, 1, 1, false);
  const per = 2 * kd + hd;
  const Cq = qkv.shape[1]!;
  const out = hostArray([B, C, H, W]);
  const v = hostArray([B, C, H, W]);
  const logits = new Float64Array(N);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < numHeads; h++) {
      const ch = (c: number) => (b * Cq + h * per + c) * N;
      for (let c = 0; c < hd; c++) v.data.set(qkv.data.subarray(ch(2 * kd + c), ch(2 * kd + c) + N), (b * C + h * hd + c) * N);
      for (let i = 0; i < N; i++) {
        let max = -Infinity;
        for (let j = 0; j < N; j++) {
          let dot = 0;
          for (let c = 0; c < kd; c++) dot += qkv.data[ch(c) + i]! * qkv.data[ch(kd + c) + j]!;
          logits[j] = dot * scale;
          max = Math.max(max, logits[j]!);
        }
        let sum = 0;
        for (let j = 0; j < N; j++) sum += (logits[j] = Math.exp(logits[j]! - max));
        for (let c = 0; c < hd; c++) {
          let acc = 0;
          for (let j = 0; j < N; j++) acc += qkv.data[ch(2 * kd + c) + j]! * logits[j]!;
          out.data[(b * C + h * hd + c) * N + i] = acc / sum;
        }
      }
    }
  }
  const pe = refConv(v, P, join(prefix, 'pe'), 3, 1, C, false);
  return refConv(add(out, pe), P, join(prefix, 'proj'), 1, 1, 1, false);
}

/** PSA(c1, c2, e): cv1 to 2c, split (a, b); b += attn(b); b += ffn(b) (1x1 to 2c, 1x1 back, no act); cv2(cat(a, b)). */
export function refPSA(x: HostArray, P: Params, prefix: string, e = 0.5): HostArray {
  const c = Math.trunc(x.shape[1]! * e);
  const y = refConv(x, P, join(prefix, 'cv1'), 1);
  const a = channels(y, 0, c);
  let b = channels(y, c, c);
  b = add(b, refAttention(b, P, join(prefix, 'attn'), Math.floor(c / 64), 0.5));
  b = add(b, refConv(refConv(b, P, join(prefix, 'ffn.0'), 1), P, join(prefix, 'ffn.1'), 1, 1, 1, false));
  return refConv(catChannels([a, b]), P, join(prefix, 'cv2'), 1);
}

/** DFL(c1): per box side, the expectation of arange(c1) under softmax of its c1 logits: [B, 4 * c1, A] -> [B, 4, A]. */
export function refDFL(x: HostArray, c1 = 16): HostArray {
  const [B, , A] = x.shape as [number, number, number];
  const out = hostArray([B, 4, A]);
  for (let b = 0; b < B; b++) {
    for (let s = 0; s < 4; s++) {
      for (let a = 0; a < A; a++) {
        const at = (i: number) => x.data[(b * 4 * c1 + s * c1 + i) * A + a]!;
        let max = -Infinity;
        for (let i = 0; i < c1; i++) max = Math.max(max, at(i));
        let sum = 0;
        let acc = 0;
        for (let i = 0; i < c1; i++) {
          const e = Math.exp(at(i) - max);
          sum += e;
          acc += i * e;
        }
        out.data[(b * 4 + s) * A + a] = acc / sum;
      }
    }
  }
  return out;
}

/** One graph layer of the backbone / neck on its inputs (the layer's parameters under `prefix`). */
export function refLayer(spec: LayerSpec, xs: readonly HostArray[], P: Params, prefix: string): HostArray {
  const a = spec.args as number[];
  const x = xs[0]!;
  switch (spec.module) {
    case 'Conv':
      return refConv(x, P, prefix, a[2]!, a[3] ?? 1);
    case 'C2f':
      return refC2f(x, P, prefix, a[1]!, a[2]!, Boolean(spec.args[3] ?? false));
    case 'C2fCIB':
      return refC2f(x, P, prefix, a[1]!, a[2]!, Boolean(spec.args[3] ?? false), 0.5, { lk: Boolean(spec.args[4] ?? false) });
    case 'SCDown':
      return refSCDown(x, P, prefix, a[1]!, a[2]!, a[3]!);
    case 'SPPF':
      return refSPPF(x, P, prefix, a[2] ?? 5);
    case 'PSA':
      return refPSA(x, P, prefix);
    case 'Upsample':
      return interpolateReference(x, x.shape[2]! * 2, x.shape[3]! * 2, 'nearest', 2);
    case 'Concat':
      return catChannels(xs);
    default:
      throw new Error(`refLayer: ${spec.module} is not a backbone / neck layer`);
  }
}

/** Run graph layers [first, last] with parameters at `prefix.<index>`, given the outputs of earlier layers. */
export function refLayers(specs: readonly LayerSpec[], first: number, last: number, given: Map<number, HostArray>, P: Params, prefix: string): Map<number, HostArray> {
  const out = new Map(given);
  for (let i = first; i <= last; i++) {
    const s = specs[i]!;
    out.set(i, refLayer(s, s.from.map((f) => out.get(f)!), P, join(prefix, String(i))));
  }
  return out;
}

/** The backbone (layers 0-10) on images: [P3, P4, P5]. */
export function refBackbone(specs: readonly LayerSpec[], images: HostArray, P: Params, prefix = ''): HostArray[] {
  const r = refLayers(specs, 1, 10, new Map([[0, refLayer(specs[0]!, [images], P, join(prefix, '0'))]]), P, prefix);
  return BACKBONE_OUTPUTS.map((i) => r.get(i)!);
}

/** The neck (layers 11-22) on [P3, P4, P5]: the head's three inputs. */
export function refNeck(specs: readonly LayerSpec[], feats: readonly HostArray[], P: Params, prefix = ''): HostArray[] {
  const given = new Map(BACKBONE_OUTPUTS.map((i, k) => [i, feats[k]!] as const));
  const r = refLayers(specs, 11, 22, given, P, prefix);
  return NECK_OUTPUTS.map((i) => r.get(i)!);
}

/** A plain 1x1 nn.Conv2d with bias. */
const conv1x1 = (x: HostArray, P: Params, prefix: string) => conv2dReference(x, get(P, join(prefix, 'weight')), get(P, join(prefix, 'bias')), 1, 0);

/** Flatten [B, C, H, W] to [B, C, H * W] (same data). */
const flat = (x: HostArray) => hostArray([x.shape[0]!, x.shape[1]!, x.shape[2]! * x.shape[3]!], x.data);

/** Concatenate [B, C, Ai] along the last dim. */
function catLast(xs: readonly HostArray[]): HostArray {
  const [B, C] = xs[0]!.shape as [number, number];
  const A = xs.reduce((a, x) => a + x.shape[2]!, 0);
  const out = hostArray([B, C, A]);
  for (let bc = 0; bc < B * C; bc++) {
    let a0 = 0;
    for (const x of xs) {
      const Ai = x.shape[2]!;
      out.data.set(x.data.subarray(bc * Ai, (bc + 1) * Ai), bc * A + a0);
      a0 += Ai;
    }
  }
  return out;
}

/**
 * v10Detect's inference (one2one branch): per level a box branch (Conv 3x3, Conv 3x3, 1x1 to 4 * 16) and a light class
 * branch (dw3x3, 1x1, dw3x3, 1x1, 1x1 to nc); DFL to distances, dist2bbox around the anchor centres (x + 0.5, y + 0.5)
 * as x1y1x2y2 times the stride, sigmoid class scores: [B, 4 + nc, A].
 */
export function refHead(feats: readonly HostArray[], P: Params, nc: number, prefix = '', regMax = 16): HostArray {
  const boxes: HostArray[] = [];
  const scores: HostArray[] = [];
  feats.forEach((x, i) => {
    const c = x.shape[1]!;
    const b = join(prefix, `one2one_cv2.${i}`);
    boxes.push(flat(conv1x1(refConv(refConv(x, P, `${b}.0`, 3), P, `${b}.1`, 3), P, `${b}.2`)));
    const s = join(prefix, `one2one_cv3.${i}`);
    let y = refConv(x, P, `${s}.0.0`, 3, 1, c);
    y = refConv(y, P, `${s}.0.1`, 1);
    const c3 = y.shape[1]!;
    y = refConv(refConv(y, P, `${s}.1.0`, 3, 1, c3), P, `${s}.1.1`, 1);
    scores.push(flat(conv1x1(y, P, `${s}.2`)));
  });
  const dist = refDFL(catLast(boxes), regMax);
  const cls = catLast(scores);
  const [B, , A] = dist.shape as [number, number, number];
  const out = hostArray([B, 4 + nc, A]);
  let a0 = 0;
  feats.forEach((x, l) => {
    const [H, W] = [x.shape[2]!, x.shape[3]!];
    const stride = DETECT_STRIDES[l]!;
    for (let yy = 0; yy < H; yy++) {
      for (let xx = 0; xx < W; xx++) {
        const a = a0 + yy * W + xx;
        const [ax, ay] = [xx + 0.5, yy + 0.5];
        for (let b = 0; b < B; b++) {
          const d = (s: number) => dist.data[(b * 4 + s) * A + a]!;
          const o = (r: number) => (b * (4 + nc) + r) * A + a;
          out.data[o(0)] = (ax - d(0)) * stride;
          out.data[o(1)] = (ay - d(1)) * stride;
          out.data[o(2)] = (ax + d(2)) * stride;
          out.data[o(3)] = (ay + d(3)) * stride;
          for (let k = 0; k < nc; k++) out.data[o(4 + k)] = sigmoid64(cls.data[(b * nc + k) * A + a]!);
        }
      }
    }
    a0 += H * W;
  });
  return out;
}

/** The whole model (parameters in ultralytics' names, model.<i>.*): images [B, 3, S, S] -> [B, 4 + nc, A]. */
export function refYOLOv10(specs: readonly LayerSpec[], images: HostArray, P: Params, nc: number): HostArray {
  const feats = refBackbone(specs, images, P, 'model');
  return refHead(refNeck(specs, feats, P, 'model'), P, nc, 'model.23');
}

export interface RefDetections {
  readonly boxes: Float64Array; // [B, K, 4]
  readonly scores: Float64Array; // [B, K]
  readonly classes: Int32Array; // [B, K]
  readonly K: number;
}

/**
 * ultralytics v10postprocess on [B, 4 + nc, A]: the top K = min(max_det, A) anchors by their best class score, then
 * the top K (anchor, class) pairs among those anchors' scores; ties keep the lower index (a stable sort).
 */
export function refPostprocess(preds: HostArray, nc: number, maxDet: number): RefDetections {
  const [B, , A] = preds.shape as [number, number, number];
  const K = Math.min(maxDet, A);
  const boxes = new Float64Array(B * K * 4);
  const scores = new Float64Array(B * K);
  const classes = new Int32Array(B * K);
  const at = (b: number, r: number, a: number) => preds.data[(b * (4 + nc) + r) * A + a]!;
  const topk = (vals: number[], k: number) => vals.map((v, i) => [v, i] as const).sort((p, q) => q[0] - p[0] || p[1] - q[1]).slice(0, k).map((p) => p[1]);
  for (let b = 0; b < B; b++) {
    const best = Array.from({ length: A }, (_, a) => Math.max(...Array.from({ length: nc }, (_, c) => at(b, 4 + c, a))));
    const anchors = topk(best, K);
    const pairs = anchors.flatMap((a) => Array.from({ length: nc }, (_, c) => at(b, 4 + c, a)));
    topk(pairs, K).forEach((flatIdx, k) => {
      const a = anchors[Math.floor(flatIdx / nc)]!;
      for (let r = 0; r < 4; r++) boxes[(b * K + k) * 4 + r] = at(b, r, a);
      scores[b * K + k] = pairs[flatIdx]!;
      classes[b * K + k] = flatIdx % nc;
    });
  }
  return { boxes, scores, classes, K };
}
