/**
 * One entry for every command: a model folder (config.json + safetensors, or config.json alone: seeded random
 * weights) -> its architecture from the model registry, the module tree built in the context, the weights loaded or
 * drawn through the tree's parameter plan. Under tensor parallelism (a group of world > 1 current) the tree is this
 * rank's shard and each checkpoint tensor is read as this rank's slice only.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { TensorParallelGroup, UserError, currentTensorParallelGroup, withContext, withTensorParallelGroup, type Backend, type DType, type ExecutionContext, type ModuleRegistry } from '@fastkernels/core';
import type { CausalLM } from '../engine/model-runner.js';
import type { EncoderModel } from '../engine/encoder-runner.js';
import type { VisionModel } from '../engine/vision-model.js';
import { llamaArchitecture } from '../families/dense-moe-llm/model.js';
import { mixtralArchitecture, qwen3MoeArchitecture } from '../families/dense-moe-llm/moe/model.js';
import { gptOssArchitecture } from '../families/dense-moe-llm/gpt-oss/model.js';
import { bgeM3Architecture, colbertArchitecture } from '../families/recsys-specialized/model.js';
import { clipTextArchitecture, fluxPipelineArchitecture, t5EncoderArchitecture } from '../families/vision-video-audio/model.js';
import { yolov10Architecture } from '../families/edge-detection/model.js';
import { convnextv2Architecture } from '../families/edge-detection/convnextv2/model.js';
import { glaArchitecture } from '../families/linear-attention/model.js';
import { qwen3NextArchitecture } from '../families/linear-attention/qwen3-next-model.js';
import { kimiLinearArchitecture } from '../families/linear-attention/kimi-linear-model.js';
import { writeRandomCheckpoint, type WrittenCheckpoint } from '../weights/checkpoint-writer.js';
import { calibratesRandomWeights, needsCalibration, writeCalibratedCheckpoint } from './vision-checkpoint.js';
import { loadWeights } from '../weights/load-weights.js';
import { metaBackend } from '../weights/meta-backend.js';
import { initWeightsOnDevice, initWeightsRandom } from '../weights/random-init.js';
import { Checkpoint } from '../weights/safetensors.js';
import { planWeights, type TensorParallelRank, type WeightMapping } from '../weights/weight-plan.js';
import { ModelRegistry, resolveConfigFile, type DecoderGeometry, type ModelArchitecture, type ResolvedConfig } from './registry.js';

/** The architectures model-zoo ships. A test or plugin adds its own to a child (modelRegistry.child().register(...)). */
export const modelRegistry = new ModelRegistry([llamaArchitecture, mixtralArchitecture, qwen3MoeArchitecture, gptOssArchitecture, bgeM3Architecture, colbertArchitecture, glaArchitecture, qwen3NextArchitecture, kimiLinearArchitecture, yolov10Architecture, convnextv2Architecture, t5EncoderArchitecture, clipTextArchitecture, fluxPipelineArchitecture]);

/** Read and resolve a config.json through the model registry (default: the shipped architectures). */
export function loadModelConfig(file: string, models: ModelRegistry = modelRegistry): ResolvedConfig {
  return resolveConfigFile(file, models);
}

/** config.json of a model folder, resolved; a UserError naming --model when the folder has none. */
export function loadModelFolderConfig(dir: string, models: ModelRegistry = modelRegistry): ResolvedConfig {
  const file = join(dir, 'config.json');
  if (!existsSync(file)) throw new UserError(`no config.json in ${dir}`, { field: '--model', fix: 'pass a folder with an HF config.json (and safetensors weights)' });
  return loadModelConfig(file, models);
}

/** The config splits over `world` ranks (a UserError naming the config field otherwise). Returns the resolved config. */
export function checkModelTensorParallel(dir: string, world: number, models: ModelRegistry = modelRegistry): ResolvedConfig {
  const r = loadModelFolderConfig(dir, models);
  checkSplits(r, world);
  return r;
}

function checkSplits(r: ResolvedConfig, world: number): void {
  if (world === 1) return;
  if (!r.architecture.checkTensorParallel) throw new UserError(`${r.architecture.name} models do not run tensor parallel yet`, { field: '--tp', fix: 'drop --tp' });
  r.architecture.checkTensorParallel(r.config, world, r.file);
}

export interface LoadModelOptions {
  readonly backend: Backend;
  /** Resolves the module tree's tasks (the baselines, or a candidate set). */
  readonly registry: ModuleRegistry;
  /** The architectures to resolve the folder with (default: modelRegistry). */
  readonly models?: ModelRegistry;
  readonly device?: number;
  /** Model dtype; defaults to the config's, else bf16. */
  readonly dtype?: DType;
  /** Seed of the random weights when the folder has none (default 0, as init-weights). */
  readonly initSeed?: number;
  /**
   * Random weights even when the folder has a checkpoint: 'host' = initWeightsRandom (the values init-weights writes
   * for the seed), 'device' = initWeightsOnDevice (tiled from seeded pools by device copies: seconds for an 8B model,
   * values differ from init-weights'). Unset: the checkpoint, else 'host'.
   */
  readonly randomInit?: 'host' | 'device';
}

export interface LoadedModel<C = unknown, M = CausalLM> {
  readonly model: M;
  readonly architecture: ModelArchitecture<C>;
  /** The family's parsed config (the architecture's type). */
  readonly config: C;
  /** config.json's model_type, else the architecture's name. */
  readonly modelType: string;
  /** What the engine sizes itself by. */
  readonly geometry: DecoderGeometry;
  readonly ctx: ExecutionContext;
  readonly weights: 'checkpoint' | 'random' | 'random-device';
  readonly dir: string;
  /** Milliseconds spent filling the weights (load or init). */
  readonly weightsMs: number;
}

/**
 * Build the decoder model of a folder and fill its weights (see the file comment). An encoder (embedding) model is a
 * UserError pointing at `embed` / serve's /v1/embeddings: generation and the decoder commands do not run it.
 */
export function loadModel(dir: string, opts: LoadModelOptions): LoadedModel {
  const resolved = loadModelFolderConfig(dir, opts.models);
  if (resolved.architecture.runner !== 'decoder-llm') {
    throw new UserError(`${dir} is an ${resolved.architecture.runner} model (${resolved.architecture.name}): it does not generate text`, {
      field: '--model',
      fix: resolved.architecture.runner === 'encoder' ? 'embed it with `fastkernels embed --model DIR`, or serve it and POST /v1/embeddings' : 'use a decoder LLM folder',
    });
  }
  return buildAndLoad(dir, resolved, opts) as LoadedModel;
}

/** Build the encoder (embedding) model of a folder and fill its weights; a UserError for any other kind of model. */
export function loadEncoderModel(dir: string, opts: LoadModelOptions): LoadedModel<unknown, EncoderModel> {
  const resolved = loadModelFolderConfig(dir, opts.models);
  if (resolved.architecture.runner !== 'encoder') {
    throw new UserError(`${dir} is a ${resolved.architecture.runner} model (${resolved.architecture.name}), not an encoder: it has no embeddings`, { field: '--model', fix: 'pass an encoder / embedding model folder (e.g. BGE-M3)' });
  }
  return buildAndLoad(dir, resolved, opts) as LoadedModel<unknown, EncoderModel>;
}

/**
 * Build the vision model of a folder (runner 'vision': YOLOv10, ConvNeXtV2) and fill its weights, unfused (random
 * weights calibrated, as init-weights writes them); a UserError otherwise.
 */
export function loadVisionModel(dir: string, opts: LoadModelOptions): LoadedModel<unknown, VisionModel> {
  const resolved = loadModelFolderConfig(dir, opts.models);
  if (resolved.architecture.runner !== 'vision') {
    throw new UserError(`${dir} is a ${resolved.architecture.runner} model (${resolved.architecture.name}), not a vision model`, { field: '--model', fix: 'pass a vision model folder (e.g. YOLOv10)' });
  }
  const loaded = buildAndLoad(dir, resolved, opts) as LoadedModel<unknown, VisionModel>;
  if (loaded.weights !== 'checkpoint' && needsCalibration(loaded.model)) withContext(loaded.ctx, () => loaded.model.calibrate!(opts.initSeed ?? 0));
  return loaded;
}

function buildAndLoad(dir: string, resolved: ResolvedConfig, opts: LoadModelOptions): LoadedModel<unknown, CausalLM | EncoderModel | VisionModel> {
  const { architecture: arch, config, geometry, modelType } = resolved;
  // A config that does not split over the group is a UserError naming its field, before anything is built.
  checkSplits(resolved, currentTensorParallelGroup().world);
  const dtype = opts.dtype ?? arch.dtype(config) ?? 'bf16';
  const ctx: ExecutionContext = { backend: opts.backend, device: opts.device ?? 0, dtype, registry: opts.registry };
  // pipelines load per component (loadPipelineModel); the runners here never build one
  const model = arch.build(ctx, config) as Exclude<ReturnType<typeof arch.build>, import('../engine/pipeline-model.js').PipelineModel>;
  try {
    const rules = arch.weightRules(config);
    const t0 = performance.now();
    const mode = opts.randomInit ?? (Checkpoint.exists(dir) ? 'checkpoint' : 'host');
    if (mode === 'checkpoint') loadWeights(model, rules, dir);
    else if (mode === 'device') initWeightsOnDevice(model, rules, opts.initSeed ?? 0);
    else initWeightsRandom(model, rules, opts.initSeed ?? 0);
    opts.backend.synchronize(ctx.device);
    const weights = mode === 'checkpoint' ? 'checkpoint' : mode === 'device' ? 'random-device' : 'random';
    return { model, architecture: arch, config, modelType, geometry, ctx, weights, dir, weightsMs: performance.now() - t0 };
  } catch (e) {
    model.dispose();
    throw e;
  }
}

/**
 * The weight plan of a config at a tensor-parallel rank, from its module tree built on the meta backend (no memory):
 * which checkpoint tensors exist, their shapes, and which slice the rank reads (the rank's rows of a stacked
 * parameter at their offsets in the rank's shard).
 */
export function weightPlanFor<C>(arch: ModelArchitecture<C>, config: C, registry: ModuleRegistry, tp: TensorParallelRank = { rank: 0, world: 1 }): WeightMapping[] {
  // The whole model at world 1 (no tensor-parallel layer classes needed), then each tensor cut for the rank.
  return withTensorParallelGroup(TensorParallelGroup.single(), () => {
    const model = arch.build({ backend: metaBackend(), device: 0, dtype: 'f32', registry }, config);
    return planWeights(model, arch.weightRules(config), tp, 'full');
  });
}

export interface RandomCheckpointOptions {
  readonly seed: number;
  readonly dtype: DType;
  /** Resolves the module tree's tasks (the baselines): the tree is only enumerated, on the meta backend. */
  readonly registry: ModuleRegistry;
  /** Tile from seeded pools (the weights `--random-init device` draws): fast for 8B-size checkpoints. */
  readonly tiled?: boolean;
  readonly models?: ModelRegistry;
  /** Where the raw config came from: named in errors, and copied as is when it already records the dtype. */
  readonly configPath?: string;
  /** A backend to calibrate on: models that calibrate random weights (VisionModel.calibrate) are written calibrated. */
  readonly calibrateOn?: Backend;
}

/**
 * A seeded random checkpoint for a raw config (OUT/config.json + OUT/model.safetensors) in the checkpoint naming of
 * its architecture, enumerated from its module tree (the plan loading reads back).
 */
export function writeRandomModelCheckpoint(outDir: string, raw: Record<string, unknown>, opts: RandomCheckpointOptions): WrittenCheckpoint & { architecture: string; modelType: string } {
  const models = opts.models ?? modelRegistry;
  const file = opts.configPath ?? 'config.json';
  const arch = models.resolve(raw, file);
  const config = arch.parseConfig(raw, file);
  const plan = weightPlanFor(arch, config, opts.registry);
  if (opts.calibrateOn && calibratesRandomWeights(arch, config, opts.registry)) {
    const w = writeCalibratedCheckpoint(outDir, raw, arch, config, { seed: opts.seed, dtype: opts.dtype, registry: opts.registry, backend: opts.calibrateOn, ...(opts.configPath ? { configPath: opts.configPath } : {}) });
    return { ...w, architecture: arch.name, modelType: typeof raw.model_type === 'string' ? raw.model_type : arch.name };
  }
  const { initStd: std, init, draws } = arch.weightRules(config);
  const w = writeRandomCheckpoint(outDir, raw, plan, { seed: opts.seed, dtype: opts.dtype, std, ...(init ? { init } : {}), ...(draws ? { draws } : {}), ...(opts.configPath ? { configPath: opts.configPath } : {}), ...(opts.tiled ? { tiled: true } : {}) });
  return { ...w, architecture: arch.name, modelType: typeof raw.model_type === 'string' ? raw.model_type : arch.name };
}

/** init-weights: writeRandomModelCheckpoint for a config.json file. */
export function writeInitCheckpoint(configPath: string, outDir: string, opts: Omit<RandomCheckpointOptions, 'configPath'>): ReturnType<typeof writeRandomModelCheckpoint> {
  const r = loadModelConfig(configPath, opts.models);
  return writeRandomModelCheckpoint(outDir, r.raw, { ...opts, configPath });
}
