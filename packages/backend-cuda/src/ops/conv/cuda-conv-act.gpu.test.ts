/**
 * conv2d_act (issue #34) on CUDA: YOLOv10n's conv shapes (bench/suites/ops conv-y10n-*: 3x3 stride 2, 1x1, 3x3,
 * depthwise 3x3 stride 2 and stride 1), fp16 / bf16 channels-last, SiLU (and one ReLU), against the float64 CPU
 * reference and against conv2d + silu on CUDA. Both routes: cuDNN's conv then one pass for bias + SiLU ('cudnn'), and
 * the implicit-GEMM fallback with the SiLU in its epilogue ('fallback'). The route each case took is printed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { callOp, type DType, type Tensor } from '@fastkernels/core';
import { G, expectClose, gpu, releasing, toGpu, tolOf } from '../../../test/spine-helpers.js';
import { rand } from '../../../test/ops-helpers.js';
import type { ConvLibrary } from './conv-kernels.js';
import { cudnnAddon, cudnnState } from './cudnn-library.js';

const GT = { ...G, timeout: 600_000 };

interface Shape {
  readonly label: string;
  readonly x: [number, number, number, number];
  readonly w: [number, number, number, number];
  readonly stride: number;
  readonly padding: number;
  readonly groups: number;
  readonly bias: boolean;
}
// YOLOv10n's convs at batch 1 (after fuse(): every conv has a bias); one bias-free case for the activation-only pass
const SHAPES: Shape[] = [
  { label: 'y10n m0 3x3 s2 3 -> 16 @640', x: [1, 3, 640, 640], w: [16, 3, 3, 3], stride: 2, padding: 1, groups: 1, bias: true },
  { label: 'y10n m1 3x3 s2 16 -> 32 @320', x: [1, 16, 320, 320], w: [32, 16, 3, 3], stride: 2, padding: 1, groups: 1, bias: true },
  { label: 'y10n c2f 1x1 32 -> 32 @160', x: [1, 32, 160, 160], w: [32, 32, 1, 1], stride: 1, padding: 0, groups: 1, bias: true },
  { label: 'y10n c2f 3x3 16 -> 16 @160', x: [1, 16, 160, 160], w: [16, 16, 3, 3], stride: 1, padding: 1, groups: 1, bias: true },
  { label: 'y10n scdown 1x1 64 -> 128 @80', x: [1, 64, 80, 80], w: [128, 64, 1, 1], stride: 1, padding: 0, groups: 1, bias: true },
  { label: 'y10n scdown dw3x3 s2 128 @80', x: [1, 128, 80, 80], w: [128, 1, 3, 3], stride: 2, padding: 1, groups: 128, bias: true },
  { label: 'y10n head 3x3 64 -> 64 @80 (no bias)', x: [1, 64, 80, 80], w: [64, 64, 3, 3], stride: 1, padding: 1, groups: 1, bias: false },
  { label: 'y10n cib dw3x3 256 @20', x: [1, 256, 20, 20], w: [256, 1, 3, 3], stride: 1, padding: 1, groups: 256, bias: true },
];

/** A [N, C, H, W] view whose memory is channels-last. */
function channelsLast(t: Tensor): Tensor {
  const p = t.permute([0, 2, 3, 1]);
  const c = p.contiguous();
  p.dispose();
  const v = c.permute([0, 3, 1, 2]);
  c.dispose();
  return v;
}

const routes: string[] = [];

describe('conv2d_act on CUDA (YOLOv10n shapes)', () => {
  afterAll(() => {
    gpu().generatedOps.conv.library = 'auto';
    if (routes.length) console.log(`conv2d_act routes:\n  ${routes.join('\n  ')}`);
  });

  for (const library of ['auto', 'fallback'] as ConvLibrary[]) {
    for (const dtype of ['f16', 'bf16'] as DType[]) {
      it(`${library === 'auto' ? 'cuDNN (where present) + the bias / SiLU pass' : 'forced fallback, SiLU in the epilogue'}, ${dtype} channels-last`, GT, () => {
        const conv = gpu().generatedOps.conv;
        conv.library = library;
        SHAPES.forEach((s, i) =>
          releasing((keep) => {
            const act = i === SHAPES.length - 1 ? 'relu' : 'silu';
            const attrs = { stride: s.stride, padding: s.padding, groups: s.groups };
            const reduce = s.w[1] * s.w[2] * s.w[3];
            const x = keep(rand(s.x, dtype, 10 * i + 1));
            const w = keep(rand(s.w, dtype, 10 * i + 2, { scale: 1 / Math.sqrt(reduce) }));
            const b = s.bias ? keep(rand([s.w[0]], dtype, 10 * i + 3)) : null;
            // the float64 reference: the same values, conv2d_act computed in float64 on the CPU
            const f64 = (t: Tensor | null) => t && keep(t.to('f64'));
            const want = keep(callOp('conv2d_act', [f64(x), f64(w), f64(b)], { ...attrs, activation: act })[0]!);
            const gx = keep(channelsLast(keep(toGpu(x))));
            const gw = keep(channelsLast(keep(toGpu(w))));
            const gb = b && keep(toGpu(b));
            const got = keep(callOp('conv2d_act', [gx, gw, gb], { ...attrs, activation: act })[0]!);
            const label = `${s.label} ${act} ${dtype} ${library}`;
            const path = conv.lastPath;
            if (library === 'fallback' || !cudnnState()?.ok) expect(path, label).toBe('fallback');
            const plan = path === 'cudnn' ? cudnnAddon(gpu().runtime.addon).cudnnLastPlan() : null;
            routes.push(`${label}: ${path}${plan ? ` (${plan.api} ${plan.engineName})` : path === 'fallback' && library === 'auto' ? ` (cuDNN declined: ${conv.lastDeclineReason})` : ''}`);
            expect(got.strides[1], `${label}: channels-last output`).toBe(1);
            expectClose(got, want, tolOf(dtype), `${label} vs float64`);
            // and against the unfused ops on CUDA (one rounding fewer: within the dtype's tolerance)
            const y = keep(callOp('conv2d', [gx, gw, gb], attrs)[0]!);
            const unfused = keep(callOp(act, [y])[0]!);
            expectClose(got, unfused, tolOf(dtype), `${label} vs conv2d + ${act}`);
          }),
        );
      });
    }
  }
});
