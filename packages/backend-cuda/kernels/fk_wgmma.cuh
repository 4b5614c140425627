// Hopper warpgroup MMA (wgmma, sm_90a only) for the prefill kernel (attention_prefill.cu, fk_varlen_prefill_wgmma):
// 64 x 128 tiles of 16-bit elements in shared memory with the 128-byte swizzle, their matrix descriptors, and the two
// products the kernel needs: S (m64n64, f32) = A B^T with A and B K-major in shared memory, and O (m64n128, f32) += P V
// with P from registers and V N-major in shared memory. Included inside the kernel's namespace, after fk_mma.cuh
// (u32, Mma). Checked on the H200 by bench/prefill_wgmma_lab.cu's wgmma_unit (both forms against float64).
//
// Accumulator layout of both products (thread t of the warpgroup, warp w = t / 32, lane l): registers 4 i .. 4 i + 3
// hold row 16 w + l / 4 (the first two) and that row + 8 (the last two), columns 8 i + 2 (l % 4) and + 1.
#pragma once

typedef unsigned long long u64;

namespace wg {

constexpr int ROWS = 64;                // rows of a tile: a warpgroup's query rows, or a tile's keys
constexpr int COLS = 128;               // elements of a row (head dim 128)
constexpr int TILE_BYTES = ROWS * COLS * 2;
constexpr int BLOCK_BYTES = ROWS * 128;  // one 64-column block of a tile: 64 rows of 128 bytes

// Byte offset of 16-byte chunk c (0..15: elements 8c..8c+7) of row r in a tile: two 64-column blocks of 64 rows x 128 B,
// in 8-row atoms of 1024 B whose chunks are swizzled by the row (the layout the descriptors' 128-byte swizzle reads; the
// tile's base must be 1024-byte aligned).
__device__ __forceinline__ u32 tile_off(int r, int c) { return (u32)((c >> 3) * BLOCK_BYTES + r * 128 + (((c & 7) ^ (r & 7)) << 4)); }

// A shared-memory matrix descriptor: start address, leading and stride byte offsets, 128-byte swizzle.
__device__ __forceinline__ u64 desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// cp.async's writes (generic proxy) made visible to wgmma's reads (async proxy); each thread fences its own copies.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving uses of an accumulator above the wait (the asm outputs are written when it is issued).
template <int N>
__device__ __forceinline__ void pin(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

#define FK_WG_S_REGS                                                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, " \
  "%26, %27, %28, %29, %30, %31}"
#define FK_WG_S_OUT                                                                                                         \
  "+f"(s[0]), "+f"(s[1]), "+f"(s[2]), "+f"(s[3]), "+f"(s[4]), "+f"(s[5]), "+f"(s[6]), "+f"(s[7]), "+f"(s[8]), "+f"(s[9]),   \
      "+f"(s[10]), "+f"(s[11]), "+f"(s[12]), "+f"(s[13]), "+f"(s[14]), "+f"(s[15]), "+f"(s[16]), "+f"(s[17]), "+f"(s[18]), \
      "+f"(s[19]), "+f"(s[20]), "+f"(s[21]), "+f"(s[22]), "+f"(s[23]), "+f"(s[24]), "+f"(s[25]), "+f"(s[26]), "+f"(s[27]), \
      "+f"(s[28]), "+f"(s[29]), "+f"(s[30]), "+f"(s[31])
#define FK_WG_O_REGS                                                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, " \
  "%26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "   \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FK_WG_O_OUT                                                                                                            \
  "+f"(o[0]), "+f"(o[1]), "+f"(o[2]), "+f"(o[3]), "+f"(o[4]), "+f"(o[5]), "+f"(o[6]), "+f"(o[7]), "+f"(o[8]), "+f"(o[9]),      \
      "+f"(o[10]), "+f"(o[11]), "+f"(o[12]), "+f"(o[13]), "+f"(o[14]), "+f"(o[15]), "+f"(o[16]), "+f"(o[17]), "+f"(o[18]),    \
      "+f"(o[19]), "+f"(o[20]), "+f"(o[21]), "+f"(o[22]), "+f"(o[23]), "+f"(o[24]), "+f"(o[25]), "+f"(o[26]), "+f"(o[27]),    \
      "+f"(o[28]), "+f"(o[29]), "+f"(o[30]), "+f"(o[31]), "+f"(o[32]), "+f"(o[33]), "+f"(o[34]), "+f"(o[35]), "+f"(o[36]),    \
      "+f"(o[37]), "+f"(o[38]), "+f"(o[39]), "+f"(o[40]), "+f"(o[41]), "+f"(o[42]), "+f"(o[43]), "+f"(o[44]), "+f"(o[45]),    \
      "+f"(o[46]), "+f"(o[47]), "+f"(o[48]), "+f"(o[49]), "+f"(o[50]), "+f"(o[51]), "+f"(o[52]), "+f"(o[53]), "+f"(o[54]),    \
      "+f"(o[55]), "+f"(o[56]), "+f"(o[57]), "+f"(o[58]), "+f"(o[59]), "+f"(o[60]), "+f"(o[61]), "+f"(o[62]), "+f"(o[63])

// The two products for one element type: ty is its PTX name. qk: s = (acc ? s : 0) + A B^T (A, B K-major descriptors).
// pv: o += P V (P as 4 registers of element pairs, V an N-major descriptor: imm-trans-b 1).
#define FK_WG_PRODUCTS(X, ty)                                                                                                 \
  template <>                                                                                                                 \
  struct Mma64<X> {                                                                                                           \
    static __device__ __forceinline__ void qk(float (&s)[32], u64 da, u64 db, int acc) {                                      \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32." ty "." ty " "       \
                   FK_WG_S_REGS ", %32, %33, p, 1, 1, 0, 0;\n}\n"                                                             \
                   : FK_WG_S_OUT                                                                                              \
                   : "l"(da), "l"(db), "r"(acc));                                                                             \
    }                                                                                                                         \
    static __device__ __forceinline__ void pv(float (&o)[64], const u32 (&a)[4], u64 db) {                                    \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32." ty "." ty " "      \
                   FK_WG_O_REGS ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                               \
                   : FK_WG_O_OUT                                                                                              \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                                            \
    }                                                                                                                         \
  };

template <typename X> struct Mma64;
FK_WG_PRODUCTS(__nv_bfloat16, "bf16")
FK_WG_PRODUCTS(__half, "f16")
// fp32: only so the file compiles with FK_T=float (the host never launches the wgmma kernel for it).
template <> struct Mma64<float> {
  static __device__ __forceinline__ void qk(float (&)[32], u64, u64, int) {}
  static __device__ __forceinline__ void pv(float (&)[64], const u32 (&)[4], u64) {}
};
#undef FK_WG_PRODUCTS
#undef FK_WG_S_REGS
#undef FK_WG_S_OUT
#undef FK_WG_O_REGS
#undef FK_WG_O_OUT

// s = A B^T for [64 x 128] tiles A at shared address a0 and B at b0 (K-major): 8 steps of 16 over the row (32 B a step
// inside a 64-column block), then waits for them. s[i][0..3] are the instruction's registers 4 i .. 4 i + 3.
template <typename X>
__device__ __forceinline__ void qk_tile(float (&s2)[8][4], u32 a0, u32 b0) {
  float(&s)[32] = *reinterpret_cast<float(*)[32]>(&s2);  // the accumulator as the instruction lists it
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.f;
  fence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const u32 off = (ks >> 2) * BLOCK_BYTES + (ks & 3) * 32;
    Mma64<X>::qk(s, desc(a0 + off, 16, 1024), desc(b0 + off, 16, 1024), ks);
  }
  commit();
  wait_all();
  pin(s);
}

// o += P V for P [64 x 64] as A fragments (pa[kk]: keys 16 kk .. 16 kk + 15; rows and keys by the accumulator layout)
// and the [64 keys x 128] tile V at v0 (N-major: the next 64 columns a block on, the next 8 keys an atom on): 4 steps of
// 16 keys, then waits for them.
template <typename X>
__device__ __forceinline__ void pv_tile(float (&o2)[16][4], const u32 (&pa)[4][4], u32 v0) {
  float(&o)[64] = *reinterpret_cast<float(*)[64]>(&o2);
  fence();  // o and pa were written by the threads: ordered before the wgmmas read them
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) Mma64<X>::pv(o, pa[kk], desc(v0 + kk * 16 * 128, BLOCK_BYTES, 1024));
  commit();
  wait_all();
  pin(o);
}

}  // namespace wg
