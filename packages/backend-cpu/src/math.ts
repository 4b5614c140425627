/** Scalar float64 functions the ops need that JavaScript's Math lacks: they live in core's op registry now (one copy). */
export { erf, erfc, geluErf, geluTanh, silu } from '@fastkernels/core';
