/**
 * Weight rules for a tree of layers: names are the tree's parameter paths as they are (PyTorch's state_dict names), so
 * a plain torch.nn model's safetensors load with no renames. BatchNorm's integer num_batches_tracked (a training
 * counter) is in every PyTorch checkpoint and unused here.
 */
import type { WeightRules } from '../weights/weight-plan.js';

/** Checkpoint tensors of torch.nn layers that inference never reads. */
export const LAYER_CHECKPOINT_IGNORE: readonly RegExp[] = [/(^|\.)num_batches_tracked$/];

/** Norm-layer parameters random init draws as 1 + noise (LayerNorm / GroupNorm / BatchNorm / RMSNorm weights, running_var). */
export const LAYER_NORM_PARAMS = /(^|\.)((norm|ln|bn|layernorm|layer_norm|batchnorm|groupnorm)[^.]*\.weight|running_var)$/;

/** WeightRules for a module tree built from layers, with a family's own additions (renames, stacking, ...). */
export function layerWeightRules(label: string, extra: Partial<Omit<WeightRules, 'label'>> = {}): WeightRules {
  return {
    initStd: 0.02,
    norms: LAYER_NORM_PARAMS,
    ...extra,
    label,
    ignore: [...LAYER_CHECKPOINT_IGNORE, ...(extra.ignore ?? [])],
  };
}
