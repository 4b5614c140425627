/**
 * Channels-last propagation as PyTorch's suggest_memory_format decides it: the strides test, and cat's output keeping
 * the channels-last layout its inputs share (values checked on the host test backend).
 */
import { describe, expect, it } from 'vitest';
import { stridesLikeChannelsLast } from '../shape.js';
import { Tensor } from '../tensor.js';
import { HostTestBackend } from '../test-support/host-backend.js';
import { callOp1 } from './index.js';

const cl = (n: number, c: number, h: number, w: number) => [h * w * c, 1, w * c, c];

describe('stridesLikeChannelsLast (torch is_channels_last_strides_2d / _3d)', () => {
  it('packed channels-last, a channel slice of it, 5-d; not row-major, N111 or a 1C1W permutation', () => {
    expect(stridesLikeChannelsLast([2, 8, 5, 6], cl(2, 8, 5, 6))).toBe(true);
    expect(stridesLikeChannelsLast([2, 4, 5, 6], cl(2, 8, 5, 6))).toBe(true); // 4 of 8 channels
    expect(stridesLikeChannelsLast([1, 8, 5, 6], cl(1, 8, 5, 6))).toBe(true);
    expect(stridesLikeChannelsLast([2, 3, 4, 5, 6], [360, 1, 90, 18, 3])).toBe(true);
    expect(stridesLikeChannelsLast([2, 8, 5, 6], [240, 30, 6, 1])).toBe(false);
    expect(stridesLikeChannelsLast([4, 1, 1, 1], [1, 1, 1, 1])).toBe(false);
    expect(stridesLikeChannelsLast([1, 5, 1, 3], [15, 1, 5, 5])).toBe(false);
    expect(stridesLikeChannelsLast([8, 5, 6], [1, 48, 8])).toBe(false); // 3-d: never
  });
});

describe('cat keeps channels-last', () => {
  const backend = new HostTestBackend('memory-format');
  /** [N, C, H, W] values 0.. in logical order, stored channels-last. */
  const clTensor = (shape: [number, number, number, number], start: number) => {
    const [n, c, h, w] = shape;
    const logical = Tensor.fromArray(backend, Array.from({ length: n * c * h * w }, (_, i) => start + i), shape, 'f32');
    const base = logical.permute(0, 2, 3, 1).contiguous();
    return { t: base.permute(0, 3, 1, 2), values: [...logical.toFloat64Array()] };
  };

  it('every input channels-last: a channels-last output with the values of a plain cat along C', () => {
    const a = clTensor([2, 3, 4, 5], 0);
    const b = clTensor([2, 2, 4, 5], 1000);
    const y = callOp1('cat', [a.t, b.t], { dim: 1 });
    expect(y.shape).toEqual([2, 5, 4, 5]);
    expect(y.strides).toEqual(cl(2, 5, 4, 5));
    const plain = callOp1('cat', [a.t.contiguous(), b.t.contiguous()], { dim: 1 });
    expect(plain.strides).toEqual([100, 20, 5, 1]);
    expect([...y.toFloat64Array()]).toEqual([...plain.toFloat64Array()]);
  });

  it('a row-major input among them: contiguous, as torch', () => {
    const a = clTensor([2, 3, 4, 5], 0);
    const y = callOp1('cat', [a.t, a.t.contiguous()], { dim: 1 });
    expect(y.strides).toEqual([120, 20, 5, 1]);
  });
});
