/**
 * The original's L1/tensor_ops: the small tensor primitives PyTorch code calls as functions (F.pad, F.one_hot,
 * torch.cat, torch.exp), as modules. Pad is the task's class (the one `bench` times); OneHot, Cat and Exp are its
 * partners in this file, for modules that want them as children.
 */
import { F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';

export type PadMode = 'constant' | 'reflect' | 'replicate' | 'circular';

/** torch.nn.functional.pad(input, pad, mode, value) as a module: pad is [last_left, last_right, prev_left, ...]. */
export class Pad extends Module {
  constructor(
    readonly pad: readonly number[],
    readonly mode: PadMode = 'constant',
    readonly value = 0,
  ) {
    super();
    if (pad.length % 2 !== 0 || pad.some((p) => !Number.isInteger(p))) throw new RangeError(`Pad: pad must be an even-length list of ints, got ${JSON.stringify(pad)}`);
  }

  forward(input: Tensor): Tensor {
    return F.pad(input, this.pad, this.mode, this.mode === 'constant' ? this.value : null);
  }
}

/** torch.nn.functional.one_hot(tensor, num_classes) as a module (i64 in, i64 out). */
export class OneHot extends Module {
  constructor(readonly numClasses: number) {
    super();
  }

  forward(input: Tensor): Tensor {
    return F.oneHot(input, this.numClasses);
  }
}

/** torch.cat(tensors, dim) as a module. */
export class Cat extends Module {
  constructor(readonly dim = 0) {
    super();
  }

  forward(...tensors: Tensor[]): Tensor {
    return F.cat(tensors, this.dim);
  }
}

/** torch.exp as a module. */
export class Exp extends Module {
  forward(input: Tensor): Tensor {
    return F.exp(input);
  }
}

/** Golden F.pad of the trailing dims (constant, reflect, replicate or circular), plain index arithmetic. */
export function padReference(x: HostArray, pad: readonly number[], mode: PadMode, value: number): HostArray {
  const rank = x.shape.length;
  const before = new Array<number>(rank).fill(0);
  const after = new Array<number>(rank).fill(0);
  for (let i = 0; i < pad.length / 2; i++) {
    before[rank - 1 - i] = pad[2 * i]!;
    after[rank - 1 - i] = pad[2 * i + 1]!;
  }
  const outShape = x.shape.map((s, d) => s + before[d]! + after[d]!);
  const out = hostArray(outShape);
  const src = (o: number, d: number): number => {
    const n = x.shape[d]!;
    const i = o - before[d]!;
    if (i >= 0 && i < n) return i;
    if (mode === 'constant') return -1;
    if (mode === 'replicate') return Math.min(Math.max(i, 0), n - 1);
    if (mode === 'circular') return ((i % n) + n) % n;
    const period = 2 * (n - 1); // reflect: mirror without repeating the edge
    const m = ((i % period) + period) % period;
    return m < n ? m : period - m;
  };
  const idx = new Array<number>(rank).fill(0);
  for (let flat = 0; flat < out.data.length; flat++) {
    let rem = flat;
    for (let d = rank - 1; d >= 0; d--) {
      idx[d] = rem % outShape[d]!;
      rem = Math.floor(rem / outShape[d]!);
    }
    let off = 0;
    let inside = true;
    for (let d = 0; d < rank; d++) {
      const s = src(idx[d]!, d);
      if (s < 0) {
        inside = false;
        break;
      }
      off = off * x.shape[d]! + s;
    }
    out.data[flat] = inside ? x.data[off]! : value;
  }
  return out;
}

const padCase = (name: string, dtype: 'f32' | 'bf16' | 'f16', shape: { N: number; C: number; H: number; W: number }, pad: number[], mode: PadMode, value = 0) => {
  const [l, r, t, b] = [pad[0] ?? 0, pad[1] ?? 0, pad[2] ?? 0, pad[3] ?? 0];
  return { name, dtype, dims: { ...shape, Ho: shape.H + t + b, Wo: shape.W + l + r }, init: [pad, mode, value] };
};

/** F.pad as the Pad module (the class above is the baseline). */
export const tensorOpsTask = defineL1OpTask('pad', {
  id: 'L1/tensor_ops',
  className: 'Pad',
  mirrors: 'torch.nn.functional.pad',
  description: 'Small tensor primitives as modules: Pad (F.pad: constant / reflect / replicate / circular) is the timed class; OneHot, Cat and Exp live in the same file.',
  architectures: ['openfold3', 'yolov10'],
  baseline: Pad,
  init: [
    { name: 'pad', type: 'object' },
    { name: 'mode', type: 'enum', choices: ['constant', 'reflect', 'replicate', 'circular'], optional: true, default: 'constant' },
    { name: 'value', type: 'float', optional: true, default: 0 },
  ],
  forward: { input: { shape: ['N', 'C', 'H', 'W'] } },
  params: {},
  outputs: [{ shape: ['N', 'C', 'Ho', 'Wo'] }],
  attrs: (c) => {
    const mode = (c.init[1] as PadMode | undefined) ?? 'constant';
    return { pad: c.init[0] as number[], mode, value: mode === 'constant' ? ((c.init[2] as number | undefined) ?? 0) : null };
  },
  cases: {
    ci: [
      padCase('constant', 'f32', { N: 2, C: 3, H: 5, W: 6 }, [1, 2, 3, 0], 'constant', 0.5),
      padCase('reflect', 'f32', { N: 1, C: 4, H: 6, W: 5 }, [2, 2, 1, 3], 'reflect'),
      padCase('replicate-bf16', 'bf16', { N: 2, C: 2, H: 4, W: 7 }, [0, 3, 2, 2], 'replicate'),
    ],
    // ultralytics' letterbox on the device: a 4:3 image resized to 640 x 480 padded to 640 x 640 with gray 114 / 255.
    production: [
      padCase('yolov10-letterbox-bs1', 'f16', { N: 1, C: 3, H: 480, W: 640 }, [0, 0, 80, 80], 'constant', 114 / 255),
      padCase('yolov10-letterbox-bs32', 'f16', { N: 32, C: 3, H: 480, W: 640 }, [0, 0, 80, 80], 'constant', 114 / 255),
    ],
  },
  reference: ([x], _p, c) => {
    const a = tensorOpsTask.opBinding.attrs(c) as { pad: number[]; mode: PadMode; value: number | null };
    return [padReference(x!, a.pad, a.mode, a.value ?? 0)];
  },
  flopsPerElement: 0,
});
