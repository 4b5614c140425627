/**
 * The CUDA backend's registry kernels from this folder: the elementwise group (generated), sum / mean / amax / amin,
 * softmax / log_softmax (f32 / f16 / bf16 in and out: the tuned kernels of kernels/softmax.cu, reduction/softmax.ts;
 * other dtypes generated),
 * layer_norm / layer_norm_modulate / add_layer_norm / group_norm (generated row norms) where core declares them. One GeneratedOps per backend holds the kernel
 * cache; nothing touches CUDA before the first call.
 */
import { Tensor, hasOp, normDim, reductionDims, type OpCall, type OpKernelTable, type OpSupports } from '@fastkernels/core';
import type { CudaRuntime } from '../runtime.js';
import { registerAttentionKernels } from './attention/register.js';
import { registerRecurrentKernels } from './recurrent/register.js';
import { registerConvKernels } from './conv/register.js';
import type { ConvKernels } from './conv/conv-kernels.js';
import { isGenDType } from './ctypes.js';
import { registerElementwiseKernels } from './elementwise-kernels.js';
import { GenKernelCache } from './gen-cache.js';
import { GeneratedNorms } from './norm.js';
import { GeneratedReductions } from './reduce.js';
import { registerLayoutKernels } from './layout/register.js';
import { registerReductionExtras } from './reduction/register.js';
import { registerMatmulKernels } from './matmul/kernels.js';
import { registerMoeKernels } from './moe/register.js';
import { registerQuantKernels } from './quant/register.js';
import type { FusedMoeGemm } from './moe/fused-moe.js';
import type { DenseSdpa } from './attention/dense-sdpa.js';
import type { ReduceOp } from './reduce-source.js';
import { lastSoftmaxLaunch, softmax as tunedSoftmax } from './reduction/softmax.js';
import type { SpineContext } from './launch/context.js';

export class GeneratedOps {
  readonly reductions: GeneratedReductions;
  readonly norms: GeneratedNorms;
  /** The conv ops (conv/): cuDNN, else the implicit-GEMM fallback; `conv.library = 'fallback'` forces the fallback. */
  conv!: ConvKernels;
  /** fused_moe_gemm (moe/): `moe.forceTile` pins a tile configuration (tests, A/B runs). */
  moe!: FusedMoeGemm;
  /** scaled_dot_product_attention (attention/): `sdpa.viaPrefill = false` keeps every call on the dense kernel. */
  sdpa!: DenseSdpa;
  /** The kernel the last registry softmax / log_softmax ran (a softmax.cu entry, or 'generated'): the ops bench's route. */
  softmaxPath: string | null = null;

  constructor(
    readonly runtime: () => CudaRuntime,
    readonly cache: GenKernelCache = new GenKernelCache(),
  ) {
    this.reductions = new GeneratedReductions(this.cache, runtime);
    this.norms = new GeneratedNorms(this.cache, runtime);
  }
}

/** Every tensor input and every output in a generated dtype. */
const genDTypes: OpSupports = (call) => {
  for (const a of call.inputs) if (a instanceof Tensor && !isGenDType(a.dtype)) return `input dtype ${a.dtype} is not generated`;
  for (const o of call.outputs) if (!isGenDType(o.dtype)) return `output dtype ${o.dtype} is not generated`;
  return true;
};

const FLOAT16_32 = new Set(['f32', 'f16', 'bf16']);

/** The row norms compute in float: f32 / f16 / bf16 tensors (f64 takes the decomposition). */
const normSupports: OpSupports = (call) => {
  for (const a of call.inputs) if (a instanceof Tensor && !FLOAT16_32.has(a.dtype)) return `dtype ${a.dtype}: the generated norms take f32, f16, bf16`;
  return true;
};

/** `cache`: where kernels are generated and kept (tests pass one that records launches). */
export function registerGeneratedKernels(table: OpKernelTable, runtime: () => CudaRuntime, cache?: GenKernelCache): GeneratedOps {
  const g = new GeneratedOps(runtime, cache);
  registerElementwiseKernels(table, g.cache, runtime);
  g.conv = registerConvKernels(table, runtime, g.cache); // conv1d/2d/3d, conv_transpose1d/2d/3d
  registerReductionExtras(table, g.cache, runtime); // argmax / argmin, cumsum, sort, topk (reduction/)
  registerLayoutKernels(table, g.cache, runtime); // gather, index_select, scatter(_add), pad, interpolate (layout/)
  registerMatmulKernels(table, g.cache, runtime); // cuBLASLt: matmul, bmm, baddbmm, linear (+ epilogues), einsum
  g.moe = registerMoeKernels(table, g.cache, runtime); // fused_moe_gemm: the tensor-core grouped GEMM over moe_align's blocks; grouped_gemm (moe/)
  registerQuantKernels(table, g.cache, runtime); // mxfp4_dequant (quant/)

  for (const op of ['sum', 'mean', 'amax', 'amin'] as const satisfies readonly ReduceOp[]) {
    table.register(
      op,
      (call: OpCall<{ dim: number | number[] | null; keepdim: boolean }>) => {
        const x = call.inputs[0] as Tensor;
        const meta = call.outputs[0]!;
        const out = Tensor.empty(call.backend, meta.shape, meta.dtype, { device: x.device });
        return g.reductions.reduce(op, x, reductionDims(op, x.shape, call.attrs.dim), out);
      },
      genDTypes,
    );
  }

  for (const name of ['softmax', 'log_softmax'] as const) {
    table.register(
      name,
      (call: OpCall<{ dim: number; dtype?: string }>) => {
        const x = call.inputs[0] as Tensor;
        const outDType = call.outputs[0]!.dtype;
        const dim = normDim(name, call.attrs.dim, x.rank);
        // f32 / f16 / bf16 in and out: the tuned kernels (kernels/softmax.cu, the one-read cluster kernel for long rows)
        const spine = (call.backend.ops as { spine?: SpineContext }).spine;
        if (spine && FLOAT16_32.has(x.dtype) && FLOAT16_32.has(outDType) && x.rank > 0) {
          const y = tunedSoftmax(spine, x, dim, { log: name === 'log_softmax', outDType });
          g.softmaxPath = lastSoftmaxLaunch?.kernel ?? null;
          return y;
        }
        g.softmaxPath = 'generated';
        return g.reductions.softmax(x, dim, outDType, name === 'log_softmax');
      },
      genDTypes,
    );
  }

  if (hasOp('layer_norm')) {
    table.register(
      'layer_norm',
      (call: OpCall<{ normalized_shape: number[]; eps: number }>) => {
        const [x, w, b] = call.inputs as [Tensor, Tensor | null, Tensor | null];
        return g.norms.layerNorm(x, call.attrs.normalized_shape.length, w ?? null, b ?? null, call.attrs.eps, call.outputs[0]!.dtype);
      },
      normSupports,
    );
  }
  if (hasOp('layer_norm_modulate')) {
    table.register(
      'layer_norm_modulate',
      (call: OpCall<{ eps: number; scale_offset: number }>) => {
        const [x, scale, shift] = call.inputs as [Tensor, Tensor, Tensor];
        return g.norms.layerNormModulate(x, scale, shift, call.attrs.eps, call.attrs.scale_offset, call.outputs[0]!.dtype);
      },
      normSupports,
    );
  }
  if (hasOp('add_layer_norm')) {
    // the post-LN residual: one pass over x and r (fk_add_layer_norm) instead of an add and a layer_norm
    table.register(
      'add_layer_norm',
      (call: OpCall<{ normalized_shape: number[]; eps: number }>) => {
        const [x, r, w, b] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor | null];
        return g.norms.layerNorm(x, call.attrs.normalized_shape.length, w ?? null, b ?? null, call.attrs.eps, call.outputs[0]!.dtype, r);
      },
      normSupports,
    );
  }
  if (hasOp('group_norm')) {
    table.register(
      'group_norm',
      (call: OpCall<{ num_groups: number; eps: number }>) => {
        const [x, w, b] = call.inputs as [Tensor, Tensor | null, Tensor | null];
        return g.norms.groupNorm(x, call.attrs.num_groups, w ?? null, b ?? null, call.attrs.eps, call.outputs[0]!.dtype);
      },
      normSupports,
    );
  }
  g.sdpa = registerAttentionKernels(table, g.cache); // scaled_dot_product_attention (attention/)
  registerRecurrentKernels(table, g.cache, runtime); // fused_recurrent_gla, chunk_gla, fused_recurrent_gated_delta_rule, causal_conv1d(_update) (recurrent/)
  return g;
}
