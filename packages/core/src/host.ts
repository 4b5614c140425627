import type { HostArray } from './task.js';
import { numel, type Shape } from './shape.js';
import type { Tensor } from './tensor.js';

/** Host float64 arrays for references and tests. */
export function hostArray(shape: Shape, data?: ArrayLike<number>): HostArray {
  const n = numel(shape);
  const d = data ? Float64Array.from(data) : new Float64Array(n);
  if (d.length !== n) throw new RangeError(`hostArray: ${d.length} values for ${n} elements`);
  return { shape: [...shape], data: d };
}

export function toHostArray(t: Tensor): HostArray {
  return { shape: [...t.shape], data: t.toFloat64Array() };
}
