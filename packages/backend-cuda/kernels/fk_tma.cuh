// Tensor-memory-accelerator (TMA, sm_90) loads for the warp-specialised kernels: a box of a tensor described by a
// CUtensorMap (built on the host with cuTensorMapEncodeTiled) copied into shared memory by the hardware, its bytes
// counted on an mbarrier. Included at file scope (its own namespace); scripts/embed-kernels.mjs inlines it for NVRTC.
//
// FkTensorMap is the driver's opaque 128-byte CUtensorMap, declared here so the kernels compile without cuda.h (NVRTC
// has no driver header); the host passes the encoded bytes as a __grid_constant__ parameter, which keeps the map in
// parameter space, where the TMA unit may read it by its generic address.
#pragma once

struct alignas(64) FkTensorMap {
  unsigned long long opaque[16];
};

namespace fktma {

typedef unsigned int u32;

// Fetches the map into the TMA unit's descriptor cache ahead of the first copy that uses it.
__device__ __forceinline__ void prefetch_map(const FkTensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// The box at coordinates (c0, c1, c2) (innermost first) of a 3-D map into shared memory at dst, completing `bytes`
// (the box's size, out-of-bounds elements included: they arrive as zeros) on the mbarrier bar.
__device__ __forceinline__ void load_3d(u32 dst, const FkTensorMap* map, u32 bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

}  // namespace fktma
