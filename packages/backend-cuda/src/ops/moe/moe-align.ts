/**
 * moe_align on CUDA: one launch of kernels/moe_align.cu (one CTA: per-warp counts, offsets, a stable scatter), planned
 * from shapes alone (moe-align-plan.ts), so a decode step's routing layout costs one launch, no host sync, and can be
 * captured in a CUDA graph. topk_ids are read as i32 or i64 where contiguous (other ints: a graph-safe device copy to
 * i32). Declines (the registry then runs the op's decomposition) only past the kernel's sizes.
 */
import { Tensor, type MoeAlignAttrs, type OpCall } from '@fastkernels/core';
import type { ArgType, ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { GenKernelCache } from '../gen-cache.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { MOE_ALIGN_THREADS, planMoeAlign } from './moe-align-plan.js';

/** topk_ids, sorted, experts, post; n E bs P W */
export const MOE_ALIGN_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32'];

/** The embedded kernel with its index type prepended as a #define (the cubin cache keys on the whole source). */
export function moeAlignSource(index: 'i32' | 'i64'): GeneratedKernel {
  const source = KERNEL_SOURCES['moe_align.cu'];
  if (source === undefined) throw new Error('kernel source moe_align.cu is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)');
  return { source: `#define FK_IDX ${index === 'i64' ? 'long long' : 'int'}\n${source}`, entry: 'fk_moe_align', signature: MOE_ALIGN_SIGNATURE };
}

export class MoeAlignKernel {
  private readonly args: ArgValue[] = new Array<ArgValue>(MOE_ALIGN_SIGNATURE.length).fill(0);

  constructor(private readonly cache: GenKernelCache) {}

  readonly supports = (call: OpCall<MoeAlignAttrs>): true | string => {
    const P = call.outputs[0]!.shape[0]!;
    if (P >= 2 ** 31) return `${P} sorted entries: past the kernel's 32-bit positions`;
    if (planMoeAlign(call.attrs.num_experts) === null) return `${call.attrs.num_experts} experts: one warp's counts exceed 48 KiB of shared memory`;
    return true;
  };

  readonly run = (call: OpCall<MoeAlignAttrs>): Tensor[] => {
    const ids0 = call.inputs[0] as Tensor;
    const { block_size: bs, num_experts: E } = call.attrs;
    const dev = { device: ids0.device };
    const outs = call.outputs.map((m) => Tensor.empty(call.backend, m.shape, m.dtype, dev));
    const [sorted, experts, post] = outs as [Tensor, Tensor, Tensor];
    const plan = planMoeAlign(E)!;
    const direct = (ids0.dtype === 'i32' || ids0.dtype === 'i64') && ids0.isContiguous();
    const ids = direct ? ids0 : ids0.to('i32');
    try {
      const g = this.args;
      let i = 0;
      g[i++] = ids; g[i++] = sorted; g[i++] = experts; g[i++] = post;
      g[i++] = ids.numel; g[i++] = E; g[i++] = bs; g[i++] = sorted.numel; g[i++] = plan.countWarps;
      this.kernel(ids.dtype as 'i32' | 'i64').launch(1, MOE_ALIGN_THREADS, plan.smemBytes, g);
    } catch (e) {
      for (const t of outs) t.dispose();
      throw e;
    } finally {
      if (!direct) ids.dispose();
    }
    return outs;
  };

  private kernel(index: 'i32' | 'i64'): CudaKernel {
    return this.cache.kernel(`moe_align ${index}`, () => moeAlignSource(index), 'moe_align');
  }
}
