/**
 * Host stand-ins for the tensor-core primitives of fk_mma.cuh (mma.sync m16n8k16 with bf16 operands, ldmatrix x4 / x2,
 * plain and .trans, cp.async), for running a kernel's real source under test/host-cuda.ts (g++, a CTA's threads as
 * std::threads; attention_mla_decode.cu in mla-decode-host.test.ts, gla_chunk_tc.cu in gla-tc-host.test.ts).
 * Each collective is a warp exchange: the 32 lanes deposit their registers (or row addresses) in a per-warp slot, meet
 * at the warp's barrier, and each lane builds its own result from the slot as the PTX ISA lays the fragments out; a
 * second barrier frees the slot. bf16 is its bit pattern (round-to-nearest-even from float), the mma's products are
 * summed in double and added to the fp32 accumulator. cp.async copies at once (a kernel that waits before reading
 * sees the same bytes), zero-filling past src_bytes. Shared memory is one global buffer (`fk_smem`, what a kernel's
 * `extern __shared__` names; no static __shared__ arrays), and `smem_u32` gives offsets into it; fk_smem_poison /
 * fk_smem_overrun hold a launch to its planned bytes (a GPU faults past them). What this cannot see:
 * races between warps, bank conflicts, f16.
 *
 * `namespace` is the kernel's namespace: the stand-ins are declared in it, as fk_mma.cuh is included there. The CTA
 * barrier is for `ctaThreads` threads; a source with launches of other block sizes calls `fk_cta_threads(n)` before each.
 */
export function warpMmaHostShim(namespace: string, ctaThreads: number): string {
  return `#include <algorithm>
#include <cstdint>
using std::min;
using std::max;
#undef __launch_bounds__
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)
struct __nv_bfloat16 { unsigned short x; };
alignas(128) unsigned char fk_smem[1 << 18];
// the launch's planned dynamic shared memory is its first planned bytes: the rest holds 0xff (a NaN in f32 / bf16, so
// a read past the plan shows in the outputs), and after the launch fk_smem_overrun counts the bytes written there
inline void fk_smem_poison(size_t planned) { std::memset(fk_smem + planned, 0xff, sizeof(fk_smem) - planned); }
inline long fk_smem_overrun(size_t planned) {
  long n = 0;
  for (size_t i = planned; i < sizeof(fk_smem); ++i) n += fk_smem[i] != 0xff;
  return n;
}
std::unique_ptr<std::barrier<>> fk_cta_barrier = std::make_unique<std::barrier<>>(${ctaThreads});
inline void fk_cta_threads(unsigned n) { fk_cta_barrier = std::make_unique<std::barrier<>>(n); }
inline void __syncthreads() { fk_cta_barrier->arrive_and_wait(); }
inline void fk_pdl_entry() {}
template <typename X> inline X __ldg(const X* p) { return *p; }
inline unsigned short fk_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
inline float fk_bf16_float(unsigned short b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
struct fk_warp_slot { int i[32]; uint32_t a[32][4]; uint32_t b[32][2]; uint32_t addr[32]; };
static fk_warp_slot fk_slots[32];  // a CTA of up to 1024 threads
inline fk_warp_slot& fk_slot() { return fk_slots[threadIdx.x >> 5]; }
inline void fk_warp_sync() { fk_this_warp->bar.arrive_and_wait(); }
inline int __shfl_sync(unsigned, int v, int src) {
  fk_slot().i[threadIdx.x & 31] = v;
  fk_warp_sync();
  const int r = fk_slot().i[src & 31];
  fk_warp_sync();
  return r;
}
namespace ${namespace} {
typedef unsigned int u32;
inline float neg_inf() { return -INFINITY; }
inline void st(__nv_bfloat16* p, float x) { p->x = fk_bf16_bits(x); }
inline float to_f(__nv_bfloat16 x) { return fk_bf16_float(x.x); }
template <typename X> X from_f(float x);
template <> inline __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return {fk_bf16_bits(x)}; }
inline u32 smem_u32(const void* p) { return (u32)((const unsigned char*)p - fk_smem); }
inline float fk_half_of(u32 v, int hi) { return fk_bf16_float((unsigned short)(hi ? v >> 16 : v & 0xffffu)); }
template <typename X> struct Mma;
template <> struct Mma<__nv_bfloat16> {
  static u32 pack(float lo, float hi) { return (u32)fk_bf16_bits(lo) | ((u32)fk_bf16_bits(hi) << 16); }
  // c (16 x 8, fp32) += a (16 x 16, row) b (16 x 8, col): a0..a3 hold rows g / g + 8 at k 2 t4 (+1) / 8 + 2 t4 (+1),
  // b0 / b1 k 2 t4 (+1) / 8 + 2 t4 (+1) at n g, c0..c3 rows g / g + 8 at n 2 t4 (+1); g = lane / 4, t4 = lane % 4
  static void mma(float c[4], const u32 a[4], u32 b0, u32 b1) {
    fk_warp_slot& s = fk_slot();
    const int lane = threadIdx.x & 31;
    for (int i = 0; i < 4; i++) s.a[lane][i] = a[i];
    s.b[lane][0] = b0;
    s.b[lane][1] = b1;
    fk_warp_sync();
    const int g = lane >> 2, t4 = lane & 3;
    for (int i = 0; i < 4; i++) {
      const int r = g + 8 * (i >> 1), n = 2 * t4 + (i & 1);
      double acc = 0;
      for (int k = 0; k < 16; k++) {
        const double av = fk_half_of(s.a[(r & 7) * 4 + ((k & 7) >> 1)][(r >> 3) + 2 * (k >> 3)], k & 1);
        const double bv = fk_half_of(s.b[n * 4 + ((k & 7) >> 1)][k >> 3], k & 1);
        acc += av * bv;
      }
      c[i] = (float)((double)c[i] + acc);
    }
    fk_warp_sync();
  }
};
inline unsigned short fk_smem_u16(u32 addr) { unsigned short v; std::memcpy(&v, fk_smem + addr, 2); return v; }
// ldmatrix: lanes 8 i .. 8 i + 7 address the rows of matrix i; lane l gets row l / 4, columns 2 (l % 4) and + 1 of
// each matrix (.trans: column l / 4, rows 2 (l % 4) and + 1)
template <int N, bool TRANS>
inline void fk_ldsm(u32 addr, u32* r) {
  fk_warp_slot& s = fk_slot();
  const int lane = threadIdx.x & 31;
  s.addr[lane] = addr;
  fk_warp_sync();
  for (int i = 0; i < N; i++) {
    unsigned short lo, hi;
    if (TRANS) {
      lo = fk_smem_u16(s.addr[8 * i + 2 * (lane & 3)] + 2 * (lane >> 2));
      hi = fk_smem_u16(s.addr[8 * i + 2 * (lane & 3) + 1] + 2 * (lane >> 2));
    } else {
      lo = fk_smem_u16(s.addr[8 * i + (lane >> 2)] + 4 * (lane & 3));
      hi = fk_smem_u16(s.addr[8 * i + (lane >> 2)] + 4 * (lane & 3) + 2);
    }
    r[i] = (u32)lo | ((u32)hi << 16);
  }
  fk_warp_sync();
}
inline void ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) { u32 r[4]; fk_ldsm<4, false>(addr, r); r0 = r[0]; r1 = r[1]; r2 = r[2]; r3 = r[3]; }
inline void ldsm_x4_t(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) { u32 r[4]; fk_ldsm<4, true>(addr, r); r0 = r[0]; r1 = r[1]; r2 = r[2]; r3 = r[3]; }
inline void ldsm_x2(u32 addr, u32& r0, u32& r1) { u32 r[2]; fk_ldsm<2, false>(addr, r); r0 = r[0]; r1 = r[1]; }
inline void ldsm_x2_t(u32 addr, u32& r0, u32& r1) { u32 r[2]; fk_ldsm<2, true>(addr, r); r0 = r[0]; r1 = r[1]; }
template <int B> inline void cp_async_chunk(u32 dst, const void* src, int src_bytes) {
  std::memcpy(fk_smem + dst, src, src_bytes);
  std::memset(fk_smem + dst + src_bytes, 0, B - src_bytes);
}
inline void cp_async16(u32 dst, const void* src, int src_bytes) { cp_async_chunk<16>(dst, src, src_bytes); }
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}
}  // namespace ${namespace}
`;
}
