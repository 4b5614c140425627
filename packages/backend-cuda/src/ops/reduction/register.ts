/**
 * Registry kernels of the reduction group beyond the generated folds (../reduce.ts): argmax / argmin, cumsum, var /
 * std (one Welford pass; f64 too), sort and topk on the line kernels of this folder. max / min decompose into argmax +
 * gather; logsumexp into the generated elementwise kernels and reductions.
 */
import { Tensor, normDim, reductionDims, type OpCall, type OpKernelTable, type OpSupports } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import { isGenDType } from '../ctypes.js';
import type { GenKernelCache } from '../gen-cache.js';
import { AlongDimOps } from './along-dim.js';

const dtypes: OpSupports = (call) => {
  const x = call.inputs[0] as Tensor;
  if (!isGenDType(x.dtype)) return `dtype ${x.dtype} is not generated`;
  for (const o of call.outputs) if (!isGenDType(o.dtype)) return `output dtype ${o.dtype} is not generated`;
  return true;
};

/** The size of the dim a sort / topk runs along (1 for a 0-d tensor). */
function lineLength(x: Tensor, dim: number): number {
  return x.rank === 0 ? 1 : x.shape[normDim('sort', dim, x.rank)]!;
}

function fresh(call: OpCall<any>, i: number, x: Tensor): Tensor {
  const m = call.outputs[i]!;
  return Tensor.empty(call.backend, m.shape, m.dtype, { device: x.device });
}

export function registerReductionExtras(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): AlongDimOps {
  const ops = new AlongDimOps(cache, runtime);

  for (const name of ['argmax', 'argmin'] as const) {
    table.register(
      name,
      (call: OpCall<{ dim: number | null; keepdim: boolean }>) => {
        const x = call.inputs[0] as Tensor;
        const dim = call.attrs.dim === null ? null : x.rank === 0 ? 0 : normDim(name, call.attrs.dim, x.rank);
        return ops.argReduce(x, dim, name === 'argmax', fresh(call, 0, x));
      },
      dtypes,
    );
  }

  table.register(
    'cumsum',
    (call: OpCall<{ dim: number }>) => {
      const x = call.inputs[0] as Tensor;
      return ops.cumsum(x, x.rank === 0 ? 0 : normDim('cumsum', call.attrs.dim, x.rank), fresh(call, 0, x));
    },
    dtypes,
  );

  for (const name of ['var', 'std'] as const) {
    table.register(
      name,
      (call: OpCall<{ dim: number | number[] | null; correction: number; keepdim: boolean }>) => {
        const x = call.inputs[0] as Tensor;
        return ops.variance(x, reductionDims(name, x.shape, call.attrs.dim), call.attrs.correction, name === 'std', fresh(call, 0, x));
      },
      dtypes,
    );
  }

  table.register(
    'sort',
    (call: OpCall<{ dim: number; descending: boolean }>) => {
      const x = call.inputs[0] as Tensor;
      const dim = x.rank === 0 ? 0 : normDim('sort', call.attrs.dim, x.rank);
      return ops.sort(x, dim, lineLength(x, dim), call.attrs.descending, fresh(call, 0, x), fresh(call, 1, x));
    },
    (call) => {
      const ok = dtypes(call);
      if (ok !== true) return ok;
      const x = call.inputs[0] as Tensor;
      const D = lineLength(x, (call.attrs as { dim: number }).dim);
      return AlongDimOps.sortSupport(D, D);
    },
  );

  table.register(
    'topk',
    (call: OpCall<{ k: number; dim: number; largest: boolean }>) => {
      const x = call.inputs[0] as Tensor;
      const dim = x.rank === 0 ? 0 : normDim('topk', call.attrs.dim, x.rank);
      // sorted=false may return any order: the sorted one is a valid answer
      return ops.sort(x, dim, call.attrs.k, call.attrs.largest, fresh(call, 0, x), fresh(call, 1, x));
    },
    (call) => {
      const ok = dtypes(call);
      if (ok !== true) return ok;
      const a = call.attrs as { k: number; dim: number };
      return AlongDimOps.sortSupport(lineLength(call.inputs[0] as Tensor, a.dim), a.k);
    },
  );
  return ops;
}
