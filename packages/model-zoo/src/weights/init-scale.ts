/**
 * How seeded random init draws each checkpoint tensor. Two modes (WeightRules.init):
 *
 * - fixed (the default): every matrix and bias N(0, initStd^2), norm weights 1 + N(0, initStd^2), as HF's
 *   initializer_range. Right for transformers, whose widths are uniform and whose norms rescale every block.
 * - fan-in: a freshly initialised torch model, scaled so depth does not shrink or blow up the activations: conv / linear
 *   weights N(0, (gain / sqrt(fan_in))^2) (kaiming_normal; fan_in = size(1) x receptive field, as
 *   torch.nn.init._calculate_fan_in_and_fan_out), their biases U(-1 / sqrt(fan_in), 1 / sqrt(fan_in)) (torch's default),
 *   norm layers at weight 1 / bias 0 and BatchNorm's running statistics at mean 0 / var 1. One std for every tensor of a
 *   conv net makes it degenerate (the spread of a layer's output grows or shrinks with its fan-in, so scores saturate or
 *   stop depending on the input); per-fan-in scaling keeps each layer's output O(1).
 *
 * Each tensor's values depend only on the seed, its checkpoint name and this draw, so init-weights' checkpoint and
 * random init in memory agree.
 */
import { numel } from '@fastkernels/core';
import type { WeightMapping, WeightRules } from './weight-plan.js';

/**
 * One tensor's distribution: N(mean, normal^2), U(-uniform, uniform), every element `constant`, or uniform integers in
 * [integers[0], integers[1]) (packed MXFP4 bytes).
 */
export type TensorDraw =
  | { readonly normal: number; readonly mean: number }
  | { readonly uniform: number }
  | { readonly constant: number }
  | { readonly integers: readonly [number, number] };

/** fan_in of a weight as torch computes it: shape[1] times the receptive field (the dims after it). */
export function fanIn(shape: readonly number[]): number {
  return shape.length >= 2 ? Math.max(1, numel(shape.slice(1))) : 1;
}

const siblingWeight = (name: string): string | null => (name.endsWith('.bias') ? `${name.slice(0, -'.bias'.length)}.weight` : name === 'bias' ? 'weight' : null);

/** The draw of every tensor of a plan under the rules (see the file comment); the family's own draws come first. */
export function tensorDraws(plan: readonly Pick<WeightMapping, 'hfName' | 'shape' | 'kind'>[], rules: Pick<WeightRules, 'initStd' | 'init' | 'draws'>): (m: Pick<WeightMapping, 'hfName' | 'shape' | 'kind'>) => TensorDraw {
  const byRules = rulesDraws(plan, rules);
  const own = rules.draws;
  return own ? (m) => own(m) ?? byRules(m) : byRules;
}

function rulesDraws(plan: readonly Pick<WeightMapping, 'hfName' | 'shape' | 'kind'>[], rules: Pick<WeightRules, 'initStd' | 'init'>): (m: Pick<WeightMapping, 'hfName' | 'shape' | 'kind'>) => TensorDraw {
  const std = rules.initStd;
  const init = rules.init;
  if (!init) return (m) => ({ normal: std, mean: m.kind === 'norm' ? 1 : 0 });
  const byName = new Map(plan.map((m) => [m.hfName, m] as const));
  return (m) => {
    if (m.kind === 'norm') return { constant: 1 };
    if (m.kind === 'matrix') return { normal: init.gain / Math.sqrt(fanIn(m.shape)), mean: 0 };
    // a vector: BatchNorm's running_mean, a norm's bias (its weight is a norm weight), or a conv / linear bias
    if (/(^|\.)running_mean$/.test(m.hfName)) return { constant: 0 };
    const w = siblingWeight(m.hfName);
    const owner = w ? byName.get(w) : undefined;
    if (!owner || owner.kind !== 'matrix') return { constant: 0 };
    return { uniform: 1 / Math.sqrt(fanIn(owner.shape)) };
  };
}
