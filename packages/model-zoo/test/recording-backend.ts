/**
 * Test support: the CPU backend with some ops logging their calls, and one optional fused op that composes (the CPU
 * op), declines (returns null, as a CUDA backend with its switch off) or is absent (a backend without it). The fusion
 * tests check which ops a layer called and that the results agree.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import type { Ops } from '@fastkernels/core';

export type FusedMode = 'composes' | 'declines' | 'absent';
type AnyOp = (...args: unknown[]) => unknown;

export class RecordingBackend extends CpuBackend {
  /** The names of the logged ops and of the fused op, in call order. */
  readonly calls: string[] = [];
  constructor(logged: readonly (keyof Ops)[], fused: keyof Ops, mode: FusedMode) {
    super();
    const base = this.ops as unknown as Record<string, AnyOp>;
    const ops: Record<string, AnyOp> = { ...base };
    for (const name of logged) ops[name] = (...a) => (this.calls.push(name), base[name]!(...a));
    if (mode === 'absent') delete ops[fused];
    else ops[fused] = (...a) => (this.calls.push(fused), mode === 'composes' ? base[fused]!(...a) : null);
    (this as { ops: Ops }).ops = ops as unknown as Ops;
  }
}
