/**
 * What the pipeline runner needs of a model (runner kind 'pipeline', growth.md §3): a diffusers-style pipeline folder of
 * components, each a module loaded from its own sub-folder, plus the assets that are not weights (tokenizers), and
 * text-to-image generation over its denoising loop. The commands know pipelines only through this interface.
 */
import type { Module, Tensor } from '@fastkernels/core';
import type { WeightRules } from '../weights/weight-plan.js';
import type { GraphRuntime } from './device-io.js';

/** One sub-model of a pipeline and the folder it loads from (`<dir>/<name>`: transformer, vae, text_encoder, ...). */
export interface PipelineComponent {
  readonly name: string;
  readonly module: Module;
  readonly rules: WeightRules;
}

export interface ImageRequest {
  readonly prompt: string;
  /** Image size in pixels (a multiple of the pipeline's latent unit). */
  readonly height: number;
  readonly width: number;
  readonly steps: number;
  /** Seeds the initial noise (the same image for the same seed, on any backend up to rounding). */
  readonly seed: number;
  /** Distilled guidance (FLUX.1-dev: 3.5); the pipeline's default when absent. */
  readonly guidanceScale?: number;
  /** Text-encoder tokens (FLUX: T5's max_sequence_length, 512). */
  readonly maxSequenceLength?: number;
  /**
   * The denoiser step replayed from a graph: true (default) where the backend has graphs (CUDA), false eager, a
   * GraphRuntime that one (tests: the emulated graphs on the CPU).
   */
  readonly graphs?: boolean | GraphRuntime;
}

export interface GeneratedImage {
  readonly width: number;
  readonly height: number;
  /** 8-bit RGB, row-major, 3 bytes a pixel. */
  readonly rgb: Uint8Array;
}

export interface ImageTimings {
  readonly encodeMs: number;
  /** Each denoising step's wall time (synchronised). */
  readonly stepMs: readonly number[];
  readonly decodeMs: number;
}

export interface PipelineModel extends Module {
  /** The sub-models, each with the weight rules of its own checkpoint folder. */
  components(): readonly PipelineComponent[];
  /** Read the folder's non-weight parts (tokenizers) once, after the weights are in; a UserError naming a bad file. */
  loadAssets(dir: string): void;
  /** Text to images; onStep after each denoising step (step counts from 1; the latents after it, borrowed: copy to keep). */
  generateImage(req: ImageRequest, onStep?: (step: number, steps: number, latents: Tensor) => void): { images: GeneratedImage[]; timings: ImageTimings };
}

export function isPipelineModel(m: Module): m is PipelineModel {
  const p = m as Partial<PipelineModel>;
  return typeof p.components === 'function' && typeof p.generateImage === 'function' && typeof p.loadAssets === 'function';
}
