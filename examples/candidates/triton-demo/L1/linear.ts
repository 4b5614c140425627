// Linear (y = x W^T + b) as a Triton matmul: tiles of x [M, K] and W [N, K] (read as W^T) through tl.dot with
// fp32 accumulation, grouped tile order for L2 reuse, the bias added in the epilogue. The tile config is
// chosen per (M, N, K) by timing the configs below on the first call (cached on disk). fp32 inputs use IEEE
// dot products (TF32 would miss fp32 tolerances). Other backends and dtypes fall back to the backend's op.
import { Module, Tensor } from '@fastkernels/core';
import { tritonKernel, type TritonConfig, type TritonKernel } from '@fastkernels/backend-triton';

const SOURCE = `import triton
import triton.language as tl


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                  HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    group_rows = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_rows
    pid_n = (pid % group) // group_rows
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * stride_xm + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * stride_wn + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(w_ptrs, mask=(rn[None, :] < N) & (rk[:, None] < k_left), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + rm[:, None].to(tl.int64) * stride_ym + rn[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
`;

const cfg = (BLOCK_M: number, BLOCK_N: number, BLOCK_K: number, numWarps: number, numStages: number): TritonConfig => ({
  constexprs: { BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M: 8 },
  numWarps,
  numStages,
});

/** Hopper-friendly tiles (Triton's matmul tutorial set) plus skinny ones for decode (M of 1..32). */
const CONFIGS: readonly TritonConfig[] = [
  cfg(128, 256, 64, 8, 3),
  cfg(128, 128, 64, 4, 4),
  cfg(64, 256, 32, 4, 4),
  cfg(128, 64, 32, 4, 4),
  cfg(64, 128, 64, 4, 4),
  cfg(64, 64, 64, 4, 4),
  cfg(32, 64, 128, 4, 4),
  cfg(16, 128, 128, 4, 4),
  cfg(16, 64, 256, 4, 3),
];

const kernels = new Map<string, TritonKernel>();
function kernel(bias: boolean, ieee: boolean): TritonKernel {
  const key = `${bias}|${ieee}`;
  let k = kernels.get(key);
  if (!k) {
    k = tritonKernel({
      source: SOURCE,
      fn: 'linear_kernel',
      name: 'linear.py',
      constexprs: { HAS_BIAS: bias, IEEE: ieee },
      configs: CONFIGS,
      key: ['M', 'N', 'K'],
      doNotSpecialize: ['M'], // one compile serves every token count
    });
    kernels.set(key, k);
  }
  return k;
}

const cdiv = (a: number, b: number) => Math.ceil(a / b);

export class Linear extends Module {
  readonly weight: Tensor;
  readonly bias: Tensor | null;

  constructor(
    readonly inputSize: number,
    readonly outputSize: number,
    bias = false,
  ) {
    super();
    this.weight = this.parameter('weight', [outputSize, inputSize]);
    this.bias = bias ? this.parameter('bias', [outputSize]) : null;
  }

  forward(x: Tensor): Tensor {
    const backend = this.ctx.backend;
    const K = this.inputSize;
    const N = this.outputSize;
    const ok = backend.name === 'cuda' && ['f32', 'f16', 'bf16'].includes(x.dtype) && x.dtype === this.weight.dtype && x.shape[x.rank - 1] === K && K > 0;
    if (!ok) return backend.ops.linear(x, this.weight, this.bias);
    const lead = x.shape.slice(0, -1);
    const M = lead.reduce((a, b) => a * b, 1);
    const xc = x.contiguous();
    const w = this.weight.contiguous();
    const b = this.bias ? this.bias.contiguous() : null;
    const y = Tensor.empty(backend, [...lead, N], x.dtype, { device: x.device });
    if (M > 0 && N > 0) {
      kernel(b !== null, x.dtype === 'f32').launch(
        (meta) => cdiv(M, meta.BLOCK_M as number) * cdiv(N, meta.BLOCK_N as number),
        [xc, w, b ?? w, y, M, N, K, K, K, N],
      );
    }
    xc.dispose();
    w.dispose();
    b?.dispose();
    return y;
  }
}
