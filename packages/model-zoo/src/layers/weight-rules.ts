/**
 * Weight rules for a tree of layers: names are the tree's parameter paths as they are (PyTorch's state_dict names), so
 * a plain torch.nn model's safetensors load with no renames. BatchNorm's integer num_batches_tracked (a training
 * counter) is in every PyTorch checkpoint and unused here.
 */
import type { Module } from '@fastkernels/core';
import type { WeightRules } from '../weights/weight-plan.js';
import { BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm, RMSNorm } from './norm.js';

/** Checkpoint tensors of torch.nn layers that inference never reads. */
export const LAYER_CHECKPOINT_IGNORE: readonly RegExp[] = [/(^|\.)num_batches_tracked$/];

const NORM_LAYERS = [LayerNorm, GroupNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, RMSNorm];
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The parameters of a tree that random init draws as 1 + noise (as PyTorch initialises them to 1): the weights of its
 * normalisation layers and BatchNorm's running_var, found by the layers' classes, so any naming works.
 */
export function normParameters(model: Module): RegExp | undefined {
  const names: string[] = [];
  for (const [path, m] of model.namedModules()) {
    if (!NORM_LAYERS.some((cls) => m instanceof cls)) continue;
    const at = path ? `${path}.` : '';
    for (const [k] of m.namedParameters()) if (k === 'weight' || k === 'running_var') names.push(at + k);
  }
  return names.length ? new RegExp(`^(${names.map(escape).join('|')})$`) : undefined;
}

/** WeightRules for a module tree built from layers, with a family's own additions (renames, stacking, ...). */
export function layerWeightRules(label: string, model?: Module, extra: Partial<Omit<WeightRules, 'label'>> = {}): WeightRules {
  const norms = model ? normParameters(model) : undefined;
  return {
    initStd: 0.02,
    ...(norms ? { norms } : {}),
    ...extra,
    label,
    ignore: [...LAYER_CHECKPOINT_IGNORE, ...(extra.ignore ?? [])],
  };
}
