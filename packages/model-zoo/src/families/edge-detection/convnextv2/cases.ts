/** Task-case helpers of ConvNeXt-V2: trained-looking parameters, stage geometry and work counts. */
import { Tensor, type Module, type Rng } from '@fastkernels/core';
import type { ConvNextV2Config } from './config.js';

/**
 * Conv / linear weights N(0, 1 / fan_in), their biases N(0, 0.1^2); LayerNorm weights 1 + N(0, 0.1^2), biases
 * N(0, 0.1^2); GRN weight and bias N(0, 0.3^2) (HF starts them at 0, the identity; trained ones are not).
 */
export function initConvNextParameters(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    let v: Float64Array;
    const isGrn = /(^|\.)grn\.(weight|bias)$/.test(name);
    if (!isGrn && p.shape.length >= 2) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape.slice(1).reduce((a, b) => a * b, 1)));
    else if (isGrn) v = rng.fillNormal(p.numel, 0.3);
    else if (/(layernorm|downsampling_layer\.0)\.weight$/.test(name) || name === 'weight') v = rng.fillNormal(p.numel, 0.1).map((x) => 1 + x);
    else v = rng.fillNormal(p.numel, 0.1);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

export const itemsize = (dtype: string): number => (dtype === 'f32' ? 4 : dtype === 'f64' ? 8 : 2);

/** Side of each stage's maps at input size S: S / patch, then halved per stage. */
export function stageSides(c: ConvNextV2Config, S: number): number[] {
  return c.hiddenSizes.map((_, i) => S / c.patchSize / 2 ** i);
}

/** FLOPs of one block of width C over N maps of H x W: depthwise 7x7, the two pointwise GEMMs, ~40 elementwise. */
export function blockFlops(N: number, C: number, H: number, W: number): number {
  const px = N * H * W;
  return 2 * px * C * 49 + 2 * 2 * px * C * 4 * C + 40 * px * 4 * C;
}

/** Bytes one block moves at least: its input and output maps, the 4C-wide hidden map written and read, the weights. */
export function blockBytes(N: number, C: number, H: number, W: number, it: number): number {
  return it * (2 * N * C * H * W + 2 * N * 4 * C * H * W + C * 49 + 8 * C * C + 12 * C);
}
