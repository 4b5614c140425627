/**
 * The layers in the module registry. Each layer has an id (`nn.Linear`); one that an L1 task mirrors also names that
 * task (`nn.LayerNorm` -> `L1/layer_norm`), so a candidate for the task replaces the layer in every tree built with
 * createLayer. createLayer resolves, in order: the task id, the layer id, the built-in class (a registry that knows
 * neither still builds the tree).
 */
import { currentContext, hasContext, type ModuleRegistry } from '@fastkernels/core';
import { GELU, QuickGELU, ReLU, SiLU, Sigmoid, Tanh } from './activation.js';
import { Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d } from './conv.js';
import { Dropout, Identity } from './dropout.js';
import { Embedding } from './embedding.js';
import { Linear } from './linear.js';
import { BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm, RMSNorm } from './norm.js';
import { AdaptiveAvgPool2d, AvgPool2d, Flatten, MaxPool2d } from './pooling.js';

/** Every layer class createLayer builds, by torch.nn name. */
export const LAYERS = {
  Linear, Embedding, Dropout, Identity,
  Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
  LayerNorm, GroupNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, RMSNorm,
  GELU, SiLU, ReLU, Sigmoid, Tanh, QuickGELU,
  MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten,
} as const;
export type LayerName = keyof typeof LAYERS;
type LayerClass<K extends LayerName> = (typeof LAYERS)[K];

/**
 * The L1 task each layer is the baseline of, where the task's interface is the torch.nn layer's (same constructor,
 * same forward). Layers whose task mirrors another production module (vLLM's RMSNorm, Linear) are not listed.
 */
export const LAYER_TASKS: Partial<Record<LayerName, string>> = {
  LayerNorm: 'L1/layer_norm',
  GroupNorm: 'L1/group_norm',
  GELU: 'L1/gelu',
  Conv2d: 'L1/conv2d',
  BatchNorm2d: 'L1/batch_norm2d',
  MaxPool2d: 'L1/max_pool2d',
  SiLU: 'L1/silu',
  Sigmoid: 'L1/sigmoid',
  QuickGELU: 'L1/quickgelu',
};

/** The registry id of a layer: `nn.<Name>`. */
export const layerId = (name: LayerName): string => `nn.${name}`;

/** Register every layer under its `nn.<Name>` id (a root registry; tasks are registered separately). */
export function registerLayers(registry: ModuleRegistry): ModuleRegistry {
  for (const [name, cls] of Object.entries(LAYERS)) registry.registerModule(layerId(name as LayerName), cls);
  return registry;
}

/**
 * Build a layer through the current context's registry (late-bound, so candidates apply), with PyTorch's constructor
 * arguments: `createLayer('Conv2d', 3, 16, 3, 1, 1)`. The class returned may be a candidate's with the same interface.
 */
export function createLayer<K extends LayerName>(name: K, ...args: ConstructorParameters<LayerClass<K>>): InstanceType<LayerClass<K>> {
  const cls = LAYERS[name] as unknown as new (...a: unknown[]) => InstanceType<LayerClass<K>>;
  if (!(name in LAYERS)) throw new RangeError(`createLayer: unknown layer '${String(name)}' (known: ${Object.keys(LAYERS).join(', ')})`);
  if (!hasContext()) return new cls(...args);
  const registry = currentContext().registry;
  const task = LAYER_TASKS[name];
  if (task && registry.has(task)) return registry.create<InstanceType<LayerClass<K>>>(task, ...args);
  if (registry.has(layerId(name))) return registry.create<InstanceType<LayerClass<K>>>(layerId(name), ...args);
  return new cls(...args);
}
