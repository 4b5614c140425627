/**
 * linear's activation epilogue: inside the GEMM where cuBLASLt has it, else one generated elementwise pass after it.
 * cuBLASLt has RELU and GELU (its GELU is the tanh approximation: PyTorch's _addmm_activation uses GELU_BIAS for
 * approximate='tanh'), each with or without BIAS; it has no SiLU and no erf GELU, so those run as the generated
 * kernel of the elementwise group (the same ElementwiseRunner and kernel cache as F.silu / F.gelu) over the GEMM's
 * output: one read and one write more, and the GEMM's output rounded once before the activation.
 */
import { Tensor, type LinearActivation } from '@fastkernels/core';
import { EPILOGUE_BIAS, EPILOGUE_DEFAULT, EPILOGUE_GELU, EPILOGUE_GELU_BIAS, EPILOGUE_RELU, EPILOGUE_RELU_BIAS } from '../../blaslt.js';
import type { CudaRuntime } from '../../runtime.js';
import { ElementwiseRunner } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { singleOpExpr } from '../translate.js';

/** The cuBLASLt epilogue for an activation (with a bias or not); undefined where cuBLASLt has none. */
export function ltEpilogue(act: LinearActivation, bias: boolean): number | undefined {
  switch (act) {
    case 'none':
      return bias ? EPILOGUE_BIAS : EPILOGUE_DEFAULT;
    case 'relu':
      return bias ? EPILOGUE_RELU_BIAS : EPILOGUE_RELU;
    case 'gelu_tanh':
      return bias ? EPILOGUE_GELU_BIAS : EPILOGUE_GELU;
    default:
      return undefined;
  }
}

/**
 * The generated passes for the activations cuBLASLt lacks (and for relu / gelu_tanh should cuBLASLt ever refuse their
 * epilogue), built on first use, kept per backend.
 */
export class ActivationPass {
  private readonly runners = new Map<LinearActivation, ElementwiseRunner>();

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /**
   * act(y) into a fresh tensor, y disposed (not in place: the generated kernels declare their pointers __restrict__).
   * The caching allocator hands the block back at once, so this costs what an in-place pass would.
   */
  apply(act: Exclude<LinearActivation, 'none'>, y: Tensor): Tensor {
    let r = this.runners.get(act);
    if (!r) {
      const expr = act === 'gelu' || act === 'gelu_tanh' ? singleOpExpr('gelu', { approximate: act === 'gelu' ? 'none' : 'tanh' }, ['tensor']) : singleOpExpr(act, {}, ['tensor']);
      this.runners.set(act, (r = new ElementwiseRunner(expr, this.cache, this.runtime)));
    }
    const out = Tensor.empty(y.backend, y.shape, y.dtype, { device: y.device });
    this.inputs[0] = y;
    try {
      r.run(out, this.inputs);
    } catch (e) {
      out.dispose();
      throw e;
    } finally {
      this.inputs[0] = undefined as unknown as Tensor;
      y.dispose();
    }
    return out;
  }

  private readonly inputs: Tensor[] = [undefined as unknown as Tensor];
}
