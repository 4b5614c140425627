// Hopper warpgroup MMA at m64n256k16 (sm_90a) for the MoE prefill GEMM (fused_moe_wgmma.cu): D [64 x 256] (f32,
// 128 registers a thread) = (acc ? D : 0) + A B^T with A [64 x 16] and B [256 x 16] both K-major in shared memory
// (descriptors from fk_wgmma_m64.cuh's fkwg::desc). The same instruction form as fkwg::M64N128::ss, twice as wide: the
// accumulator layout is fk_wgmma_m64.cuh's (registers 4 i .. 4 i + 3: row 16 w + l / 4 and + 8, columns 8 i + 2 (l % 4)
// and + 1, i = 0 .. 31). Included at file scope after fk_wgmma_m64.cuh; scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once
#include "fk_wgmma_m64.cuh"

namespace fkwg {

// fk_wgmma_m64.cuh's 32-register pieces of the accumulator operands, four of them
#define FK_WG256_D "{" FK_WG_REGS_0_31 ", " FK_WG_REGS_32_63 ", " FK_WG_REGS_64_95 ", " FK_WG_REGS_96_127 "}"
#define FK_WG256_OUT FK_WG_ACC32(0), FK_WG_ACC32(32), FK_WG_ACC32(64), FK_WG_ACC32(96)

#define FK_WG256_PRODUCTS(X, ty)                                                                                   \
  template <>                                                                                                      \
  struct M64N256<X> {                                                                                              \
    static __device__ __forceinline__ void ss(float (&d)[128], u64 da, u64 db, int acc) {                         \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\nwgmma.mma_async.sync.aligned.m64n256k16.f32." ty "." ty \
                   " " FK_WG256_D ", %128, %129, p, 1, 1, 0, 0;\n}\n"                                            \
                   : FK_WG256_OUT                                                                                   \
                   : "l"(da), "l"(db), "r"(acc));                                                                   \
    }                                                                                                              \
  };

template <typename X> struct M64N256;
FK_WG256_PRODUCTS(__nv_bfloat16, "bf16")
FK_WG256_PRODUCTS(__half, "f16")
#undef FK_WG256_PRODUCTS
#undef FK_WG256_D
#undef FK_WG256_OUT

}  // namespace fkwg
