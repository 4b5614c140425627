// The step's GEMV chain in one persistent launch fed through a shared-memory ring by bulk copies (the TMA engine),
// for bench/labs/gemv-persistent/gemv_persistent_lab.cu. Run 17 measured the register-fed persistent chain (lab_chain: each warp keeps
// FK_UNR 16-byte loads in flight, across product ends) no faster than kernel boundaries: at each product's end a warp's
// loads can run only FK_UNR chunks into the next product, ~1.5 KB a warp, while it waits for every block's rows. Here
// one producer lane a block streams the block's weight rows, product after product, into a ring of `stages` 4 KB slots
// (cp.async.bulk, completion counted on an mbarrier a slot), up to the ring's size ahead of the consumers: at
// 128-192 KB a block the ring holds 4-6 us of the block's share of DRAM time, so the weights keep coming while the
// consumers wait for the previous product's rows and normalise x.
//
// Block b takes rows [N b / B, N (b + 1) / B) of every product (a contiguous stretch of each weight); its 8 consumer
// warps take those rows round-robin. A row is K / 2048 slots; in slot c lane l sums vectors 256 c + l + 32 v (v < 8)
// with fk_dot16, i.e. vectors l, l + 32, ... in order, then fk_gemv_store_row: the per-lane order and shuffle tree of
// fk_gemv_stream, so with the same normalised x (lab_ring_norm: lab_norm_block's order over 256 threads) the same bits
// as ref. Products alternate between out0 and out1 as in lab_chain; blocks meet on `arrived` (consumer thread 0 spins,
// acquire; the consumers then sync on named barrier 1; the producer warp never joins it).
// Run 18: it runs, with ref's bits (the header of gemv_persistent_lab.cu has the figures and what they mean).
#pragma once
#include "lab_bulk.cuh"  // the mbarrier and bulk-copy helpers

constexpr int kRingSlotBytes = 4096;                  // one bulk copy: 2048 bf16 of one row
constexpr int kRingSlotVecs = kRingSlotBytes / 16;    // 256 vectors: 8 a lane
constexpr int kRingConsumers = 8;                     // consumer warps (256 threads: the norm's block size in ref)
constexpr int kRingThreads = (kRingConsumers + 1) * 32;  // and one producer warp

// Named barrier 1 over the consumer warps. bar.sync is warp-aligned: the __syncwarp first reconverges lanes that took a
// branch of their own (thread 0's spin, lane 0's store), which the compiler does for __syncthreads but not for asm.
__device__ __forceinline__ void lab_consumers_sync() {
  __syncwarp();
  asm volatile("bar.sync 1, %0;" ::"n"(kRingConsumers * 32) : "memory");
}

// lab_norm by the consumer threads: x [0, K) normalised into xn.
__device__ __forceinline__ void lab_ring_norm(T* xn, const T* x, int K, float* red) {
  // fk_block_sum's tree over the consumer warps, meeting on their named barrier: the same bits as ref's 256-thread norm
  lab_norm(xn, x, K, threadIdx.x, kRingConsumers * 32, [&](float v) { return fk_block_sum_over<kRingConsumers>(v, red, [] { lab_consumers_sync(); }); },
           [] { lab_consumers_sync(); });
}

// Dynamic shared memory: the ring (stages slots), xn [maxK], then 2 * stages mbarriers (full, empty) and `stages` use
// numbers. A slot's use u is chunk u * stages + s of the block's stream. Warps consume their rows' chunks out of
// stream order (warp w's next row is 8 rows on), so a warp may reach use u + 1 of a slot while use u is still being
// filled or read; an mbarrier parity wait would then take the still-running phase u for an already completed one (it
// only knows the current phase and the one before). So a consumer first waits until the producer has published use u
// in the slot's use number (written after use u - 1 was released, so phase u - 1 of `full` is complete), then waits on
// `full` with parity u & 1. Run 17's first version, without the use numbers, hung on its first launch.

// pdl: launched per product (P 1) as a programmatic dependent launch, as an engine kernel would be: every block lets
// the next launch start at once (its producer then streams that product's weights as soon as a block of it is
// resident), and the consumers wait for the launch before (griddepcontrol.wait: its x) before their norm.
extern "C" __global__ void __launch_bounds__(kRingThreads) lab_ring_chain(const Phase* __restrict__ ph, int P, const T* __restrict__ x0, T* out0,
                                                                         T* out1, unsigned* arrived, int stages, int maxK, int pdl) {
  if (pdl) asm volatile("griddepcontrol.launch_dependents;" :::);
  extern __shared__ __align__(16) unsigned char lab_smem[];  // (lab_chain declares it too: one alignment)
  unsigned char* ring = lab_smem;
  T* xn = reinterpret_cast<T*>(lab_smem + (size_t)stages * kRingSlotBytes);
  unsigned long long* full = reinterpret_cast<unsigned long long*>(lab_smem + (size_t)stages * kRingSlotBytes + (size_t)maxK * sizeof(T));
  unsigned long long* empty = full + stages;
  volatile unsigned* slotUse = reinterpret_cast<volatile unsigned*>(empty + stages);  // the use the slot is being filled for
  __shared__ float red[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int B = gridDim.x, b = blockIdx.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      lab_mbar_init(&full[s], 1);   // the producer's arrive (plus the copy's bytes)
      lab_mbar_init(&empty[s], 1);  // the consuming warp's lane 0
      slotUse[s] = ~0u;             // no use yet
    }
    lab_mbar_init_fence();
  }
  __syncthreads();

  if (warp == kRingConsumers) {  // the producer: one lane streams every product's rows of this block, in order
    if (lane != 0) return;
    unsigned g = 0;  // slots filled so far (slot g % stages, its use number g / stages)
    for (int q = 0; q < P; ++q) {
      const int N = ph[q].N, K = ph[q].K, cpr = K / (kRingSlotBytes / 2);
      const int lo = (int)((long long)N * b / B), hi = (int)((long long)N * (b + 1) / B);
      const unsigned char* src = reinterpret_cast<const unsigned char*>(ph[q].w + (long long)lo * K);
      for (int i = 0; i < (hi - lo) * cpr; ++i, ++g) {
        const int s = g % stages;
        if (g >= (unsigned)stages) lab_mbar_wait(&empty[s], (g / stages - 1) & 1);  // its previous chunk was consumed
        slotUse[s] = g / stages;  // published first: a consumer of this use may wait on `full` from now on
        lab_mbar_expect(&full[s], kRingSlotBytes);
        lab_bulk_load(ring + (size_t)s * kRingSlotBytes, src + (size_t)i * kRingSlotBytes, kRingSlotBytes, &full[s]);
      }
    }
    return;
  }

  if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned gbase = 0;  // slots of the products before this one (the producer's g at its start)
  for (int q = 0; q < P; ++q) {
    const int N = ph[q].N, K = ph[q].K, cpr = K / (kRingSlotBytes / 2);
    const int lo = (int)((long long)N * b / B), hi = (int)((long long)N * (b + 1) / B);
    const T* x = q == 0 ? x0 : ((q - 1) % 2 ? out1 : out0);
    T* y = q % 2 ? out1 : out0;
    if (q > 0) {  // every block stored product q - 1 (the producer streams product q meanwhile)
      if (threadIdx.x == 0) {
        for (;;) {
          unsigned n;
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(n) : "l"(arrived) : "memory");
          if (n >= (unsigned)(q * B)) break;
          __nanosleep(32);
        }
        __threadfence();
      }
      lab_consumers_sync();
    }
    lab_ring_norm(xn, x, K, red);
    const uint4* xn4 = reinterpret_cast<const uint4*>(xn);
    for (int i = warp; i < hi - lo; i += kRingConsumers) {
      float acc[1] = {0.f};
      for (int c = 0; c < cpr; ++c) {
        const unsigned g = gbase + (unsigned)(i * cpr + c);
        const int s = g % stages;
        while (slotUse[s] != g / stages) {
        }
        lab_mbar_wait(&full[s], (g / stages) & 1);
        const uint4* wv = reinterpret_cast<const uint4*>(ring + (size_t)s * kRingSlotBytes);
#pragma unroll
        for (int v = 0; v < kRingSlotVecs / 32; ++v) acc[0] = fk_dot16(wv[lane + 32 * v], xn4[c * kRingSlotVecs + lane + 32 * v], acc[0]);
        __syncwarp();
        if (lane == 0) lab_mbar_arrive(&empty[s]);  // the FMAs above used every value read from the slot
      }
      fk_gemv_store_row(acc, 1, lane, y, nullptr, N, lo + i);
    }
    gbase += (unsigned)((hi - lo) * cpr);
    lab_consumers_sync();  // the block's rows are stored, and xn is free for the next product's norm
    if (threadIdx.x == 0 && arrived) {  // (per product: no counter)
      __threadfence();
      atomicAdd(arrived, 1u);
    }
  }
}
