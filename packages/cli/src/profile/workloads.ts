/**
 * One forward of each model kind `fastkernels profile` runs, built from a given registry (the plain one for the
 * un-instrumented times, the profiler's for the profile), on the runner production uses:
 *
 * - vision (YOLOv10, ConvNeXt-V2): a batch of seeded noise images at the model's input size through the vision runner's
 *   device forward (forwardInPlace: the input buffer already filled, channels-last on CUDA, no upload or read-back),
 *   eagerly, or replayed as a CUDA graph where the backend has graphs;
 * - encoder (BGE-M3, ColBERTv2, XLM-R): a batch of seeded token-id sequences, lengths uniform over a range, embedded in
 *   one packed varlen forward through the encoder runner (the outputs embed's timed passes ask for; read back included).
 *   The encoder runner captures no CUDA graphs.
 */
import { Checkpoint, documentsFor, loadEncoder, loadVisionModel, timedPoolingsOf, visionNoiseImages, VisionRunner } from '@fastkernels/model-zoo';
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';

export interface WorkloadSpec {
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  readonly batch: number;
  /** Encoders: the sequences' lengths, inclusive. */
  readonly lengths?: readonly [number, number];
  /** Seed of the inputs (images, token ids) and of random weights. */
  readonly seed: number;
}

/** A model loaded with its runner, ready to run the same forward again and again. */
export interface LoadedWorkload {
  readonly architecture: string;
  readonly dtype: DType;
  readonly weights: 'checkpoint' | 'random' | 'random-device';
  readonly imageSize?: number;
  readonly tokens?: number;
  readonly description: string;
  /** One forward, eagerly. */
  readonly eager: () => void;
  /** One forward as a graph replay (captured on the first call), where the runner has graphs here; else why not. */
  readonly graphs: (() => void) | string;
  dispose(): void;
}

/**
 * An encoder folder without weights on CUDA draws them on the device (seconds, not minutes, for BGE-M3's 568M); vision
 * models keep the host's seeded weights (YOLOv10n's 2.3M are quick) and their BatchNorm calibration.
 */
function randomInitFor(spec: WorkloadSpec): { randomInit?: 'device' } {
  return spec.backend.name === 'cuda' && !Checkpoint.exists(spec.dir) ? { randomInit: 'device' } : {};
}

export function loadVisionWorkload(spec: WorkloadSpec, registry: ModuleRegistry, withGraphs: boolean): LoadedWorkload {
  const loaded = loadVisionModel(spec.dir, { backend: spec.backend, registry, initSeed: spec.seed, ...(spec.dtype ? { dtype: spec.dtype } : {}) });
  const runners: VisionRunner[] = [];
  try {
    const B = spec.batch;
    const eager = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: B, graphs: false });
    runners.push(eager);
    const images = visionNoiseImages(B, eager.imageSize, spec.seed);
    eager.run(images); // fills the input buffer (and makes the static outputs); forwardInPlace reruns on it
    let graphs: (() => void) | string = 'graphs were not asked for';
    if (withGraphs) {
      const g = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: B, fuse: false, channelsLast: eager.channelsLast });
      runners.push(g);
      if (g.usesGraphs) {
        g.run(images); // captures
        graphs = () => g.forwardInPlace(B);
      } else graphs = `the ${spec.backend.name} backend has no CUDA graphs`;
    }
    return {
      architecture: loaded.architecture.name,
      dtype: loaded.ctx.dtype,
      weights: loaded.weights,
      imageSize: eager.imageSize,
      description: `${B} image${B === 1 ? '' : 's'} at ${eager.imageSize}x${eager.imageSize}${eager.channelsLast ? ' (channels-last)' : ''}, the vision runner's device forward (${loaded.model.detect ? 'detect: head + top-k' : 'logits'})`,
      eager: () => eager.forwardInPlace(B),
      graphs,
      dispose: () => {
        for (const r of runners) r.dispose();
        loaded.model.dispose();
      },
    };
  } catch (e) {
    for (const r of runners) r.dispose();
    loaded.model.dispose();
    throw e;
  }
}

export function loadEncoderWorkload(spec: WorkloadSpec, registry: ModuleRegistry): LoadedWorkload {
  const lengths = spec.lengths!;
  const documents = documentsFor(spec.dir, { count: spec.batch, lengths, seed: spec.seed });
  const tokens = documents.reduce((a, d) => a + d.length, 0);
  // one forward for the whole batch: packed, the sum of the lengths; padded, B x the longest (at least the sum)
  const budget = spec.batch * Math.max(...documents.map((d) => d.length));
  const enc = loadEncoder(spec.dir, { backend: spec.backend, registry, initSeed: spec.seed, maxNumBatchedTokens: budget, ...randomInitFor(spec), ...(spec.dtype ? { dtype: spec.dtype } : {}) });
  const poolings = timedPoolingsOf(enc.poolings);
  const B = spec.batch;
  return {
    architecture: enc.loaded.architecture.name,
    dtype: enc.loaded.ctx.dtype,
    weights: enc.loaded.weights,
    tokens,
    description: `${B} sequence${B === 1 ? '' : 's'} of U[${lengths[0]}, ${lengths[1]}] tokens (${tokens} in all) in one ${enc.runner.packed ? 'packed varlen' : 'padded'} forward of the encoder runner, outputs ${poolings.join(', ')} read back`,
    eager: () => void enc.runner.embed(documents, poolings),
    graphs: 'the encoder runner captures no CUDA graphs',
    dispose: () => enc.loaded.model.dispose(),
  };
}
