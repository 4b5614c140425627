/**
 * The copies the matmul kernels make (an operand cuBLASLt cannot address, baddbmm's input broadcast into the output,
 * einsum's permuted operands and result) on the generated elementwise kernels: an identity expression per dtype, so a
 * copy whose innermost dim is contiguous moves 16-byte vectors (CudaOps.copy is the scalar fk_copy, about half the
 * bandwidth on FLUX's [24, 4096, 4096] mask broadcast). Ranks beyond the generated kernels' limit take CudaOps.copy.
 */
import type { DType, Tensor } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import { ElementwiseRunner } from '../elementwise.js';
import { MAX_EW_RANK } from '../elementwise-source.js';
import type { GenKernelCache } from '../gen-cache.js';
import { singleOpExpr } from '../translate.js';

export class GeneratedCopy {
  private readonly runners = new Map<DType, ElementwiseRunner>();
  private readonly ins: Tensor[] = [];

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /** dst = src: equal shapes and dtypes, any strides (src may broadcast by stride 0). */
  copy(dst: Tensor, src: Tensor): void {
    if (dst.numel === 0) return;
    if (dst.rank > MAX_EW_RANK) {
      dst.backend.ops.copy(dst, src);
      return;
    }
    let r = this.runners.get(dst.dtype);
    if (!r) this.runners.set(dst.dtype, (r = new ElementwiseRunner(singleOpExpr('to', { dtype: dst.dtype }, ['tensor']), this.cache, this.runtime)));
    this.ins[0] = src;
    try {
      r.run(dst, this.ins);
    } finally {
      this.ins.length = 0;
    }
  }
}
