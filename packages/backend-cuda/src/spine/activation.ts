import type { SpineContext } from './context.js';
import { notYet } from './context.js';

export function siluAndMul(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('siluAndMul');
}

export function geluAndMul(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('geluAndMul');
}

