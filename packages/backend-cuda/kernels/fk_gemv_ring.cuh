// fk_gemv_ring: gemv.cu's product at M 1 with the weight streamed through a shared-memory ring by bulk copies (the
// TMA engine; fk_bulk.cuh) instead of each lane's registers. Included by gemv.cu (its defines and helpers) for FK_M 1.
//
// Why: fk_gemv_stream keeps FK_UNR 16-byte loads a lane in flight, ~48 KB an SM at 48 warps, and under PDL only those
// first loads run before the wait for x. Here one producer lane a block issues 4 KB copies up to the ring's size ahead
// (stages x 4 KB, ~44-80 KB a block) from the moment the block starts, so a product's weights stream while the
// product before it finishes and while the consumers normalise x. bench/gemv_persistent_lab.cu measured the 129
// products of a Llama-3-8B decode step, one launch each in a PDL graph, at 3931.6 us against fk_gemv_stream's 4145.7
// (3 blocks an SM, 11 slots; run 18), with the same bits.
//
// Layout: block b takes the logical rows [R b / B, R (b + 1) / B) (a contiguous stretch of the weight; FK_GLU's logical
// row r is gate row r then up row r + R); the producer (warp FK_WARPS, lane 0) copies their 4 KB slots in order; the
// FK_WARPS consumer warps take the block's rows round-robin. In slot c of a row lane l sums vectors 256 c + l + 32 v
// (v < 8) in that order: fk_gemv_stream's per-lane order, and the same shuffle tree and stores, so the same bits. K *
// sizeof(FK_T) must be a multiple of 4096 (the host checks: linear.ts, chooseLinearPath).
//
// The consumers meet on named barrier 1 (the norm's block sum and its end); the producer never joins it. Warps consume
// the ring out of stream order (warp w's next row is FK_WARPS rows on), so a warp may reach use u + 1 of a slot while use
// u is still being filled or read, and an mbarrier parity wait would take the running phase for a completed one (it
// knows only the current phase and the one before). So the producer publishes each slot's use number before it fills
// it, and a consumer waits for its use number there before it waits on the slot's `full` barrier (the lab's first
// version, without the use numbers, hung).
//
// Dynamic shared memory (the host sizes it: gemvRingSharedBytes in linear.ts): the ring (stages x 4 KB), then x (K
// elements; FK_NORM's normalised), then `full` and `empty` (stages mbarriers each) and the use numbers (stages words).
#pragma once
#include "fk_bulk.cuh"

constexpr int kFkRingSlotBytes = 4096;
constexpr int kFkRingSlotVecs = kFkRingSlotBytes / 16;  // 256 vectors: 8 a lane
#define FK_RING_THREADS ((FK_WARPS + 1) * 32)           // FK_WARPS consumer warps and the producer warp

// Named barrier 1 over the consumer warps. bar.sync is warp-aligned: the __syncwarp first reconverges lanes that took
// a branch of their own (lane 0's store), which the compiler does for __syncthreads but not for asm.
__device__ __forceinline__ void fk_ring_consumers_sync() {
  __syncwarp();
  asm volatile("bar.sync 1, %0;" ::"n"(FK_WARPS * 32) : "memory");
}

extern "C" __global__ void __launch_bounds__(FK_RING_THREADS)
    fk_gemv_ring(FK_T* __restrict__ y, const FK_T* __restrict__ x, const FK_T* __restrict__ w, const FK_T* __restrict__ bias, int M, int N,
                 int K, long long xs, const FK_T* __restrict__ res_in, FK_T* __restrict__ res_out, const FK_T* __restrict__ norm_w, float eps,
                 int stages) {
#if !FK_LATE_TRIGGER
  fk_pdl_trigger();  // the next launch may start now: its producers stream its weights while this one finishes
#endif
  extern __shared__ __align__(16) unsigned char fk_gemv_smem[];
  unsigned char* ring = fk_gemv_smem;
  FK_T* xn = reinterpret_cast<FK_T*>(fk_gemv_smem + (size_t)stages * kFkRingSlotBytes);  // x (FK_NORM: normalised)
  unsigned long long* full = reinterpret_cast<unsigned long long*>(fk_gemv_smem + (size_t)stages * kFkRingSlotBytes + (size_t)K * sizeof(FK_T));
  unsigned long long* empty = full + stages;
  volatile unsigned* slotUse = reinterpret_cast<volatile unsigned*>(empty + stages);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#if FK_GLU
  const int R = N / 2;  // logical rows: gate row r and up row r + R each
#else
  const int R = N;
#endif
  const int rowBytes = K * (int)sizeof(FK_T);
  const int cpr = rowBytes / kFkRingSlotBytes;  // slots a weight row
  const int rowSlots = FK_GLU ? 2 * cpr : cpr;  // slots a logical row
  const long long blk = blockIdx.x, blocks = gridDim.x;
  const int lo = (int)(R * blk / blocks), hi = (int)(R * (blk + 1) / blocks);  // this block's logical rows
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      fk_mbar_init(&full[s], 1);   // the producer's arrive (plus the copy's bytes)
      fk_mbar_init(&empty[s], 1);  // the consuming warp's lane 0
      slotUse[s] = ~0u;            // no use yet
    }
    fk_mbar_init_fence();
  }
  __syncthreads();

  if (warp == FK_WARPS) {  // the producer: the weight only (written by no kernel), so no PDL wait
    if (lane != 0) return;
    unsigned g = 0;  // slots filled so far: slot g % stages, its use g / stages
    for (int r = lo; r < hi; ++r) {
      for (int c = 0; c < rowSlots; ++c, ++g) {
        const int s = (int)(g % (unsigned)stages);
        if (g >= (unsigned)stages) fk_mbar_wait(&empty[s], (g / stages - 1) & 1);  // its use before was consumed
        slotUse[s] = g / stages;  // published first: a consumer of this use may wait on `full` from now on
        fk_mbar_expect(&full[s], kFkRingSlotBytes);
        const int wr = FK_GLU && c >= cpr ? r + R : r;  // FK_GLU: the up row after the gate row
        const unsigned char* src = reinterpret_cast<const unsigned char*>(w) + (long long)wr * rowBytes + (long long)(c % cpr) * kFkRingSlotBytes;
        fk_bulk_load(ring + (size_t)s * kFkRingSlotBytes, src, kFkRingSlotBytes, &full[s]);
      }
    }
    return;
  }

  fk_pdl_wait();  // x (and res_in) come from the kernel before
#if FK_NORM
  fk_gemv_norm_x_over<FK_WARPS>(xn, x, res_in, res_out, norm_w, K, eps, [] { fk_ring_consumers_sync(); });
#else
  // x staged in shared memory too: the ring leaves L1 too small to keep it (run 18: the down projection's 28 KB x read
  // through L2 for every slot took 44.5 us against fk_gemv_stream's 30.7)
  for (int j = threadIdx.x; j < K / FK_VEC; j += FK_WARPS * 32) reinterpret_cast<uint4*>(xn)[j] = __ldg(reinterpret_cast<const uint4*>(x) + j);
  fk_ring_consumers_sync();
#endif
  const uint4* xv = reinterpret_cast<const uint4*>(xn);
  for (int i = warp; i < hi - lo; i += FK_WARPS) {
    float acc[1] = {0.f};
#if FK_GLU
    float gate[1];
#endif
    for (int c = 0; c < rowSlots; ++c) {
      const unsigned g = (unsigned)(i * rowSlots + c);
      const int s = (int)(g % (unsigned)stages);
      while (slotUse[s] != g / stages) {
      }
      fk_mbar_wait(&full[s], (g / stages) & 1);
      const uint4* wv = reinterpret_cast<const uint4*>(ring + (size_t)s * kFkRingSlotBytes);
      const int j0 = (c % cpr) * kFkRingSlotVecs + lane;  // the row's vector this lane starts the slot at
#pragma unroll
      for (int v = 0; v < kFkRingSlotVecs / 32; ++v) {
        acc[0] = fk_dot16(wv[lane + 32 * v], xv[j0 + 32 * v], acc[0]);
      }
      __syncwarp();
      if (lane == 0) fk_mbar_arrive(&empty[s]);  // every lane's reads of the slot are done
#if FK_GLU
      if (c == cpr - 1) {  // the gate row is summed: keep it, start the up row
        fk_gemv_reduce(acc);
        gate[0] = acc[0];
        acc[0] = 0.f;
      }
#endif
    }
#if FK_GLU
    fk_gemv_reduce(acc);
    fk_gemv_store_glu(gate, acc, 1, lane, y, bias, R, lo + i);
#else
    fk_gemv_store_row(acc, 1, lane, y, bias, N, lo + i);
#endif
  }
}
