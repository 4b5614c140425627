import { forEachOffset, formatShape, shapesEqual, type Backend, type Tensor } from '@fastkernels/core';
import { accessorOf, broadcastShapes, encoderFor, gather, gatherBroadcast, output, scatter } from '../strided.js';

export function fill(dst: Tensor, value: number): void {
  const acc = accessorOf(dst, 'fill');
  const v = encoderFor(dst.dtype)(value);
  forEachOffset(dst.shape, dst.strides, dst.offset, (off) => acc.set(off, v));
}

/** Strided copy with conversion; the source is gathered first, so overlapping views copy as if through a temporary. */
export function copy(dst: Tensor, src: Tensor): void {
  if (!shapesEqual(dst.shape, src.shape)) throw new RangeError(`copy: source ${formatShape(src.shape)} does not match destination ${formatShape(dst.shape)}`);
  scatter(dst, gather(src, 'copy src'), 'copy dst');
}

function binary(backend: Backend, a: Tensor, b: Tensor, what: string, f: (x: number, y: number) => number): Tensor {
  const shape = broadcastShapes(a.shape, b.shape, what);
  const x = gatherBroadcast(a, shape, what);
  const y = gatherBroadcast(b, shape, what);
  for (let i = 0; i < x.length; i++) x[i] = f(x[i]!, y[i]!);
  return output(backend, shape, a.dtype, x, what);
}

export function add(backend: Backend, a: Tensor, b: Tensor): Tensor {
  return binary(backend, a, b, 'add', (x, y) => x + y);
}

export function mul(backend: Backend, a: Tensor, b: Tensor): Tensor {
  return binary(backend, a, b, 'mul', (x, y) => x * y);
}
