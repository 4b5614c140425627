/**
 * How an op along one dim (argmax, cumsum, sort, topk) sees its input: lines of D elements, the line index split into
 * (outer, inner) around the dim, each part one stride. Pure and CPU-tested. A layout whose outer or inner dims do not
 * merge into one stride (a permuted 4-D tensor, say) gives null: the caller copies it contiguous first. The kernels
 * write their outputs contiguous as [outer, D', inner].
 */
import { coalesce } from '../../strided.js';

export interface Lines {
  readonly outer: number;
  readonly D: number;
  readonly inner: number;
  /** Element strides of the outer part, along the dim, of the inner part. */
  readonly sO: number;
  readonly sD: number;
  readonly sI: number;
}

/** dim: normalised (0 <= dim < rank), ignored for a 0-d tensor (one line of one element). */
export function planLines(shape: readonly number[], strides: readonly number[], dim: number): Lines | null {
  if (shape.length === 0) return { outer: 1, D: 1, inner: 1, sO: 0, sD: 0, sI: 0 };
  const o = coalesce(shape.slice(0, dim), [strides.slice(0, dim)]);
  const i = coalesce(shape.slice(dim + 1), [strides.slice(dim + 1)]);
  if (o.shape.length !== 1 || i.shape.length !== 1) return null;
  return { outer: o.shape[0]!, D: shape[dim]!, inner: i.shape[0]!, sO: o.strides[0]![0]!, sD: strides[dim]!, sI: i.strides[0]![0]! };
}

/** The lines of a contiguous tensor of `shape` along `dim`. */
export function contiguousLines(shape: readonly number[], dim: number): Lines {
  if (shape.length === 0) return { outer: 1, D: 1, inner: 1, sO: 0, sD: 0, sI: 0 };
  const outer = shape.slice(0, dim).reduce((a, b) => a * b, 1);
  const inner = shape.slice(dim + 1).reduce((a, b) => a * b, 1);
  const D = shape[dim]!;
  return { outer, D, inner, sO: D * inner, sD: inner, sI: 1 };
}

/**
 * Threads a line: 1 (a thread a line, consecutive threads on consecutive inner elements: coalesced where the inner
 * stride is 1 and there are enough lines to fill the device), 32 (a warp a line) or a whole block for long lines.
 */
export function lineThreads(l: Lines, sms: number): { tpr: number; block: number; grid: number } {
  const lines = l.outer * l.inner;
  if (l.inner > 1 && l.sI === 1 && lines >= sms * 128) return { tpr: 1, block: 256, grid: Math.max(1, Math.min(Math.ceil(lines / 256), sms * 32)) };
  const tpr = l.D <= 1024 ? 32 : Math.min(1024, Math.ceil(l.D / 4 / 32) * 32);
  const block = tpr === 32 ? 256 : tpr;
  return { tpr, block, grid: Math.max(1, Math.min(Math.ceil(lines / (block / tpr)), sms * 64)) };
}
