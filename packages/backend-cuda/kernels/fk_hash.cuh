// murmur3's 32-bit finaliser, the mixing of core's counterUniform (packages/core/src/rng.ts): the harness's seeded
// fills and the sampler's draws hash with it. Included as a file by nvcc; scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once
__device__ __forceinline__ unsigned int fk_fmix32(unsigned int h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
