import { Tensor, hostArray, type HostArray, type Module, type Rng } from '@fastkernels/core';
import { BatchNorm2d } from '../../../layers/norm.js';
import { defineL1OpTask } from '../../define-op-task.js';

/** Golden float64 BatchNorm in eval mode on [N, C, *]: (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c]. */
export function batchNorm2dReference(x: HostArray, mean: HostArray, variance: HostArray, weight: HostArray | null, bias: HostArray | null, eps: number): HostArray {
  const [N, C] = x.shape as [number, number];
  const plane = x.shape.slice(2).reduce((a, b) => a * b, 1);
  const out = hostArray(x.shape);
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < C; c++) {
      const inv = 1 / Math.sqrt(variance.data[c]! + eps);
      const g = weight ? weight.data[c]! : 1;
      const b = bias ? bias.data[c]! : 0;
      const base = (n * C + c) * plane;
      for (let i = 0; i < plane; i++) out.data[base + i] = (x.data[base + i]! - mean.data[c]!) * inv * g + b;
    }
  }
  return out;
}

/**
 * Trained-looking BatchNorm statistics: running_var in [0.5, 1.5) (a variance is positive), mean, weight and bias
 * N(0, 1) around their PyTorch defaults (weight 1 + noise).
 */
export function initBatchNormParameters(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    let v: Float64Array;
    if (name.endsWith('running_var')) v = rng.fillUniform(p.numel, 0.5, 1.5);
    else if (name.endsWith('weight')) v = rng.fillNormal(p.numel, 0.5).map((u) => 1 + u);
    else v = rng.fillNormal(p.numel, 0.5);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

const eps = (c: { init: readonly unknown[] }) => (c.init[1] as number | undefined) ?? 1e-5;
const bn = (name: string, dtype: 'f32' | 'bf16' | 'f16', N: number, C: number, H: number, W: number, e = 1e-3) => ({ name, dtype, dims: { N, C, H, W }, init: [C, e] });

/** torch.nn.BatchNorm2d in eval mode (running statistics): the layer (layers/norm.ts) is the baseline. */
export const batchNorm2dTask = defineL1OpTask('batch_norm', {
  id: 'L1/batch_norm2d',
  className: 'BatchNorm2d',
  mirrors: 'torch.nn.BatchNorm2d',
  description: 'Inference BatchNorm of [N, C, H, W]: per-channel (x - running_mean) / sqrt(running_var + eps), then the affine. Production folds it into the preceding conv (ultralytics fuse()); unfused models run it as is.',
  architectures: ['efficientnetv2', 'mobilenetv4', 'rtdetrv2', 'yolov10'],
  baseline: BatchNorm2d,
  init: [
    { name: 'numFeatures', type: 'int' },
    { name: 'eps', type: 'float', optional: true, default: 1e-5 },
    { name: 'momentum', type: 'float', optional: true, default: 0.1 },
    { name: 'affine', type: 'bool', optional: true, default: true },
    { name: 'trackRunningStats', type: 'bool', optional: true, default: true },
  ],
  forward: { input: { shape: ['N', 'C', 'H', 'W'] } },
  params: { running_mean: { shape: ['C'] }, running_var: { shape: ['C'] }, weight: { shape: ['C'] }, bias: { shape: ['C'] } },
  attrs: (c) => ({ eps: eps(c) }),
  cases: {
    ci: [bn('small', 'f32', 2, 12, 5, 7), bn('small-eps1e-5', 'f32', 1, 8, 9, 3, 1e-5), bn('small-bf16', 'bf16', 2, 16, 4, 6)],
    // YOLOv10n (ultralytics sets BatchNorm2d eps 1e-3) unfused at 640 x 640, batch 32: after the stem and at P3.
    production: [bn('yolov10n-stem-bs32', 'f16', 32, 16, 320, 320), bn('yolov10n-p3-bs32', 'f16', 32, 64, 80, 80), bn('yolov10n-p3-bs1', 'f16', 1, 64, 80, 80)],
  },
  inputScale: 2,
  initParameters: (m, _c, rng) => initBatchNormParameters(m, rng),
  reference: ([x], p, c) => [batchNorm2dReference(x!, p.get('running_mean')!, p.get('running_var')!, p.get('weight') ?? null, p.get('bias') ?? null, eps(c))],
  flopsPerElement: 2,
});
