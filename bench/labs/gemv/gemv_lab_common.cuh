// What the standalone GEMV labs (bench/labs/gemv/gemv_lab.cu, bench/labs/gemv-persistent/gemv_persistent_lab.cu) share besides lab_common.cuh: seeded
// bf16 allocations and a read-only stream for the read floor. Include after packages/backend-cuda/kernels/gemv.cu (fk_set,
// fk_ld_stream) with LAB_NAME defined (the prefix of the error lines).
#pragma once
#include "../common/lab_common.cuh"

using T = __nv_bfloat16;

extern "C" __global__ void lab_read(const uint4* __restrict__ p, long long n, unsigned* sink) {
  unsigned a = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = fk_ld_stream(p + i);
    a ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (a == 0x12345678u) *sink = a;  // keeps the loads
}

// n seeded bf16 values in [-0.025, 0.025), on the device, complete when this returns (the labs' streams are
// non-blocking: they do not wait for the legacy stream's fill)
static T* alloc(long long n, unsigned seed) {
  T* p;
  CK(cudaMalloc(&p, n * sizeof(T)));
  lab_fill_bf16<<<1024, 256>>>(p, n, seed, 0.025f);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return p;
}
