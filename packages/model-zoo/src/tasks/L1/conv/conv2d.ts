import { hostArray, type HostArray, type TaskCaseInput } from '@fastkernels/core';
import { Conv2d } from '../../../layers/conv.js';
import { defineL1OpTask } from '../../define-op-task.js';

/**
 * Golden float64 2-D convolution of [N, C, H, W] by weight [O, C / groups, KH, KW] (plain loops, zero padding),
 * plus bias [O] when given: torch.nn.functional.conv2d with square stride / padding / dilation.
 */
export function conv2dReference(x: HostArray, w: HostArray, b: HostArray | null, stride: number, padding: number, dilation = 1, groups = 1): HostArray {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const [O, Cg, KH, KW] = w.shape as [number, number, number, number];
  const Ho = Math.floor((H + 2 * padding - dilation * (KH - 1) - 1) / stride) + 1;
  const Wo = Math.floor((W + 2 * padding - dilation * (KW - 1) - 1) / stride) + 1;
  const Og = O / groups;
  if (Cg * groups !== C) throw new RangeError(`conv2dReference: ${C} input channels do not match weight ${w.shape.join('x')} with groups ${groups}`);
  const out = hostArray([N, O, Ho, Wo]);
  for (let n = 0; n < N; n++) {
    for (let o = 0; o < O; o++) {
      const g = Math.floor(o / Og);
      for (let i = 0; i < Ho; i++) {
        for (let j = 0; j < Wo; j++) {
          let acc = b ? b.data[o]! : 0;
          for (let c = 0; c < Cg; c++) {
            const xc = ((n * C + g * Cg + c) * H) * W;
            const wc = ((o * Cg + c) * KH) * KW;
            for (let ki = 0; ki < KH; ki++) {
              const y = i * stride - padding + ki * dilation;
              if (y < 0 || y >= H) continue;
              for (let kj = 0; kj < KW; kj++) {
                const xx = j * stride - padding + kj * dilation;
                if (xx < 0 || xx >= W) continue;
                acc += x.data[xc + y * W + xx]! * w.data[wc + ki * KW + kj]!;
              }
            }
          }
          out.data[((n * O + o) * Ho + i) * Wo + j] = acc;
        }
      }
    }
  }
  return out;
}

/** Output size of a convolution / pooling window along one dim (torch's floor rule). */
export const convOut = (size: number, k: number, s: number, p: number, d = 1): number => Math.floor((size + 2 * p - d * (k - 1) - 1) / s) + 1;

/**
 * A case of torch.nn.Conv2d(C, O, k, s, p, dilation=1, groups, bias) on [N, C, H, W]: the init arguments in the
 * constructor's order and every dim the specs name (Cg = C / groups, Ho / Wo by the floor rule).
 */
export function conv2dCase(name: string, dtype: 'f32' | 'bf16' | 'f16', N: number, C: number, O: number, H: number, W: number, k: number, s: number, p: number, groups = 1, bias = false): TaskCaseInput {
  return {
    name,
    dtype,
    dims: { N, C, O, H, W, K: k, Cg: C / groups, Ho: convOut(H, k, s, p), Wo: convOut(W, k, s, p) },
    init: [C, O, k, s, p, 1, groups, bias],
  };
}

const attrNum = (c: { init: readonly unknown[] }, i: number, dflt: number) => (c.init[i] as number | undefined) ?? dflt;

/**
 * torch.nn.Conv2d: the layer (layers/conv.ts) is the baseline. Production shapes are YOLOv10n's convolutions at 640 x 640
 * (ultralytics Conv: bias-free conv before BatchNorm; depthwise where groups = channels; the head's 1x1 conv has a bias).
 */
export const conv2dTask = defineL1OpTask('conv2d', {
  id: 'L1/conv2d',
  className: 'Conv2d',
  mirrors: 'torch.nn.Conv2d',
  description: '2-D convolution of NCHW feature maps (groups, stride, zero padding, optional bias): dense, depthwise and 1x1 forms.',
  architectures: ['convnextv2', 'efficientnetv2', 'mobilenetv4', 'oasis', 'pi0', 'rtdetrv2', 'sam3', 'sdxl', 'yolov10'],
  baseline: Conv2d,
  init: [
    { name: 'inChannels', type: 'int' },
    { name: 'outChannels', type: 'int' },
    { name: 'kernelSize', type: 'int' },
    { name: 'stride', type: 'int', optional: true, default: 1 },
    { name: 'padding', type: 'int', optional: true, default: 0 },
    { name: 'dilation', type: 'int', optional: true, default: 1 },
    { name: 'groups', type: 'int', optional: true, default: 1 },
    { name: 'bias', type: 'bool', optional: true, default: true },
    { name: 'paddingMode', type: 'enum', choices: ['zeros', 'reflect', 'replicate', 'circular'], optional: true, default: 'zeros' },
  ],
  forward: { input: { shape: ['N', 'C', 'H', 'W'] } },
  params: { weight: { shape: ['O', 'Cg', 'K', 'K'] }, bias: { shape: ['O'] } },
  outputs: [{ shape: ['N', 'O', 'Ho', 'Wo'] }],
  attrs: (c) => ({ stride: attrNum(c, 3, 1), padding: attrNum(c, 4, 0), dilation: attrNum(c, 5, 1), groups: attrNum(c, 6, 1) }),
  cases: {
    ci: [
      conv2dCase('small-3x3-s2', 'f32', 2, 6, 8, 9, 11, 3, 2, 1),
      conv2dCase('small-1x1-bias', 'f32', 1, 16, 12, 5, 4, 1, 1, 0, 1, true),
      conv2dCase('small-depthwise-7x7', 'f32', 2, 8, 8, 10, 10, 7, 1, 3, 8),
      conv2dCase('small-3x3-bf16', 'bf16', 1, 8, 16, 8, 8, 3, 1, 1),
    ],
    production: [
      // YOLOv10n (ultralytics Conv(c1, c2, k, s)) at 640 x 640: the stem, a P3 3x3, a C2f 1x1, a SCDown depthwise, the head's 1x1 (bias).
      conv2dCase('yolov10n-stem-bs1', 'f16', 1, 3, 16, 640, 640, 3, 2, 1),
      conv2dCase('yolov10n-stem-bs32', 'f16', 32, 3, 16, 640, 640, 3, 2, 1),
      conv2dCase('yolov10n-p2-down-bs32', 'f16', 32, 16, 32, 320, 320, 3, 2, 1),
      conv2dCase('yolov10n-c2f-bottleneck-3x3-bs32', 'f16', 32, 16, 16, 160, 160, 3, 1, 1),
      conv2dCase('yolov10n-c2f-cv1-1x1-bs32', 'f16', 32, 64, 64, 80, 80, 1, 1, 0),
      conv2dCase('yolov10n-scdown-dw-bs32', 'f16', 32, 128, 128, 80, 80, 3, 2, 1, 128),
      conv2dCase('yolov10n-head-cls-1x1-bs32', 'f16', 32, 80, 80, 80, 80, 1, 1, 0, 1, true),
    ],
  },
  reference: ([x], params, c) => [conv2dReference(x!, params.get('weight')!, params.get('bias') ?? null, attrNum(c, 3, 1), attrNum(c, 4, 0), attrNum(c, 5, 1), attrNum(c, 6, 1))],
  work: (c) => {
    const { N, C, O, H, W, K, Cg, Ho, Wo } = c.dims as Record<string, number>;
    const it = c.dtype === 'f32' ? 4 : 2;
    return { bytes: it * (N! * C! * H! * W! + O! * Cg! * K! * K! + N! * O! * Ho! * Wo!), flops: 2 * N! * O! * Ho! * Wo! * Cg! * K! * K! };
  },
});
