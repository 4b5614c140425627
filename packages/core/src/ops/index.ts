/**
 * The op vocabulary (growth.md §1): the registry and one file per op group. Importing this module declares every op.
 * Groups add themselves here: one `export *` line and one spread into F. See docs/ops.md.
 */
export * from './registry.js';
export * from './promote.js';
export * from './broadcast.js';
export * from './scalar-math.js';
export * from './elementwise.js';
export * from './reduction.js';
export * from './layout.js';
export * from './norm.js';
export * from './matmul.js';
export * from './conv.js';
export * from './attention.js';
export * from './quant.js';
export * from './recurrent.js';
export * from './arange.js';

import { elementwiseFunctions } from './elementwise.js';
import { reductionFunctions } from './reduction.js';
import { layoutFunctions } from './layout.js';
import { normFunctions } from './norm.js';
import { matmulFunctions } from './matmul.js';
import { convFunctions } from './conv.js';
import { attentionFunctions } from './attention.js';
import { quantFunctions } from './quant.js';
import { recurrentFunctions } from './recurrent.js';

/**
 * Typed front ends named like torch / torch.nn.functional (camelCase), thin wrappers over callOp:
 * `F.gelu(x, { approximate: 'tanh' })`, `F.softmax(x, { dim: -1 })`, `F.layerNorm(x, [H], w, b, 1e-5)`.
 */
export const F = Object.freeze({
  ...elementwiseFunctions,
  ...reductionFunctions,
  ...layoutFunctions,
  ...normFunctions,
  ...matmulFunctions,
  ...convFunctions,
  ...attentionFunctions,
  ...quantFunctions,
  ...recurrentFunctions,
});
