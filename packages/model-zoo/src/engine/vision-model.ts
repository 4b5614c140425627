/**
 * What a vision runner needs of a model (runner kind 'vision', growth.md §3): a batched forward over images at the
 * model's fixed size. The runner itself (CUDA graphs at fixed shapes, image decoding and letterboxing) is issue 34's
 * follow-up; detection models also give the decoded detections.
 */
import type { Module, Tensor } from '@fastkernels/core';

export interface VisionModel extends Module {
  /** Square input size the model runs at (letterboxed images), e.g. 640. */
  readonly imageSize: number;
  /** images [B, 3, S, S] (RGB in [0, 1]) -> the model's raw outputs (detectors: [B, 4 + nc, A]). */
  forward(images: Tensor): Tensor;
  /** Detectors: boxes [B, K, 4] (x1 y1 x2 y2 pixels), scores [B, K], classes [B, K] i64, best first. */
  detect?(images: Tensor): { boxes: Tensor; scores: Tensor; classes: Tensor };
  /** Load-time re-parameterisation (ultralytics fuse(): Conv + BN folded); called once after the weights load. */
  fuse?(): void;
}

export function isVisionModel(m: Module): m is VisionModel {
  return typeof (m as Partial<VisionModel>).imageSize === 'number' && typeof (m as { forward?: unknown }).forward === 'function';
}
