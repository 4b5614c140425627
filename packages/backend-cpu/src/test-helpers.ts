/** Shared test utilities (excluded from the build). */
import { Rng, Tensor, type DType, type Shape } from '@fastkernels/core';
import { expect } from 'vitest';
import { CpuBackend } from './backend.js';

/** Every allocation without its own poison is 0xff (NaN for floats), so unwritten outputs show. */
export const cpu = new CpuBackend({ defaultPoison: 0xff });

export function tensor(data: ArrayLike<number>, shape: Shape, dtype: DType = 'f32'): Tensor {
  return Tensor.fromArray(cpu, data, shape, dtype);
}

export function randn(rng: Rng, shape: Shape, dtype: DType = 'f32', scale = 1): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return tensor(rng.fillNormal(n, scale), shape, dtype);
}

export function values(t: Tensor): number[] {
  return Array.from(t.toFloat64Array());
}

export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, atol = 1e-6, rtol = 1e-6): void {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (!(Math.abs(a - e) <= atol + rtol * Math.abs(e))) throw new Error(`element ${i}: got ${a}, expected ${e} (of ${Array.from(actual).slice(0, 12).join(', ')})`);
  }
}

export type Layout = 'transposed' | 'stepped' | 'narrowed';
export const LAYOUTS: readonly Layout[] = ['transposed', 'stepped', 'narrowed'];

/**
 * The same values as `t` in a non-contiguous layout over a bigger, NaN-poisoned storage:
 * 'transposed' stores the dims reversed (a permuted view), 'stepped' interleaves the last dim
 * with junk (slice with step 2, odd offset), 'narrowed' pads the first dim on both sides.
 */
export function relayout(t: Tensor, layout: Layout): Tensor {
  const shape = [...t.shape];
  let base: Tensor;
  let view: Tensor;
  if (layout === 'transposed' && t.rank >= 2) {
    const perm = shape.map((_, i) => t.rank - 1 - i);
    base = Tensor.empty(cpu, perm.map((d) => shape[d]!), t.dtype, { poison: 0xff });
    view = base.permute(perm);
  } else if (layout === 'narrowed' && t.rank >= 1) {
    base = Tensor.empty(cpu, [shape[0]! + 3, ...shape.slice(1)], t.dtype, { poison: 0xff });
    view = base.narrow(0, 2, shape[0]!);
  } else {
    const last = shape[shape.length - 1] ?? 1;
    base = Tensor.empty(cpu, [...shape.slice(0, -1), 2 * last + 1], t.dtype, { poison: 0xff });
    view = base.slice(-1, 1, undefined, 2);
  }
  base.dispose();
  view.copy_(t);
  return view;
}

export { Rng, Tensor };
