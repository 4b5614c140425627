/** PyTorch broadcasting of shapes (right-aligned; each pair equal or one of them 1). */
import { formatShape, type Shape } from '../shape.js';
import { opError, type MetaArg, type TensorMeta } from './registry.js';

/** The broadcast shape of several shapes, or an OpError naming the op and the shapes. */
export function broadcastShapesOf(op: string, shapes: readonly Shape[], names?: readonly string[]): number[] {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (let i = 0; i < rank; i++) {
    for (let k = 0; k < shapes.length; k++) {
      const s = shapes[k]!;
      const d = s[s.length - rank + i] ?? 1;
      if (d === out[i]) continue;
      if (out[i] === 1) out[i] = d;
      else if (d !== 1) {
        const list = shapes.map((sh, j) => `${names?.[j] ?? `arg${j}`} ${formatShape(sh)}`).join(', ');
        opError(op, `shapes do not broadcast: ${list} (dim ${i - rank} is ${out[i]} vs ${d})`);
      }
    }
  }
  return out;
}

/** Broadcast the tensor arguments of a call (scalars and nulls take no part). */
export function broadcastArgs(op: string, args: readonly MetaArg[], names?: readonly string[]): number[] {
  const shapes: Shape[] = [];
  const ns: string[] = [];
  args.forEach((a, i) => {
    if (a !== null && typeof a === 'object') {
      shapes.push((a as TensorMeta).shape);
      ns.push(names?.[i] ?? `arg${i}`);
    }
  });
  return broadcastShapesOf(op, shapes, ns);
}

/** Strides that read a (shape, strides) layout as if expanded to `target` (0 on broadcast dims). */
export function broadcastStridesTo(op: string, shape: Shape, strides: readonly number[], target: Shape): number[] {
  const lead = target.length - shape.length;
  if (lead < 0) opError(op, `cannot broadcast ${formatShape(shape)} to ${formatShape(target)}`);
  return target.map((d, i) => {
    const j = i - lead;
    if (j < 0) return 0;
    if (shape[j] === d) return strides[j]!;
    if (shape[j] === 1) return 0;
    return opError(op, `cannot broadcast ${formatShape(shape)} to ${formatShape(target)}`);
  });
}
