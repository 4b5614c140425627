/**
 * Registry kernels of the layout group that need one: gather, index_select, scatter (src or value; reduce 'add'),
 * scatter_add, pad in reflect / replicate / circular mode, interpolate (every mode core declares), flip, tril / triu,
 * one_hot. cat, stack, repeat,
 * contiguous and constant pad already run as one strided copy each through core's `viaOps` route (CudaOps.copy / fill),
 * and pixel_shuffle / pixel_unshuffle as reshape + permute + that copy: nothing to add for them.
 */
import { Tensor, emptyLikeMemoryFormat, normDim, type InterpolateAttrs, type OpCall, type OpKernelTable, type OpSupports } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import { isGenDType } from '../ctypes.js';
import type { GenKernelCache } from '../gen-cache.js';
import { MAX_LAYOUT_RANK } from './geo.js';
import { scatterAccDType } from './index-source.js';
import { LayoutOps } from './layout-ops.js';
import type { PadMode } from './pad-source.js';

/** Generated dtypes and at most MAX_LAYOUT_RANK dims for every tensor argument. */
const tensors: OpSupports = (call) => {
  for (const a of call.inputs) {
    if (!(a instanceof Tensor)) continue;
    if (!isGenDType(a.dtype)) return `dtype ${a.dtype} is not generated`;
    if (a.rank > MAX_LAYOUT_RANK) return `rank ${a.rank} > ${MAX_LAYOUT_RANK}`;
  }
  return true;
};

const dimOf = (op: string, x: Tensor, dim: number) => (x.rank === 0 ? 0 : normDim(op, dim, x.rank));

function fresh(call: OpCall<any>, like: Tensor): Tensor {
  const m = call.outputs[0]!;
  return Tensor.empty(call.backend, m.shape, m.dtype, { device: like.device });
}

function scatterSupports(add: boolean): OpSupports {
  return (call) => {
    const ok = tensors(call);
    if (ok !== true) return ok;
    const x = call.inputs[0] as Tensor;
    if (x.rank === 0) return 'scatter into a 0-d tensor';
    const reduce = (call.attrs as { reduce?: string | null }).reduce ?? null;
    if (reduce === 'multiply') return "scatter reduce='multiply' has no atomic kernel";
    if ((add || reduce === 'add') && scatterAccDType(x.dtype as never) === null) return `scatter add into ${x.dtype}: no atomic add for it`;
    return true;
  };
}

export function registerLayoutKernels(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): LayoutOps {
  const ops = new LayoutOps(cache, runtime);

  table.register(
    'gather',
    (call: OpCall<{ dim: number }>) => {
      const [x, index] = call.inputs as [Tensor, Tensor];
      return ops.gather(x, index, index.strides, dimOf('gather', x, call.attrs.dim), fresh(call, x));
    },
    tensors,
  );

  table.register(
    'index_select',
    (call: OpCall<{ dim: number }>) => {
      const [x, index] = call.inputs as [Tensor, Tensor];
      const dim = dimOf('index_select', x, call.attrs.dim);
      // the 1-D index seen over the output: its stride on the dim, 0 elsewhere
      const strides = x.shape.map((_, d) => (d === dim && index.rank === 1 ? index.strides[0]! : 0));
      return ops.gather(x, index, strides, dim, fresh(call, x));
    },
    tensors,
  );

  table.register(
    'scatter',
    (call: OpCall<{ dim: number; reduce: 'add' | 'multiply' | null }>) => {
      const [x, index, src] = call.inputs as [Tensor, Tensor, Tensor | number];
      return ops.scatter(x, index, src, dimOf('scatter', x, call.attrs.dim), call.attrs.reduce === 'add');
    },
    scatterSupports(false),
  );

  table.register(
    'scatter_add',
    (call: OpCall<{ dim: number }>) => {
      const [x, index, src] = call.inputs as [Tensor, Tensor, Tensor];
      return ops.scatter(x, index, src, dimOf('scatter_add', x, call.attrs.dim), true);
    },
    scatterSupports(true),
  );

  table.register(
    'pad',
    (call: OpCall<{ pad: number[]; mode: 'constant' | PadMode; value: number | null }>) => {
      const x = call.inputs[0] as Tensor;
      return ops.pad(x, call.attrs.pad, call.attrs.mode as PadMode, fresh(call, x));
    },
    (call) => ((call.attrs as { mode: string }).mode === 'constant' ? 'constant pad is a fill and one strided copy (viaOps)' : tensors(call)),
  );

  table.register(
    'interpolate',
    (call: OpCall<InterpolateAttrs>) => {
      const x = call.inputs[0] as Tensor;
      const m = call.outputs[0]!;
      return ops.interpolate(x, call.attrs, emptyLikeMemoryFormat(x, m.shape, m.dtype)); // channels-last in, channels-last out
    },
    tensors,
  );
  table.register(
    'flip',
    (call: OpCall<{ dims: number[] }>) => {
      const x = call.inputs[0] as Tensor;
      return ops.flip(x, call.attrs.dims.map((d) => dimOf('flip', x, d)), fresh(call, x));
    },
    tensors,
  );

  for (const name of ['tril', 'triu'] as const) {
    table.register(
      name,
      (call: OpCall<{ diagonal: number }>) => {
        const x = call.inputs[0] as Tensor;
        return ops.triangle(x, name === 'tril', call.attrs.diagonal, fresh(call, x));
      },
      tensors,
    );
  }

  table.register(
    'one_hot',
    (call: OpCall<{ num_classes: number }>) => {
      const x = call.inputs[0] as Tensor;
      return ops.oneHot(x, call.attrs.num_classes, fresh(call, x));
    },
    tensors,
  );
  return ops;
}
