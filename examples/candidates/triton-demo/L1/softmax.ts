// Softmax over any dim as a Triton kernel: one program per (outer, inner) position. Rows that fit in 8192
// elements are read once into registers; longer rows (the 128k vocabulary) take an online max/sum pass and a
// write pass over chunks of 4096. fp32 math, result in x's dtype. Other backends fall back to the backend's op.
import { Module, Tensor, normalizeDim } from '@fastkernels/core';
import { tritonKernel, type TritonKernel } from '@fastkernels/backend-triton';

const SOURCE = `import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, inner,
                   BLOCK: tl.constexpr, SINGLE: tl.constexpr, CONTIG: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    if CONTIG:
        base = pid * n_cols
        step = 1
    else:
        base = (pid // inner) * n_cols * inner + pid % inner
        step = inner
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols * step, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.where(mask, tl.exp(x - tl.max(x, axis=0)), 0.0)
        tl.store(y_ptr + base + cols * step, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            c = start + cols
            mask = c < n_cols
            x = tl.load(x_ptr + base + c * step, mask=mask, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
            p = tl.where(mask, tl.exp(x - m_new), 0.0)
            s = s * alpha + p
            m = m_new
        row_max = tl.max(m, axis=0)
        scale = tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max))
        inv = 1.0 / tl.sum(s * scale, axis=0)
        for start in range(0, n_cols, BLOCK):
            c = start + cols
            mask = c < n_cols
            x = tl.load(x_ptr + base + c * step, mask=mask, other=-float("inf")).to(tl.float32)
            tl.store(y_ptr + base + c * step, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)
`;

const SINGLE_MAX = 8192;
const CHUNK = 4096;
const kernels = new Map<string, TritonKernel>();
function kernel(block: number, single: boolean, contig: boolean): TritonKernel {
  const key = `${block}|${single}|${contig}`;
  let k = kernels.get(key);
  if (!k) {
    k = tritonKernel({
      source: SOURCE,
      fn: 'softmax_kernel',
      name: 'softmax.py',
      constexprs: { BLOCK: block, SINGLE: single, CONTIG: contig },
      numWarps: Math.min(16, Math.max(1, block / 512)),
    });
    kernels.set(key, k);
  }
  return k;
}

export class Softmax extends Module {
  constructor(readonly dim = -1) {
    super();
    if (!Number.isInteger(dim)) throw new RangeError(`Softmax: dim must be an integer, got ${dim}`);
  }

  forward(x: Tensor): Tensor {
    const backend = this.ctx.backend;
    if (backend.name !== 'cuda' || !['f32', 'f16', 'bf16'].includes(x.dtype) || x.rank === 0) return backend.ops.softmax(x, this.dim);
    const d = normalizeDim(this.dim, x.rank);
    const size = x.shape[d]!;
    const inner = x.shape.slice(d + 1).reduce((a, b) => a * b, 1);
    const outer = x.shape.slice(0, d).reduce((a, b) => a * b, 1);
    const xc = x.contiguous();
    const y = Tensor.empty(backend, x.shape, x.dtype, { device: x.device });
    if (size > 0 && outer * inner > 0) {
      const p2 = 2 ** Math.ceil(Math.log2(size));
      const single = p2 <= SINGLE_MAX;
      kernel(single ? p2 : CHUNK, single, inner === 1).launch(outer * inner, [xc, y, size, inner]);
    }
    xc.dispose();
    return y;
  }
}
