/**
 * The projections of the Llama modules, built through the registry: L1/linear (world 1) returns the output tensor,
 * vLLM's parallel layers (world > 1: L2/qkv_parallel_linear, L2/row_parallel_linear, ...) return [output, outputBias]
 * as vLLM's do. project() takes the output of either. A candidate for L1/linear therefore runs in these projections
 * at world 1 only; at world > 1 candidates for the L2 parallel-linear tasks (and L1/allreduce) take its place.
 */
import { Tensor, type Module } from '@fastkernels/core';

export interface Projection extends Module {
  forward(x: Tensor): Tensor | readonly [Tensor, Tensor | null];
}

export function project(p: Projection, x: Tensor): Tensor {
  const r = p.forward(x);
  return r instanceof Tensor ? r : r[0];
}
