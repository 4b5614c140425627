/**
 * The cumulative sequence offsets of a varlen attention batch (varlen_prefill_attention's cu_seqlens_q / cu_seqlens_k),
 * shared by the attention GPU tests (attention.gpu.test.ts, attention-sinks.gpu.test.ts, attention-fa3.gpu.test.ts).
 */
import { Tensor } from '@fastkernels/core';
import { cpu } from './spine-helpers.js';

export interface VarlenOffsets {
  /** [numSeqs + 1] i32 CPU tensors: 0, then the running sums of the query and key lengths */
  readonly cq: Tensor;
  readonly ck: Tensor;
  /** query and key tokens in all (the last offsets) */
  readonly Tq: number;
  readonly Tk: number;
}

/** The offsets of sequences of qLens query tokens and kLens key tokens (the query lengths when absent). */
export function varlenOffsets(qLens: readonly number[], kLens: readonly number[] = qLens): VarlenOffsets {
  const cuQ = [0];
  const cuK = [0];
  qLens.forEach((l, i) => {
    cuQ.push(cuQ.at(-1)! + l);
    cuK.push(cuK.at(-1)! + kLens[i]!);
  });
  return {
    cq: Tensor.fromArray(cpu(), cuQ, [cuQ.length], 'i32'),
    ck: Tensor.fromArray(cpu(), cuK, [cuK.length], 'i32'),
    Tq: cuQ.at(-1)!,
    Tk: cuK.at(-1)!,
  };
}
