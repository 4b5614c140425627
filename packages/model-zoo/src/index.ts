import { ModuleRegistry, TASK_PROVIDER, definePlugin, type TaskProvider } from '@fastkernels/core';
import { denseMoeLlmProvider } from './families/dense-moe-llm/index.js';
import { recsysSpecializedProvider } from './families/recsys-specialized/index.js';
import { edgeDetectionProvider } from './families/edge-detection/index.js';
import { visionVideoAudioProvider } from './families/vision-video-audio/index.js';
import { linearAttentionProvider } from './families/linear-attention/index.js';
import { registerLayers } from './layers/registry.js';
import { sharedTasksProvider, tensorParallelProvider } from './tasks/index.js';

export * from './tasks/index.js';
export * from './families/dense-moe-llm/index.js';
export * from './families/recsys-specialized/index.js';
export * from './families/edge-detection/index.js';
export * from './families/vision-video-audio/index.js';
export * from './families/linear-attention/index.js';
export * from './engine/encoder-runner.js';
export * from './engine/vision-model.js';
export * from './engine/vision-preprocess.js';
export * from './engine/vision-runner.js';
export * from './common/inputs.js';
/** The torch.nn mirror: nn.Linear, nn.Conv2d, nn.LayerNorm, nn.Sequential, ... (layers/). */
export * as nn from './layers/index.js';
/** vLLM's tensor-parallel layers (ColumnParallelLinear, RowParallelLinear, ...) over core's TensorParallelGroup. */
export * from './layers/parallel/index.js';
export * from './engine/forward-context.js';
export * from './engine/sequence.js';
export * from './engine/logprobs.js';
export * from './engine/block-manager.js';
export * from './engine/kv-cache.js';
export * from './engine/cache-spec.js';
export * from './engine/state-cache.js';
export * from './engine/state-slots.js';
export * from './engine/recurrent-generate.js';
export * from './engine/model-runner.js';
export * from './engine/generate.js';
export * from './engine/prompt-logits.js';
export * from './models/registry.js';
export * from './models/load-model.js';
export * from './models/load-pipeline.js';
export * from './engine/pipeline-model.js';
export * from './engine/prompts.js';
/** Text in and out: tokenizer.json, chat templates, streaming detokenisation, stop strings. */
export * from './tokenizer/index.js';
export * from './weights/safetensors.js';
export * from './weights/weight-plan.js';
export * from './weights/load-weights.js';
export * from './weights/random-init.js';
export * from './weights/encode.js';
export * from './weights/checkpoint-writer.js';
export * from './weights/meta-backend.js';

/** Every task this package provides: the shared L1 tasks, then each family's own. */
export const taskProviders: readonly TaskProvider[] = [sharedTasksProvider, denseMoeLlmProvider, recsysSpecializedProvider, linearAttentionProvider, visionVideoAudioProvider, edgeDetectionProvider];

/** A root registry holding every task's baseline and every layer (`nn.Linear`, ...). */
export function baselineRegistry(providers: readonly TaskProvider[] = taskProviders): ModuleRegistry {
  const r = registerLayers(new ModuleRegistry());
  for (const p of providers) for (const t of p.tasks()) r.registerTask(t);
  return r;
}

export const modelZooPlugin = definePlugin({
  name: 'model-zoo',
  version: '0.2.0',
  register: (c) => {
    for (const p of [...taskProviders, tensorParallelProvider]) c.register(TASK_PROVIDER, { useValue: p });
  },
});
export * from './engine/scheduler.js';
export * from './engine/device-io.js';
export * from './engine/runner.js';
export * from './engine/memory.js';
export * from './engine/engine.js';
export * from './engine/workloads.js';
export * from './engine/instrument.js';
export * from './engine/e2e.js';
export * from './engine/capture.js';
export * from './engine/pipeline-capture.js';
export * from './engine/pipeline-e2e.js';
export * from './engine/encoder-documents.js';
export * from './engine/encoder-e2e.js';
export * from './engine/encoder-capture.js';
export * from './engine/vision-e2e.js';
export * from './engine/vision-capture.js';
