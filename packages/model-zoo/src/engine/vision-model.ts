/**
 * What the vision runner (vision-runner.ts; runner kind 'vision', growth.md §3) needs of a model: a batched forward over
 * images at the model's fixed size and how images are prepared for it; detectors also give the decoded detections,
 * classifiers their label names.
 */
import type { Module, Tensor } from '@fastkernels/core';

/**
 * How an image becomes the model's input [3, S, S] (RGB): ultralytics' LetterBox (auto=False, centred, gray `fill`
 * borders, pixels / 255), or HF's image processor resize (shortest edge to S / crop_pct then a centre crop, or straight
 * to S x S when crop_pct is null; pixels / 255 normalised by mean and std per channel).
 */
export type ImagePreprocess =
  | { readonly kind: 'letterbox'; readonly fill: number }
  | { readonly kind: 'resize'; readonly cropPct: number | null; readonly resample: 'bilinear' | 'bicubic'; readonly mean: readonly number[]; readonly std: readonly number[] };

export interface VisionModel extends Module {
  /** Square input size the model runs at (letterboxed images), e.g. 640. */
  readonly imageSize: number;
  /** How images are turned into inputs (vision-preprocess.ts applies it). */
  readonly preprocess: ImagePreprocess;
  /** Class names by index, when config.json has them (classifiers: id2label; detectors: ultralytics' names). */
  readonly labels?: readonly string[] | null;
  /** images [B, 3, S, S] (RGB in [0, 1]) -> the model's raw outputs (detectors: [B, 4 + nc, A]). */
  forward(images: Tensor): Tensor;
  /** Detectors: boxes [B, K, 4] (x1 y1 x2 y2 pixels), scores [B, K], classes [B, K] i64, best first. */
  detect?(images: Tensor): { boxes: Tensor; scores: Tensor; classes: Tensor };
  /** Load-time re-parameterisation (ultralytics fuse(): Conv + BN folded); called once after the weights load. */
  fuse?(): void;
  /**
   * Random weights only (before fuse): data-derived statistics (BatchNorm running stats from one forward over seeded
   * noise images) so a random model's outputs depend on its input; returns how many modules it set.
   */
  calibrate?(seed: number): number;
}

export function isVisionModel(m: Module): m is VisionModel {
  return typeof (m as Partial<VisionModel>).imageSize === 'number' && typeof (m as { forward?: unknown }).forward === 'function';
}
