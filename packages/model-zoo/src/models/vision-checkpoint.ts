/**
 * init-weights for a vision model whose random weights need calibrating (VisionModel.calibrate: BatchNorm statistics
 * from a forward over noise images): the model is built on a real backend, drawn as random init draws it, calibrated,
 * and its tensors are written under the plan's checkpoint names, so loading the folder gives the model that
 * `--model` on config.json alone runs.
 */
import { withContext, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import type { VisionModel } from '../engine/vision-model.js';
import { encodeValues } from '../weights/encode.js';
import { metaBackend } from '../weights/meta-backend.js';
import { initWeightsRandom } from '../weights/random-init.js';
import { writeCheckpoint, type WrittenCheckpoint } from '../weights/checkpoint-writer.js';
import { loadableParameters, planWeights, uniqueTensors } from '../weights/weight-plan.js';
import type { ModelArchitecture } from './registry.js';

/** Whether a built model (on the meta backend is enough) calibrates its random weights. */
export function needsCalibration(model: unknown): model is VisionModel & { calibrate(seed: number): number } {
  return typeof (model as Partial<VisionModel>).calibrate === 'function';
}

/** Whether the architecture's model for this config calibrates its random weights (its tree built on the meta backend). */
export function calibratesRandomWeights<C>(arch: ModelArchitecture<C>, config: C, registry: ModuleRegistry): boolean {
  return needsCalibration(arch.build({ backend: metaBackend(), device: 0, dtype: 'f32', registry }, config));
}

export interface CalibratedWriteOptions {
  readonly seed: number;
  readonly dtype: DType;
  readonly registry: ModuleRegistry;
  /** Where the model is built and calibrated (the CPU is fine: calibration runs one small batch). */
  readonly backend: Backend;
  readonly configPath?: string;
}

export function writeCalibratedCheckpoint<C>(outDir: string, raw: Record<string, unknown>, arch: ModelArchitecture<C>, config: C, opts: CalibratedWriteOptions): WrittenCheckpoint {
  const ctx = { backend: opts.backend, device: 0, dtype: 'f32' as const, registry: opts.registry };
  const model = withContext(ctx, () => arch.build(ctx, config));
  try {
    const rules = arch.weightRules(config);
    initWeightsRandom(model, rules, opts.seed, { rank: 0, world: 1 });
    if (needsCalibration(model)) withContext(ctx, () => model.calibrate(opts.seed));
    const params = loadableParameters(model, rules);
    const plan = uniqueTensors(planWeights(model, rules, { rank: 0, world: 1 }));
    return writeCheckpoint(outDir, raw, plan, { dtype: opts.dtype, ...(opts.configPath ? { configPath: opts.configPath } : {}) }, (m) => {
      const p = params.get(m.target)!;
      if (m.rowOffset !== 0 || p.numel !== m.shape.reduce((a, b) => a * b, 1)) throw new Error(`writeCalibratedCheckpoint: ${m.hfName} is a part of ${m.target}; stacked parameters are not supported here`);
      return encodeValues(p.toFloat64Array(), opts.dtype);
    });
  } finally {
    model.dispose();
  }
}
