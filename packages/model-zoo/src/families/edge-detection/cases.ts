/** Task-case helpers of the YOLOv10 family: parameter init that keeps activations O(1), and image-like inputs. */
import { Tensor, type Module, type Rng } from '@fastkernels/core';

/** The DFL's fixed projection arange(reg_max): not a trained weight, never randomised. */
export const DFL_WEIGHT = /(^|\.)dfl\.conv\.weight$/;

/**
 * Trained-looking parameters: conv weights N(0, 1 / fan_in) (unit gain), BatchNorm running_var U(0.5, 1.5), weight
 * 1 + N(0, 0.1^2), running_mean / bias N(0, 0.1^2); conv biases N(0, 0.5^2). The DFL projection keeps its arange.
 */
export function initYOLOParameters(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    if (DFL_WEIGHT.test(name)) continue;
    let v: Float64Array;
    if (p.shape.length === 4) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[1]! * p.shape[2]! * p.shape[3]!));
    else if (name.endsWith('running_var')) v = rng.fillUniform(p.numel, 0.5, 1.5);
    else if (name.endsWith('bn.weight')) v = rng.fillNormal(p.numel, 0.1).map((x) => 1 + x);
    else if (name.endsWith('bn.bias') || name.endsWith('running_mean')) v = rng.fillNormal(p.numel, 0.1);
    else v = rng.fillNormal(p.numel, 0.5);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

/** ultralytics' autopad: 'same' padding for a k x k window at dilation d. */
export const autopad = (k: number, p: number | null = null, d = 1): number => p ?? Math.floor((d > 1 ? d * (k - 1) + 1 : k) / 2);

/** Bytes of a [N, C, H, W] map at an item size. */
export const mapBytes = (N: number, C: number, H: number, W: number, itemsize: number): number => N * C * H * W * itemsize;

export const itemsizeOf = (dtype: string): number => (dtype === 'f32' ? 4 : dtype === 'f64' ? 8 : 2);
