/**
 * conv1d / conv2d / conv3d and conv_transpose1d / 2d / 3d as CUDA registry kernels (conv-kernels.ts: cuDNN, else the
 * implicit-GEMM fallback), conv2d_act the same with its activation in the bias pass after cuDNN (or the fallback's epilogue), and the pooling ops (pool.ts: generated, as PyTorch's own CUDA pooling). Registered only for
 * ops core declares; nothing touches CUDA before the first call.
 */
import { hasOp, type OpCall, type OpKernelTable, type Tensor } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { ConvKernels } from './conv-kernels.js';
import { ConvPools, type PoolAttrs } from './pool.js';
import type { PoolKind } from './pool-source.js';
import type { ConvEpilogueAct } from './implicit-gemm-source.js';
import type { ConvAttrsIn, Nd } from './plan.js';

type TransposeAttrs = ConvAttrsIn & { readonly output_padding: number | readonly number[] };
type ConvActAttrs = ConvAttrsIn & { readonly activation: Exclude<ConvEpilogueAct, 'none'> };

export function registerConvKernels(table: OpKernelTable, runtime: () => CudaRuntime, cache: GenKernelCache): ConvKernels {
  const conv = new ConvKernels(runtime, cache);
  for (const nd of [1, 2, 3] as Nd[]) {
    for (const transposed of [false, true]) {
      const name = transposed ? `conv_transpose${nd}d` : `conv${nd}d`;
      if (!hasOp(name)) continue;
      table.register(
        name,
        (call: OpCall<ConvAttrsIn | TransposeAttrs>) => {
          const [x, w, b] = call.inputs as [Tensor, Tensor, Tensor | null];
          return conv.run(nd, transposed, x, w, b ?? null, call.outputs[0]!.shape, call.attrs);
        },
        (call: OpCall<ConvAttrsIn | TransposeAttrs>) => {
          const [x, w] = call.inputs as [Tensor, Tensor];
          return conv.supports(nd, transposed, x, w, call.outputs[0]!.shape, call.attrs);
        },
      );
    }
  }
  if (hasOp('conv2d_act')) {
    table.register(
      'conv2d_act',
      (call: OpCall<ConvActAttrs>) => {
        const [x, w, b] = call.inputs as [Tensor, Tensor, Tensor | null];
        const { activation, ...attrs } = call.attrs;
        return conv.run(2, false, x, w, b ?? null, call.outputs[0]!.shape, attrs, activation);
      },
      (call: OpCall<ConvActAttrs>) => {
        const [x, w] = call.inputs as [Tensor, Tensor];
        return conv.supports(2, false, x, w, call.outputs[0]!.shape, call.attrs);
      },
    );
  }
  registerPools(table, new ConvPools(cache, runtime));
  return conv;
}

const POOL_DTYPES = new Set(['f32', 'f16', 'bf16']);

function registerPools(table: OpKernelTable, pools: ConvPools): void {
  const supports = (call: OpCall<PoolAttrs>) => {
    const x = call.inputs[0] as Tensor;
    if (!POOL_DTYPES.has(x.dtype)) return `dtype ${x.dtype}: the CUDA pooling takes f32, f16, bf16`;
    const out = call.outputs[0]!.shape;
    const n = out.reduce((a, d) => a * d, 1);
    if (n >= 2 ** 31) return `${n} output elements (the pooling kernel indexes them in 32 bits)`;
    // adaptive windows multiply input by output sizes in 32 bits
    for (let i = 1; i <= 3 && i < out.length; i++) if (x.shape[x.rank - i]! * (out[out.length - i]! + 1) >= 2 ** 31) return 'spatial sizes too large for the pooling kernel';
    return true;
  };
  const ops: [string, PoolKind, boolean][] = [];
  for (const nd of [1, 2, 3]) {
    ops.push([`max_pool${nd}d`, 'max', false], [`max_pool${nd}d_with_indices`, 'max', true], [`avg_pool${nd}d`, 'avg', false]);
    ops.push([`adaptive_avg_pool${nd}d`, 'adaptive_avg', false], [`adaptive_max_pool${nd}d`, 'adaptive_max', false], [`adaptive_max_pool${nd}d_with_indices`, 'adaptive_max', true]);
  }
  for (const [name, kind, indices] of ops) {
    if (!hasOp(name)) continue;
    const nd = Number(/(\d)d/.exec(name)![1]) as Nd;
    table.register(
      name,
      (call: OpCall<PoolAttrs>) => {
        const out = pools.run(kind, nd, indices, call.inputs[0] as Tensor, call.outputs[0]!.shape, call.attrs);
        return indices ? out : out[0]!;
      },
      supports,
    );
  }
}
