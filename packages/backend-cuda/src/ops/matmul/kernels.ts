/**
 * The matmul group's registry kernels on cuBLASLt: matmul and bmm (strided batches, broadcast batch dims by stride 0,
 * transposed operands by layout, a shared right operand folded into M), baddbmm (beta * input through cuBLASLt's C,
 * read in place where it can address it, a row-vector input as the bias epilogue), linear with its activation
 * (RELU / GELU-tanh in cuBLASLt's epilogue; silu and erf-gelu as the generated elementwise pass; 'none' is the Llama
 * path's CudaOps.linear, GEMV for small M included) and einsum (einsum.ts). grouped_gemm and linear_silu_and_mul
 * keep their routes (the per-expert decomposition; CudaOps.linearSiluAndMul's fused GEMV, else the decomposition).
 * Every kernel takes bf16 / f16 / f32 (core has checked that the operands share one dtype); `supports` declines the
 * rest with the reason, and callOp falls back.
 */
import { Tensor, hasOp, type Backend, type LinearActivation, type OpCall, type OpKernelTable, type OpSupports } from '@fastkernels/core';
import { EPILOGUE_BIAS } from '../../blaslt.js';
import { CudaError, CudaFatalError } from '../../errors.js';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { GeneratedCopy } from './copy.js';
import { CudaEinsum } from './einsum.js';
import { ActivationPass, ltEpilogue } from './epilogue.js';
import { StridedGemm, type GemmOps } from './gemm.js';
import { isRowBias } from './layout.js';

const LT_DTYPES = new Set(['bf16', 'f16', 'f32']);

/** bf16 / f16 / f32 operands (cuBLASLt's types with f32 accumulation); f64 goes to the next route. */
export const ltDTypes: OpSupports = (call) => {
  for (const a of call.inputs) if (a instanceof Tensor && !LT_DTYPES.has(a.dtype)) return `dtype ${a.dtype}: cuBLASLt takes bf16, f16, f32`;
  return true;
};

const rank2: OpSupports = (call) => {
  const [a, b] = call.inputs as [Tensor, Tensor];
  return a.rank < 2 || b.rank < 2 ? '1-D operands: the decomposition (unsqueeze, then this kernel)' : ltDTypes(call);
};

/** K = 0 with a bias / beta / activation: the decomposition (zeros from the GEMM kernel, then the elementwise ops). */
const nonEmptyK = (k: (call: OpCall<any>) => number): OpSupports => (call) => (k(call) === 0 ? 'K = 0: the decomposition' : ltDTypes(call));

function output(call: OpCall<any>, like: Tensor): Tensor {
  const m = call.outputs[0]!;
  return Tensor.empty(call.backend, m.shape, m.dtype, { device: like.device });
}

/** A failed launch leaves nothing allocated behind: dispose the fresh output, rethrow. */
function fail(out: Tensor, e: unknown): never {
  out.dispose();
  throw e;
}

export function registerMatmulKernels(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): void {
  const gemm = new StridedGemm();
  const acts = new ActivationPass(cache, runtime);
  const copier = new GeneratedCopy(cache, runtime);
  /** Activations whose cuBLASLt epilogue was refused once (they take the generated pass after that). */
  const refused = new Set<LinearActivation>();
  // the backend's cuBLASLt call and fill (CudaOps), copies on the generated kernels; one object per backend
  const opsByBackend = new WeakMap<Backend, GemmOps>();
  const gemmOps = (call: OpCall<any>): GemmOps => {
    let o = opsByBackend.get(call.backend);
    if (!o) {
      const b = call.backend.ops as unknown as GemmOps;
      o = { gemm: (g) => b.gemm(g), fill: (t, v) => b.fill(t, v), copy: (d, src) => copier.copy(d, src) };
      opsByBackend.set(call.backend, o);
    }
    return o;
  };

  const product = (call: OpCall) => {
    const [a, b] = call.inputs as [Tensor, Tensor];
    const out = output(call, a);
    try {
      gemm.run(gemmOps(call), out, a, b);
    } catch (e) {
      fail(out, e);
    }
    return out;
  };
  if (hasOp('matmul')) table.register('matmul', product, rank2);
  if (hasOp('bmm')) table.register('bmm', product, ltDTypes);

  if (hasOp('baddbmm')) {
    table.register(
      'baddbmm',
      (call: OpCall<{ beta: number; alpha: number }>) => {
        const [input, b1, b2] = call.inputs as [Tensor, Tensor, Tensor];
        const { beta, alpha } = call.attrs;
        const out = output(call, b1);
        const N = out.shape[2]!;
        const ops = gemmOps(call);
        const views: Tensor[] = [];
        try {
          if (beta === 0) gemm.run(ops, out, b1, b2, { alpha }); // input not read: NaN in it does not propagate
          else if (beta === 1 && isRowBias(input.shape) && input.shape[input.rank - 1] === N && N > 1) {
            const bias = input.reshape([N]); // one row for every batch and row: the bias epilogue
            views.push(bias);
            gemm.run(ops, out, b1, b2, { alpha, bias, epilogue: EPILOGUE_BIAS });
          } else {
            const c = input.expand(out.shape);
            views.push(c);
            gemm.run(ops, out, b1, b2, { alpha, beta, c });
          }
        } catch (e) {
          fail(out, e);
        } finally {
          for (const v of views) v.dispose();
        }
        return out;
      },
      nonEmptyK((c) => (c.inputs[1] as Tensor).shape[2]!),
    );
  }

  if (hasOp('linear')) {
    table.register(
      'linear',
      (call: OpCall<{ activation: LinearActivation }>) => {
        const [x, w, bias] = call.inputs as [Tensor, Tensor, Tensor | null];
        const act = call.attrs.activation;
        const epi = refused.has(act) ? undefined : ltEpilogue(act, !!bias);
        if (act === 'none' || epi === undefined) {
          // the Llama path's linear (GEMV for small M, else cuBLASLt with the bias epilogue), then the generated pass
          const y = call.backend.ops.linear(x, w, bias ?? null);
          return act === 'none' ? y : acts.apply(act, y);
        }
        const out = output(call, x);
        const views: Tensor[] = [];
        try {
          // x [..., M, K] (a 1-D x is one row) @ weight^T: [K, N] with strides [1, K], read transposed in place
          const x2 = x.rank === 1 ? x.unsqueeze(0) : x;
          const o2 = x.rank === 1 ? out.unsqueeze(0) : out;
          const wt = w.transpose(0, 1);
          const b = bias && !bias.isContiguous() ? bias.contiguous() : bias;
          views.push(wt);
          if (x2 !== x) views.push(x2, o2);
          if (b && b !== bias) views.push(b);
          gemm.run(gemmOps(call), o2, x2, wt, { bias: b, epilogue: epi });
        } catch (e) {
          // cuBLASLt without an algorithm for this epilogue (reported before any launch): the generated pass from now on
          if (e instanceof CudaError && !(e instanceof CudaFatalError) && e.library === 'cublasLt') {
            out.dispose();
            refused.add(act);
            return acts.apply(act, call.backend.ops.linear(x, w, bias ?? null));
          }
          fail(out, e);
        } finally {
          for (const v of views) v.dispose();
        }
        return out;
      },
      nonEmptyK((c) => (c.inputs[1] as Tensor).shape[1]!),
    );
  }

  if (hasOp('einsum')) {
    const einsum = new CudaEinsum(gemm);
    table.register(
      'einsum',
      (call: OpCall<{ equation: string }>) => {
        const ops = call.inputs as Tensor[];
        const out = output(call, ops[0]!);
        if (out.numel === 0) return out;
        try {
          return einsum.run(gemmOps(call), call.attrs.equation, ops, out);
        } catch (e) {
          fail(out, e);
        }
      },
      ltDTypes,
    );
  }
}
