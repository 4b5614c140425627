/**
 * topk_softmax on CUDA: one launch of kernels/moe_topk_softmax.cu (a lane group a token row: softmax, k rounds of a
 * group argmax, renormalisation, both outputs written), specialised by NVRTC for the logits' dtype, E, k and the lanes
 * a row (topk-softmax-plan.ts). The grid comes from shapes alone and nothing is read back, so a decode step's routing
 * is one launch a MoE layer and can be captured in a CUDA graph (the op's decomposition: softmax, topk, sum, div and a
 * cast, five). Logits whose experts are strided are copied contiguous first (a device copy); any row stride is read in
 * place. Declines (the registry then runs the decomposition) f64 logits and what the plan leaves out.
 */
import { Tensor, type DType, type OpCall, type TopkSoftmaxAttrs } from '@fastkernels/core';
import type { ArgType, ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { GenKernelCache } from '../gen-cache.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { TOPK_SOFTMAX_THREADS, planTopkSoftmax } from './topk-softmax-plan.js';

/** logits, weights, ids; T, row_stride, renormalize */
export const TOPK_SOFTMAX_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'i32', 'i64', 'i32'];

const CTYPE: Partial<Record<DType, string>> = { f32: 'float', bf16: '__nv_bfloat16', f16: '__half' };

export interface TopkSoftmaxVariant {
  readonly dtype: 'f32' | 'bf16' | 'f16';
  readonly experts: number;
  readonly k: number;
  readonly lanes: number;
}

/** The embedded kernel with its specialisation prepended as #defines (the cubin cache keys on the whole source). */
export function topkSoftmaxSource(v: TopkSoftmaxVariant): GeneratedKernel {
  const source = KERNEL_SOURCES['moe_topk_softmax.cu'];
  if (source === undefined) throw new Error('kernel source moe_topk_softmax.cu is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)');
  const defines = `#define FK_T ${CTYPE[v.dtype]}\n#define FK_E ${v.experts}\n#define FK_K ${v.k}\n#define FK_LANES ${v.lanes}\n`;
  return { source: `${defines}${source}`, entry: 'fk_moe_topk_softmax', signature: TOPK_SOFTMAX_SIGNATURE };
}

export class TopkSoftmaxKernel {
  private readonly args: ArgValue[] = new Array<ArgValue>(TOPK_SOFTMAX_SIGNATURE.length).fill(0);

  constructor(private readonly cache: GenKernelCache) {}

  readonly supports = (call: OpCall<TopkSoftmaxAttrs>): true | string => {
    const x = call.inputs[0] as Tensor;
    if (CTYPE[x.dtype] === undefined) return `${x.dtype} logits: the kernel reads f32, bf16 and f16`;
    const plan = planTopkSoftmax(x.shape[0]!, x.shape[1]!, call.attrs.k);
    return typeof plan === 'string' ? plan : true;
  };

  readonly run = (call: OpCall<TopkSoftmaxAttrs>): Tensor[] => {
    const x0 = call.inputs[0] as Tensor;
    const [T, E] = x0.shape as [number, number];
    const { k, renormalize } = call.attrs;
    const dev = { device: x0.device };
    const outs = call.outputs.map((m) => Tensor.empty(call.backend, m.shape, m.dtype, dev));
    if (T === 0) return outs;
    const [weights, ids] = outs as [Tensor, Tensor];
    const plan = planTopkSoftmax(T, E, k);
    if (typeof plan === 'string') throw new Error(`topk_softmax: ${plan}`); // supports declined it first
    const direct = x0.strides[1] === 1 || E === 1;
    const x = direct ? x0 : x0.contiguous();
    try {
      const g = this.args;
      let i = 0;
      g[i++] = x; g[i++] = weights; g[i++] = ids;
      g[i++] = T; g[i++] = x.strides[0]!; g[i++] = renormalize ? 1 : 0;
      this.kernel({ dtype: x.dtype as TopkSoftmaxVariant['dtype'], experts: E, k, lanes: plan.lanes }).launch(plan.grid, TOPK_SOFTMAX_THREADS, 0, g);
    } catch (e) {
      for (const t of outs) t.dispose();
      throw e;
    } finally {
      if (!direct) x.dispose();
    }
    return outs;
  };

  private kernel(v: TopkSoftmaxVariant): CudaKernel {
    return this.cache.kernel(`topk_softmax ${v.dtype} E${v.experts} k${v.k} lanes${v.lanes}`, () => topkSoftmaxSource(v), 'moe_topk_softmax');
  }
}
