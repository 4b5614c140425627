// Hopper warpgroup MMA (wgmma, sm_90a) at m64 for the FlashAttention-3-style kernel (attention_fa3.cu):
// S [64 x 128 keys] = Q K^T with both operands in shared memory (K-major, m64n128k16), and O [64 x D] += P V with P
// from registers and V N-major in shared memory (m64n128k16 for head dim 128, m64n64k16 for 64). Tiles are the TMA's
// 128-byte-swizzled boxes: a 64-column block of R rows x 128 B, 8-row atoms of 1024 B, blocks R x 128 B apart (base
// 1024-byte aligned). Also what both warp-specialised wgmma kernels (attention_fa3.cu, fused_moe_wgmma.cu) do around
// the products: packing accumulator pairs to 16 bits, the warpgroups' register hand-off. Included at file scope (its
// own namespace); scripts/embed-kernels.mjs inlines it for NVRTC.
//
// Accumulator layout (thread t of the warpgroup, warp w = t / 32, lane l): registers 4 i .. 4 i + 3 hold row
// 16 w + l / 4 (the first two) and that row + 8 (the last two), columns 8 i + 2 (l % 4) and + 1 (as fk_wgmma.cuh).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace fkwg {

typedef unsigned int u32;
typedef unsigned long long u64;

// A shared-memory matrix descriptor: start address, leading and stride byte offsets, 128-byte swizzle.
__device__ __forceinline__ u64 desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N of this warpgroup's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving uses of an accumulator above the wait (the asm outputs count as written at issue).
template <int N>
__device__ __forceinline__ void pin(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Two accumulator floats as a packed pair of X (low half = first, rounded to nearest): an A fragment register of the
// rs products, or two output elements of an epilogue.
template <typename X> __device__ __forceinline__ u32 pack2(float lo, float hi);
template <> __device__ __forceinline__ u32 pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const u32*>(&v);
}
template <> __device__ __forceinline__ u32 pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const u32*>(&v);
}

// The warp-specialised kernels' register hand-off (setmaxnreg: the whole warpgroup executes it): the producer
// warpgroup gives registers back, the consumers take them for their accumulators.
template <int N> __device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> __device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

// The accumulator operands of the products, in pieces of 32 registers (kept defined: fk_wgmma_n256.cuh composes its
// 128 from them too): FK_WG_ACC32(b) lists d[b] .. d[b + 31] as read-write floats, FK_WG_REGS_<first>_<last> names
// operands %first .. %last in the instruction text.
#define FK_WG_ACC8(b) \
    "+f"(d[(b)]), "+f"(d[(b) + 1]), "+f"(d[(b) + 2]), "+f"(d[(b) + 3]), \
    "+f"(d[(b) + 4]), "+f"(d[(b) + 5]), "+f"(d[(b) + 6]), "+f"(d[(b) + 7])
#define FK_WG_ACC32(b) FK_WG_ACC8(b), FK_WG_ACC8((b) + 8), FK_WG_ACC8((b) + 16), FK_WG_ACC8((b) + 24)
#define FK_WG_REGS_0_31 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FK_WG_REGS_32_63 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FK_WG_REGS_64_95 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define FK_WG_REGS_96_127 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

#define FK_WG128_D "{" FK_WG_REGS_0_31 ", " FK_WG_REGS_32_63 "}"
#define FK_WG128_OUT FK_WG_ACC32(0), FK_WG_ACC32(32)

// The two products for one element type (ty: its PTX name). ss: d = (acc ? d : 0) + A B^T, A and B K-major
// descriptors. rs: d += A B, A as 4 registers of element pairs (the m64k16 A fragment), B an N-major descriptor
// (scale-d is a predicate operand: set from a register, as the verified fk_wgmma.cuh does, not an immediate).
#define FK_WG128_PRODUCTS(X, ty)                                                                                   \
  template <>                                                                                                      \
  struct M64N128<X> {                                                                                              \
    static __device__ __forceinline__ void ss(float (&d)[64], u64 da, u64 db, int acc) {                          \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32." ty "." ty  \
                   " " FK_WG128_D ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                               \
                   : FK_WG128_OUT                                                                                   \
                   : "l"(da), "l"(db), "r"(acc));                                                                   \
    }                                                                                                              \
    static __device__ __forceinline__ void rs(float (&d)[64], const u32 (&a)[4], u64 db) {                         \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32." ty "." ty  \
                   " " FK_WG128_D ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                  \
                   : FK_WG128_OUT                                                                                   \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                                  \
    }                                                                                                              \
  };

template <typename X> struct M64N128;
FK_WG128_PRODUCTS(__nv_bfloat16, "bf16")
FK_WG128_PRODUCTS(__half, "f16")
#undef FK_WG128_PRODUCTS
#undef FK_WG128_D
#undef FK_WG128_OUT

#define FK_WG64_D "{" FK_WG_REGS_0_31 "}"
#define FK_WG64_OUT FK_WG_ACC32(0)

// rs at n64 (head dim 64's P V): d += A B, A as 4 registers, B an N-major descriptor.
#define FK_WG64_PRODUCTS(X, ty)                                                                                    \
  template <>                                                                                                      \
  struct M64N64<X> {                                                                                               \
    static __device__ __forceinline__ void rs(float (&d)[32], const u32 (&a)[4], u64 db) {                         \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32." ty "." ty    \
                   " " FK_WG64_D ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                   \
                   : FK_WG64_OUT                                                                                    \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                                  \
    }                                                                                                              \
  };

template <typename X> struct M64N64;
FK_WG64_PRODUCTS(__nv_bfloat16, "bf16")
FK_WG64_PRODUCTS(__half, "f16")
#undef FK_WG64_PRODUCTS
#undef FK_WG64_D
#undef FK_WG64_OUT

}  // namespace fkwg
