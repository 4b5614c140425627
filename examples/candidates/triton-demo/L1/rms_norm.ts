// RMSNorm as a Triton kernel (vLLM's RMSNorm / fused_add_rms_norm semantics): one program per row, the row in
// registers, fp32 math. With a residual, x + residual is rounded to the activation dtype, stored, and that
// stored value is normalised (as vLLM's fused kernel does). Other backends fall back to the backend's op.
import { Module, Tensor } from '@fastkernels/core';
import { tritonKernel, type TritonKernel } from '@fastkernels/backend-triton';

const SOURCE = `import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, res_ptr, w_ptr, y_ptr, sum_ptr, n_cols, eps,
                    HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offs = row * n_cols + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        s = (x + r).to(sum_ptr.dtype.element_ty)
        tl.store(sum_ptr + offs, s, mask=mask)
        x = s.to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)
`;

const kernels = new Map<string, TritonKernel>();
function kernel(block: number, residual: boolean): TritonKernel {
  const key = `${block}|${residual}`;
  let k = kernels.get(key);
  if (!k) {
    k = tritonKernel({
      source: SOURCE,
      fn: 'rms_norm_kernel',
      name: 'rms_norm.py',
      signature: { eps: 'fp32' }, // the rest (pointer dtypes, alignment, n_cols) is specialised per launch
      constexprs: { HAS_RESIDUAL: residual, BLOCK: block },
      numWarps: Math.min(16, Math.max(1, block / 512)),
    });
    kernels.set(key, k);
  }
  return k;
}

const nextPow2 = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

export class RMSNorm extends Module {
  readonly weight: Tensor;

  constructor(
    readonly hiddenSize: number,
    readonly eps = 1e-6,
  ) {
    super();
    this.weight = this.parameter('weight', [hiddenSize]);
  }

  forward(x: Tensor, residual?: Tensor | null): Tensor | [Tensor, Tensor] {
    const backend = this.ctx.backend;
    const H = this.hiddenSize;
    const ok = backend.name === 'cuda' && ['f32', 'f16', 'bf16'].includes(x.dtype) && x.shape[x.rank - 1] === H && nextPow2(H) <= 65536;
    if (!ok) return residual ? backend.ops.fusedAddRmsNorm(x, residual, this.weight, this.eps) : backend.ops.rmsNorm(x, this.weight, this.eps);
    const rows = x.numel / H;
    const xc = x.contiguous();
    const rc = residual ? residual.contiguous() : null;
    const w = this.weight.contiguous();
    const y = Tensor.empty(backend, x.shape, x.dtype, { device: x.device });
    const sum = rc ? Tensor.empty(backend, x.shape, x.dtype, { device: x.device }) : null;
    if (rows > 0) kernel(nextPow2(H), rc !== null).launch(rows, [xc, rc ?? xc, w, y, sum ?? y, H, this.eps]);
    xc.dispose();
    rc?.dispose();
    w.dispose();
    return sum ? [y, sum] : y;
  }
}
