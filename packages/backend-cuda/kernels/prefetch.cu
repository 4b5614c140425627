// FastKernels L2 prefetch: ask bytes [p, p + bytes) of global memory into L2, and return without waiting for them.
//
// At bs-1 decode the weight-streaming GEMVs keep DRAM busy, but between the qkv projection and o_proj the step runs
// only small kernels (rotary + KV write, decode attention, its combine) that read a few megabytes: DRAM idles for
// several microseconds a layer. Launched right after qkv (src/spine/prefetch.ts), this kernel starts o_proj's weight
// moving into L2 meanwhile, so the o_proj GEMV finds it there. It never writes anything: no result depends on it.
//
// Each thread issues bulk prefetches (cp.async.bulk.prefetch.L2: handled by the SM's copy engine, fire and forget, no
// registers held) of FK_PF_CHUNK bytes, chunks dealt round-robin over the grid. The host passes a 16-byte aligned p and
// bytes a multiple of 16, as the instruction needs. A PDL launch (fk_pdl_entry first): the prefetch starts once the
// kernel before it has finished, so it never competes with that kernel's own stream.
#include "fk_pdl.cuh"
#ifndef FK_PF_CHUNK
#define FK_PF_CHUNK 16384  // bytes per prefetch instruction (a multiple of 16)
#endif
static_assert(FK_PF_CHUNK % 16 == 0, "cp.async.bulk.prefetch sizes are multiples of 16 bytes");

extern "C" __global__ void fk_l2_prefetch(const char* __restrict__ p, long long bytes) {
  fk_pdl_entry();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const long long chunks = (bytes + FK_PF_CHUNK - 1) / FK_PF_CHUNK;
  for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < chunks; c += (long long)gridDim.x * blockDim.x) {
    const long long off = c * FK_PF_CHUNK;
    const unsigned size = (unsigned)min((long long)FK_PF_CHUNK, bytes - off);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(size) : "memory");
  }
#endif
}
