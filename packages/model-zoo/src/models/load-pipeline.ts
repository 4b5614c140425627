/**
 * Load a pipeline folder (runner 'pipeline'; diffusers' layout): model_index.json names the pipeline class, the model
 * registry resolves it (an architecture lists the class in `architectures`), its parseConfig reads the component
 * configs, and each component's weights load from its own sub-folder (safetensors there, else seeded random weights,
 * a different seed per component). Tokenizers and other assets load after the weights (PipelineModel.loadAssets).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError, type ExecutionContext } from '@fastkernels/core';
import { isPipelineModel, type PipelineModel } from '../engine/pipeline-model.js';
import { writeRandomCheckpoint } from '../weights/checkpoint-writer.js';
import { loadWeights } from '../weights/load-weights.js';
import { initWeightsRandom } from '../weights/random-init.js';
import { Checkpoint } from '../weights/safetensors.js';
import { planWeights } from '../weights/weight-plan.js';
import { modelRegistry, type LoadModelOptions } from './load-model.js';
import type { ModelArchitecture, ModelRegistry } from './registry.js';

export interface LoadedPipeline<C = unknown> {
  readonly model: PipelineModel;
  readonly architecture: ModelArchitecture<C>;
  readonly config: C;
  readonly ctx: ExecutionContext;
  /** Where each component's weights came from. */
  readonly weights: Readonly<Record<string, 'checkpoint' | 'random'>>;
  readonly dir: string;
  readonly weightsMs: number;
}

/** model_index.json of a folder, resolved to its architecture and parsed (which reads the component configs). */
export function loadPipelineConfig(dir: string, models: ModelRegistry = modelRegistry): { architecture: ModelArchitecture<unknown>; config: unknown; file: string } {
  const file = join(dir, 'model_index.json');
  if (!existsSync(file)) throw new UserError(`no model_index.json in ${dir}`, { field: '--model', fix: 'pass a diffusers pipeline folder (model_index.json, transformer/, vae/, text_encoder/, ...)' });
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UserError(`${file} is not valid JSON: ${(e as Error).message}`);
  }
  const cls = (raw as { _class_name?: unknown } | null)?._class_name;
  if (typeof cls !== 'string') throw new UserError(`invalid field _class_name in ${file}: expected the pipeline's class name (a string)`, { field: '_class_name' });
  const architecture = models.resolve({ architectures: [cls] }, file);
  if (architecture.runner !== 'pipeline') throw new UserError(`${file} names ${cls}, which is a ${architecture.runner} model, not a pipeline`, { field: '_class_name' });
  return { architecture, config: architecture.parseConfig(raw, file), file };
}

/** Build a pipeline folder's model and fill each component's weights (see the file comment). */
export function loadPipelineModel(dir: string, opts: LoadModelOptions): LoadedPipeline {
  const { architecture: arch, config } = loadPipelineConfig(dir, opts.models);
  const dtype = opts.dtype ?? arch.dtype(config) ?? 'bf16';
  const ctx: ExecutionContext = { backend: opts.backend, device: opts.device ?? 0, dtype, registry: opts.registry };
  const model = arch.build(ctx, config);
  try {
    if (!isPipelineModel(model)) throw new Error(`${arch.name}: build() did not return a PipelineModel`);
    const t0 = performance.now();
    const weights: Record<string, 'checkpoint' | 'random'> = {};
    model.components().forEach((c, i) => {
      const sub = join(dir, c.name);
      const fromCheckpoint = opts.randomInit === undefined && Checkpoint.exists(sub);
      if (fromCheckpoint) loadWeights(c.module, c.rules, sub);
      else initWeightsRandom(c.module, c.rules, (opts.initSeed ?? 0) + i);
      weights[c.name] = fromCheckpoint ? 'checkpoint' : 'random';
    });
    opts.backend.synchronize(ctx.device);
    const weightsMs = performance.now() - t0;
    model.loadAssets(dir);
    return { model, architecture: arch, config, ctx, weights, dir, weightsMs };
  } catch (e) {
    model.dispose();
    throw e;
  }
}

/**
 * Seeded random safetensors for every component of a built pipeline, each in its folder under `outDir` in the
 * checkpoint's names (the values loadPipelineModel draws for the same seed without a checkpoint).
 */
export function writeRandomPipelineCheckpoint(model: PipelineModel, outDir: string, seed: number, dtype: ExecutionContext['dtype']): string[] {
  return model.components().map((c, i) => {
    const sub = join(outDir, c.name);
    const raw = existsSync(join(sub, 'config.json')) ? (JSON.parse(readFileSync(join(sub, 'config.json'), 'utf8')) as Record<string, unknown>) : {};
    writeRandomCheckpoint(sub, raw, planWeights(c.module, c.rules), { seed: seed + i, dtype, std: c.rules.initStd, configPath: join(sub, 'config.json') });
    return sub;
  });
}
