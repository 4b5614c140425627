import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { UserError, currentTensorParallelGroup, type Backend, type DType, type ExecutionContext, type ModuleRegistry } from '@fastkernels/core';
import { loadLlamaConfig, type LlamaConfig } from '../families/dense-moe-llm/config.js';
import type { LlamaForCausalLM } from '../families/dense-moe-llm/L4/llama.js';
import { checkLlamaTensorParallel } from '../families/dense-moe-llm/tensor-parallel.js';
import { Checkpoint } from '../weights/safetensors.js';
import { initLlamaWeightsOnDevice, initLlamaWeightsRandom, loadLlamaWeights } from '../weights/llama-weights.js';

export interface LoadModelOptions {
  readonly backend: Backend;
  /** Resolves L4/llama and everything under it (the baselines, or a candidate set). */
  readonly registry: ModuleRegistry;
  readonly device?: number;
  /** Model dtype; defaults to the config's, else bf16. */
  readonly dtype?: DType;
  /** Seed of the random weights when the folder has none (default 0, as init-weights). */
  readonly initSeed?: number;
  /**
   * Random weights even when the folder has a checkpoint: 'host' = initLlamaWeightsRandom (the values
   * init-weights writes for the seed), 'device' = initLlamaWeightsOnDevice (tiled from seeded pools by device
   * copies: seconds for an 8B model, values differ from init-weights'). Unset: the checkpoint, else 'host'.
   */
  readonly randomInit?: 'host' | 'device';
}

export interface LoadedModel {
  readonly model: LlamaForCausalLM;
  readonly config: LlamaConfig;
  readonly ctx: ExecutionContext;
  readonly weights: 'checkpoint' | 'random' | 'random-device';
  readonly dir: string;
  /** Milliseconds spent filling the weights (load or init). */
  readonly weightsMs: number;
}

/**
 * Build a Llama-family model from a folder (config.json + safetensors, or config.json alone: seeded random weights).
 * Under tensor parallelism (a group of world > 1 current) the model is this rank's shard and each checkpoint tensor
 * is read as this rank's slice only.
 */
export function loadLlamaModel(dir: string, opts: LoadModelOptions): LoadedModel {
  const configPath = join(dir, 'config.json');
  if (!existsSync(configPath)) throw new UserError(`no config.json in ${dir}`, { field: '--model', fix: 'pass a folder with an HF config.json (and safetensors weights)' });
  const { config } = loadLlamaConfig(configPath);
  checkLlamaTensorParallel(config, currentTensorParallelGroup().world, configPath);
  const dtype = opts.dtype ?? config.dtype ?? 'bf16';
  const ctx: ExecutionContext = { backend: opts.backend, device: opts.device ?? 0, dtype, registry: opts.registry };
  const model = opts.registry.createIn<LlamaForCausalLM>(ctx, 'L4/llama', config);
  try {
    const t0 = performance.now();
    const mode = opts.randomInit ?? (Checkpoint.exists(dir) ? 'checkpoint' : 'host');
    if (mode === 'checkpoint') loadLlamaWeights(model, config, dir);
    else if (mode === 'device') initLlamaWeightsOnDevice(model, config, opts.initSeed ?? 0);
    else initLlamaWeightsRandom(model, config, opts.initSeed ?? 0);
    opts.backend.synchronize(ctx.device);
    const weights = mode === 'checkpoint' ? 'checkpoint' : mode === 'device' ? 'random-device' : 'random';
    return { model, config, ctx, weights, dir, weightsMs: performance.now() - t0 };
  } catch (e) {
    model.dispose();
    throw e;
  }
}
