import type { SpineContext } from './context.js';
import { notYet } from './context.js';

export function rmsNorm(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('rmsNorm');
}

export function fusedAddRmsNorm(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('fusedAddRmsNorm');
}

