import { F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';

export type InterpolateMode = 'nearest' | 'bilinear';

/**
 * torch.nn.Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None, recompute_scale_factor=None) over
 * F.interpolate on NCHW maps: ultralytics' nn.Upsample(None, 2, 'nearest') in the YOLO necks, RT-DETR's
 * F.interpolate(scale_factor=2).
 */
export class Interpolate extends Module {
  constructor(
    readonly size: number | readonly number[] | null = null,
    readonly scaleFactor: number | null = null,
    readonly mode: InterpolateMode = 'nearest',
    readonly alignCorners: boolean | null = null,
    readonly recomputeScaleFactor: boolean | null = null,
  ) {
    super();
    if ((size === null) === (scaleFactor === null)) throw new RangeError('Interpolate: give exactly one of size and scale_factor');
    if (mode !== 'nearest' && mode !== 'bilinear') throw new RangeError(`Interpolate: mode must be 'nearest' or 'bilinear', got '${String(mode)}'`);
  }

  forward(input: Tensor): Tensor {
    return F.interpolate(input, {
      size: this.size === null ? null : typeof this.size === 'number' ? this.size : [...this.size],
      scale_factor: this.scaleFactor,
      mode: this.mode,
      align_corners: this.alignCorners,
      recompute_scale_factor: this.recomputeScaleFactor,
    });
  }
}

/**
 * Golden resize of [N, C, H, W] to [Ho, Wo] (torch's coordinate rules): nearest takes floor(dst * scale) with scale =
 * 1 / scale_factor when one is given, else in / out; bilinear (align_corners false) samples (dst + 0.5) * scale - 0.5,
 * clamped at 0, and blends the four neighbours.
 */
export function interpolateReference(x: HostArray, Ho: number, Wo: number, mode: InterpolateMode, scaleFactor: number | null): HostArray {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const sy = scaleFactor ? 1 / scaleFactor : H / Ho;
  const sx = scaleFactor ? 1 / scaleFactor : W / Wo;
  const out = hostArray([N, C, Ho, Wo]);
  for (let nc = 0; nc < N * C; nc++) {
    const at = (y: number, xx: number) => x.data[(nc * H + y) * W + xx]!;
    for (let i = 0; i < Ho; i++) {
      for (let j = 0; j < Wo; j++) {
        let v: number;
        if (mode === 'nearest') v = at(Math.min(Math.floor(i * sy), H - 1), Math.min(Math.floor(j * sx), W - 1));
        else {
          const fy = Math.max((i + 0.5) * sy - 0.5, 0);
          const fx = Math.max((j + 0.5) * sx - 0.5, 0);
          const y0 = Math.min(Math.floor(fy), H - 1);
          const x0 = Math.min(Math.floor(fx), W - 1);
          const y1 = Math.min(y0 + 1, H - 1);
          const x1 = Math.min(x0 + 1, W - 1);
          const ly = fy - y0;
          const lx = fx - x0;
          v = (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
        }
        out.data[(nc * Ho + i) * Wo + j] = v;
      }
    }
  }
  return out;
}

const up = (name: string, dtype: 'f32' | 'bf16' | 'f16', N: number, C: number, H: number, W: number, s: number, mode: InterpolateMode = 'nearest') => ({
  name, dtype, dims: { N, C, H, W, Ho: H * s, Wo: W * s }, init: [null, s, mode],
});

/** F.interpolate behind torch.nn.Upsample's constructor (the class above is the baseline). */
export const interpolateTask = defineL1OpTask('interpolate', {
  id: 'L1/interpolate',
  className: 'Interpolate',
  mirrors: 'torch.nn.Upsample',
  description: "Resize of NCHW feature maps by a scale factor or to a size: 'nearest' (YOLO's neck upsampling x2) or 'bilinear'.",
  architectures: ['rtdetrv2', 'yolov10'],
  baseline: Interpolate,
  init: [
    { name: 'size', type: 'object', optional: true, default: null },
    { name: 'scaleFactor', type: 'float', optional: true, default: null },
    { name: 'mode', type: 'enum', choices: ['nearest', 'bilinear'], optional: true, default: 'nearest' },
    { name: 'alignCorners', type: 'bool', optional: true, default: null },
    { name: 'recomputeScaleFactor', type: 'bool', optional: true, default: null },
  ],
  forward: { input: { shape: ['N', 'C', 'H', 'W'] } },
  params: {},
  outputs: [{ shape: ['N', 'C', 'Ho', 'Wo'] }],
  attrs: (c) => ({ scale_factor: c.init[1] as number, mode: (c.init[2] as InterpolateMode | undefined) ?? 'nearest' }),
  cases: {
    ci: [up('nearest-x2', 'f32', 2, 3, 5, 7, 2), up('bilinear-x2', 'f32', 1, 4, 6, 5, 2, 'bilinear'), up('nearest-x2-bf16', 'bf16', 2, 8, 4, 4, 2)],
    // YOLOv10n's neck at 640 x 640: P5 (256 x 20 x 20) and the P4 merge (128 x 40 x 40) upsampled x2.
    production: [up('yolov10n-p5-up-bs1', 'f16', 1, 256, 20, 20, 2), up('yolov10n-p5-up-bs32', 'f16', 32, 256, 20, 20, 2), up('yolov10n-p4-up-bs32', 'f16', 32, 128, 40, 40, 2)],
  },
  reference: ([x], _p, c) => [interpolateReference(x!, c.dims.Ho!, c.dims.Wo!, (c.init[2] as InterpolateMode | undefined) ?? 'nearest', c.init[1] as number)],
  flopsPerElement: 1,
});
