import { F, Module, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';

/**
 * Global average pooling of [N, C, H, W] to [N, C]: HF ConvNextV2Model's `last_hidden_state.mean([-2, -1])`, timm's
 * SelectAdaptivePool2d('avg', flatten=True) in ConvNeXt / EfficientNetV2 / MobileNetV4 heads. One op: mean over H, W.
 */
export class GlobalAvgPool2d extends Module {
  forward(x: Tensor): Tensor {
    return F.mean(x, { dim: [-2, -1] });
  }
}

/** Golden float64 mean over the trailing two dims of [N, C, H, W]. */
export function globalAvgPool2dReference(x: HostArray): HostArray {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const out = hostArray([N, C]);
  for (let i = 0; i < N * C; i++) {
    let s = 0;
    for (let p = 0; p < H * W; p++) s += x.data[i * H * W + p]!;
    out.data[i] = s / (H * W);
  }
  return out;
}

const pool = (name: string, dtype: 'f32' | 'bf16', N: number, C: number, H: number, W: number) => ({ name, dtype, dims: { N, C, H, W }, init: [] });

export const globalAvgPool2dTask = defineL1OpTask('mean', {
  id: 'L1/global_avg_pool2d',
  className: 'GlobalAvgPool2d',
  mirrors: 'timm.layers.adaptive_avgmax_pool.SelectAdaptivePool2d',
  description: 'Global average pooling: the mean of each channel over H x W, [N, C, H, W] -> [N, C] (classification heads).',
  architectures: ['convnextv2', 'efficientnetv2', 'mobilenetv4'],
  baseline: GlobalAvgPool2d,
  init: [],
  forward: { input: { shape: ['N', 'C', 'H', 'W'] } },
  params: {},
  outputs: [{ shape: ['N', 'C'] }],
  attrs: () => ({ dim: [-2, -1] }),
  cases: {
    ci: [pool('small', 'f32', 2, 24, 5, 7), pool('small-bf16', 'bf16', 3, 64, 6, 6), pool('one-pixel', 'f32', 2, 8, 1, 1)],
    // ConvNeXt-V2-base at 384 x 384: the last stage's 1024 x 12 x 12 map, batch 32 and 1
    production: [pool('convnextv2-base-bs32', 'bf16', 32, 1024, 12, 12), pool('convnextv2-base-bs1', 'bf16', 1, 1024, 12, 12)],
  },
  reference: ([x]) => [globalAvgPool2dReference(x!)],
  // one add per input element; the input read once, the [N, C] output written
  work: (c) => {
    const { N, C, H, W } = c.dims as Record<string, number>;
    const it = c.dtype === 'f32' ? 4 : 2;
    return { bytes: it * N! * C! * (H! * W! + 1), flops: N! * C! * H! * W! };
  },
});
