import type { SpineContext } from './context.js';
import { notYet } from './context.js';

export function storeKvcache(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('storeKvcache');
}

