import { hostArray, type HostArray, type TaskCaseInput } from '@fastkernels/core';
import { defineL1OpTask, type L1OpTaskInit, type OpTaskDefinition } from '../../define-op-task.js';

/** A float64 elementwise function and its reference over a whole array. */
export const elementwiseReference =
  (f: (v: number) => number) =>
  (x: HostArray): HostArray =>
    hostArray(x.shape, x.data.map(f));

/**
 * A parameterless, attribute-free elementwise activation over one op of the registry (relu, sigmoid, silu, ...): what
 * differs between them is the op, the names, where they are used and the float64 function. Input [T, D] unless a
 * family's production shape needs another layout; two CI cases (odd f32 widths, bf16) unless given.
 */
export function defineUnaryActivationTask(
  op: string,
  t: Pick<L1OpTaskInit, 'id' | 'className' | 'mirrors' | 'description' | 'architectures' | 'baseline' | 'inputScale' | 'flopsPerElement'> & {
    readonly f: (v: number) => number;
    readonly production: readonly TaskCaseInput[];
    readonly shape?: readonly string[];
    readonly ci?: readonly TaskCaseInput[];
  },
): OpTaskDefinition {
  const reference = elementwiseReference(t.f);
  const ci: readonly TaskCaseInput[] = t.ci ?? [
    { name: 'small', dtype: 'f32', dims: { T: 7, D: 129 }, init: [] },
    { name: 'small-bf16', dtype: 'bf16', dims: { T: 5, D: 64 }, init: [] },
  ];
  return defineL1OpTask(op, {
    id: t.id,
    className: t.className,
    mirrors: t.mirrors,
    description: t.description,
    architectures: t.architectures,
    baseline: t.baseline,
    init: [],
    forward: { input: { shape: t.shape ?? ['T', 'D'] } },
    params: {},
    attrs: () => ({}),
    cases: { ci, production: t.production },
    reference: ([x]) => [reference(x!)],
    ...(t.inputScale !== undefined ? { inputScale: t.inputScale } : {}),
    ...(t.flopsPerElement !== undefined ? { flopsPerElement: t.flopsPerElement } : {}),
  });
}
