import { formatShape, type Backend, type Tensor } from '@fastkernels/core';
import { expectFloat, expectRank, gather, gatherInts, output } from '../strided.js';

/**
 * vLLM RotaryEmbedding.forward_native. positions are flattened to T tokens; query/key are viewed as
 * [T, heads, headSize] (any shape with that many elements) and keep their shape. cosSinCache
 * [maxPos, rotaryDim] holds cos in its first rotaryDim/2 columns and sin in the rest; it is read at
 * its own dtype (pass a cache already rounded to the activation dtype to mimic vLLM's cast).
 * Neox style rotates pairs (i, i + rotaryDim/2), GPT-J style pairs (2i, 2i + 1); the tail of each head
 * beyond rotaryDim passes through unchanged.
 */
export function rotaryEmbedding(
  backend: Backend,
  positions: Tensor,
  query: Tensor,
  key: Tensor | null,
  cosSinCache: Tensor,
  headSize: number,
  isNeoxStyle: boolean,
): [Tensor, Tensor | null] {
  expectRank(cosSinCache, 2, 'rotaryEmbedding', 'cosSinCache [maxPos, rotaryDim]');
  const [maxPos, rotaryDim] = cosSinCache.shape as [number, number];
  if (!Number.isInteger(headSize) || headSize <= 0) throw new RangeError(`rotaryEmbedding: invalid headSize ${headSize}`);
  if (rotaryDim % 2 !== 0 || rotaryDim > headSize) throw new RangeError(`rotaryEmbedding: rotaryDim ${rotaryDim} must be even and <= headSize ${headSize}`);
  const pos = gatherInts(positions, 'rotaryEmbedding positions');
  const T = pos.length;
  for (let t = 0; t < T; t++) {
    if (pos[t]! < 0 || pos[t]! >= maxPos) throw new RangeError(`rotaryEmbedding: position ${pos[t]} (token ${t}) out of range for a cache of ${maxPos} positions`);
  }
  const cache = gather(cosSinCache, 'rotaryEmbedding cosSinCache');
  const half = rotaryDim / 2;

  const rotate = (x: Tensor, name: string): Tensor => {
    expectFloat(x, 'rotaryEmbedding', name);
    const perToken = T === 0 ? 0 : x.numel / T;
    if (x.rank < 1 || (T === 0 && x.numel !== 0) || !Number.isInteger(perToken) || perToken % headSize !== 0) {
      throw new RangeError(`rotaryEmbedding: ${name} ${formatShape(x.shape)} does not hold ${T} tokens of heads * ${headSize} (one per position)`);
    }
    const heads = perToken / headSize;
    const X = gather(x, `rotaryEmbedding ${name}`);
    const Y = Float64Array.from(X); // the pass-through tail is already in place
    for (let t = 0; t < T; t++) {
      const c0 = pos[t]! * rotaryDim;
      for (let h = 0; h < heads; h++) {
        const base = (t * heads + h) * headSize;
        for (let i = 0; i < half; i++) {
          const cos = cache[c0 + i]!;
          const sin = cache[c0 + half + i]!;
          const i1 = base + (isNeoxStyle ? i : 2 * i);
          const i2 = base + (isNeoxStyle ? i + half : 2 * i + 1);
          const x1 = X[i1]!;
          const x2 = X[i2]!;
          Y[i1] = x1 * cos - x2 * sin;
          Y[i2] = x2 * cos + x1 * sin;
        }
      }
    }
    return output(backend, x.shape, x.dtype, Y, 'rotaryEmbedding');
  };

  const q = rotate(query, 'query');
  return [q, key ? rotate(key, 'key') : null];
}
