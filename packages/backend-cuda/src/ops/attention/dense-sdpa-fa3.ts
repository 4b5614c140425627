/**
 * scaled_dot_product_attention on [..., H, L, D] straight on the FA3 kernel (prefill-fa3.ts), with no layout copy:
 * q / k / v are read in place through tensor maps over [rows, heads, D] views of their [heads, rows, D] storage (row
 * stride D, head stride S D for a contiguous [B, H, S, D]: the TMA takes any 16-byte strides, in either order), and the
 * kernel writes the output's [H, L, D] in place through its row and head strides. One sequence (cu_seqlens [0, L] and
 * [0, S], written by fills: nothing uploaded, so a graph capture may hold the call).
 *
 * Batch: where every tensor's batch stride is its heads times its head stride (a contiguous [B, H, S, D], or B = 1), the
 * batch entries are more heads of one launch (B H query heads over B Hkv key heads: query head b H + h reads key head
 * (b H + h) / group = b Hkv + h / group, its own entry's); otherwise one launch per batch entry. Pure planning here
 * (sdpaFa3Launches, unit-tested without a GPU), the launches in runSdpaOnFa3.
 */
import { Tensor } from '@fastkernels/core';
import type { SpineContext } from '../launch/context.js';
import { ptr } from '../launch/common.js';
import { operandStrides } from './layout.js';
import { fa3Route, launchPrefillFa3, type Fa3Maps, type Fa3Operand, type Fa3Output } from './prefill-fa3.js';

/** A tensor as [batch, heads, rows, D] (D contiguous): its first element's byte address and element strides. */
export interface BhsdView {
  readonly address: number;
  readonly batch: number;
  readonly heads: number;
  readonly rows: number;
  readonly batchStride: number;
  readonly headStride: number;
  readonly rowStride: number;
}

/** One FA3 launch of a dense SDPA call: its operands, output, query heads and GQA group. */
export interface SdpaFa3Launch {
  readonly q: Fa3Operand;
  readonly k: Fa3Operand;
  readonly v: Fa3Operand;
  readonly out: Fa3Output;
  readonly outRowStride: number;
  readonly outHeadStride: number;
  readonly qHeads: number;
  readonly group: number;
}

/**
 * The launches of a call: one over B H heads where every view's batch collapses into its heads, else one per batch
 * entry. A dim of one element gets a stride the TMA accepts and never steps (its view's may be 0 or anything).
 */
export function sdpaFa3Launches(q: BhsdView, k: BhsdView, v: BhsdView, out: BhsdView, D: number, itemsize: number): SdpaFa3Launch[] {
  const B = q.batch;
  const rowStride = (t: BhsdView) => (t.rows > 1 ? t.rowStride : D);
  const headStride = (t: BhsdView) => (t.heads > 1 ? t.headStride : t.rows * D);
  // the stride between consecutive heads of the batch-major head list, or null where the batch does not collapse
  const collapsedHeadStride = (t: BhsdView): number | null => {
    if (B === 1) return headStride(t);
    if (t.heads === 1) return t.batchStride;
    return t.batchStride === t.heads * t.headStride ? t.headStride : null;
  };
  const operand = (t: BhsdView, address: number, heads: number, hs: number): Fa3Operand => ({
    address, rows: t.rows, heads, rowStrideBytes: rowStride(t) * itemsize, headStrideBytes: (heads > 1 ? hs : t.rows * D) * itemsize,
  });
  const output = (address: number, heads: number, hs: number) => {
    const rs = rowStride(out);
    const h = heads > 1 ? hs : out.rows * D;
    return { out: { address, rowStrideBytes: rs * itemsize, headStrideBytes: h * itemsize }, outRowStride: rs, outHeadStride: h };
  };
  const group = q.heads / k.heads;
  const all = [q, k, v, out].map(collapsedHeadStride);
  if (all.every((s) => s !== null)) {
    const [qs, ks, vs, os] = all as number[];
    return [{
      q: operand(q, q.address, B * q.heads, qs!), k: operand(k, k.address, B * k.heads, ks!), v: operand(v, v.address, B * v.heads, vs!),
      ...output(out.address, B * out.heads, os!), qHeads: B * q.heads, group,
    }];
  }
  return Array.from({ length: B }, (_, b) => {
    const at = (t: BhsdView) => t.address + b * t.batchStride * itemsize;
    return {
      q: operand(q, at(q), q.heads, headStride(q)), k: operand(k, at(k), k.heads, headStride(k)), v: operand(v, at(v), v.heads, headStride(v)),
      ...output(at(out), out.heads, headStride(out)), qHeads: q.heads, group,
    };
  });
}

/** t (shape [...outer, heads, rows, D]) as a BhsdView, or null where its leading dims do not collapse to one batch stride. */
export function bhsdView(t: Tensor, outer: readonly number[], heads: number, rows: number, D: number): BhsdView | null {
  if (D > 1 && t.strides[t.rank - 1] !== 1) return null;
  const s = operandStrides(t.shape, t.strides, outer, heads, rows, D);
  if (!s) return null;
  return { address: ptr(t), batch: outer.reduce((a, d) => a * d, 1), heads, rows, batchStride: s.batch, headStride: s.head, rowStride: s.row };
}

export interface SdpaFa3Call {
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  /** A fresh contiguous [...outer, H, L, D] output. */
  readonly out: Tensor;
  readonly outer: readonly number[];
  readonly heads: number;
  readonly kvHeads: number;
  readonly L: number;
  readonly S: number;
  readonly D: number;
  readonly causal: boolean;
  readonly scale: number;
}

/**
 * Run the call on the FA3 kernel in place: null when it ran, else why not (nothing launched then; the caller takes the
 * route before: the varlen prefill op and a copy). Every launch's route is decided before the first one runs.
 */
export function runSdpaOnFa3(ctx: SpineContext | undefined, c: SdpaFa3Call): string | null {
  if (!ctx) return `backend '${c.q.backend.name}' has no CUDA spine context`;
  if (c.q.dtype !== 'bf16' && c.q.dtype !== 'f16') return `dtype ${c.q.dtype}: the FA3 kernel takes bf16 / f16`;
  const views = [
    bhsdView(c.q, c.outer, c.heads, c.L, c.D), bhsdView(c.k, c.outer, c.kvHeads, c.S, c.D), bhsdView(c.v, c.outer, c.kvHeads, c.S, c.D),
    bhsdView(c.out, c.outer, c.heads, c.L, c.D),
  ];
  if (views.some((x) => x === null)) return 'q, k, v or the output: batch dims that do not collapse, or a non-contiguous head dim';
  const [q, k, v, out] = views as BhsdView[];
  const launches = sdpaFa3Launches(q!, k!, v!, out!, c.D, c.q.itemsize);
  const maps: Fa3Maps[] = [];
  for (const l of launches) {
    const r = fa3Route(ctx, c.q.dtype, c.D, l, c.L, 1);
    if (!r.take) return r.reason;
    maps.push(r.maps);
  }
  const temps: Tensor[] = [];
  try {
    const cu = (n: number) => {
      const t = Tensor.empty(c.q.backend, [2], 'i32', { device: c.q.device });
      temps.push(t);
      t.fill_(0);
      const last = t.narrow(0, 1, 1);
      temps.push(last);
      last.fill_(n);
      return t;
    };
    const cuQ = cu(c.L);
    const cuK = c.S === c.L ? cuQ : cu(c.S);
    launches.forEach((l, i) => {
      launchPrefillFa3(ctx, {
        out: l.out.address, maps: maps[i]!, dtype: c.q.dtype as 'bf16' | 'f16', headDim: c.D, cuQ, cuK, sinks: null, numSeqs: 1, totalQ: c.L,
        qHeads: l.qHeads, group: l.group, causal: c.causal, window: 0, scaleLog2: c.scale * Math.LOG2E, outRowStride: l.outRowStride, outHeadStride: l.outHeadStride,
      });
    });
  } finally {
    for (const t of temps.reverse()) t.dispose();
  }
  return null;
}
