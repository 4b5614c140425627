import type { SpineContext } from './context.js';
import { notYet } from './context.js';

export function pagedDecodeAttention(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('pagedDecodeAttention');
}

export function varlenPrefillAttention(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('varlenPrefillAttention');
}

