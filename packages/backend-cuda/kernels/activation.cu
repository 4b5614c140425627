// FastKernels gated activations (vLLM silu_and_mul, gelu_and_mul, gelu_tanh_and_mul), out of place:
// x [rows, 2d] (rows at stride xs, last dim contiguous) -> out [rows, d] = act(x[:, :d]) * x[:, d:],
// computed in fp32 and rounded once. 16-byte accesses (FK_VEC elements) when the host found every row aligned.
// -DFK_T=<type> -DFK_VEC=<n> -DFK_ACT=0 (silu) | 1 (gelu, exact erf) | 2 (gelu, tanh approximation).
#include "fk_vec.cuh"
#include "fk_pdl.cuh"
#include "fk_act.cuh"

// grid.x covers the d / FK_VEC vectors of a row, grid.y strides over rows.
extern "C" __global__ void fk_act_and_mul(FK_T* __restrict__ out, const FK_T* __restrict__ x, int rows, int d, long long xs) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  const int nv = d / FK_VEC;
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    const V* g = reinterpret_cast<const V*>(x + row * xs);
    const V* u = reinterpret_cast<const V*>(x + row * xs + d);
    V* o = reinterpret_cast<V*>(out + (long long)row * d);
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += gridDim.x * blockDim.x) {
      const V gv = g[j];
      const V uv = u[j];
      V r;
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) fk_set(r.v[e], fk_act(fk_f(gv.v[e])) * fk_f(uv.v[e]));
      o[j] = r;
    }
  }
}
