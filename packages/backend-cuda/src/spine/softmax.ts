import type { SpineContext } from './context.js';
import { notYet } from './context.js';

export function softmax(_ctx: SpineContext, ..._args: unknown[]): never {
  return notYet('softmax');
}

