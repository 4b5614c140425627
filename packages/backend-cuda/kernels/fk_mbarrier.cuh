// Shared-memory mbarriers (sm_90) for the warp-specialised kernels: a producer's TMA copies complete a barrier's
// transaction count, consumers wait on its phase parity and arrive on an "empty" barrier to hand a stage back.
// Included at file scope (its own namespace); nvcc reads it as a file, scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once

namespace fkbar {

typedef unsigned int u32;

// An mbarrier expecting `count` arrivals a phase. Initialised by one thread, then fenced and published (init_fence
// and a CTA barrier) before any thread or the TMA unit uses it.
__device__ __forceinline__ void init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialisations visible to the async proxy (TMA's complete_tx) as well as to the other threads.
__device__ __forceinline__ void init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// One arrival that also announces `bytes` of TMA transactions the phase must see before it completes.
__device__ __forceinline__ void arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// One plain arrival (a consumer handing a stage back).
__device__ __forceinline__ void arrive(u32 bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory"); }

// Blocks until the phase of the given parity has completed (phase k of a barrier has parity k & 1). try_wait
// suspends the thread for a hardware-chosen time before it reports false, so the loop does not spin hot.
// -DFK_MBAR_WATCHDOG_CYCLES=N (labs only): a wait that lasts N clock cycles traps, so a pipeline bug is a launch
// error instead of a hang (no printf: a call would serialise the kernel's wgmma pipeline and spill).
__device__ __forceinline__ void wait(u32 bar, u32 parity) {
  u32 done;
#ifdef FK_MBAR_WATCHDOG_CYCLES
  const long long t0 = clock64();
#endif
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
#ifdef FK_MBAR_WATCHDOG_CYCLES
    if (!done && clock64() - t0 > (long long)(FK_MBAR_WATCHDOG_CYCLES)) {
      __trap();
    }
#endif
  } while (!done);
}

// Named barriers (ids 1..15; 0 is __syncthreads) over `threads` threads: sync waits for them all, arrive only counts
// the caller in (the other side of a ping-pong hand-off).
__device__ __forceinline__ void named_sync(u32 id, u32 threads) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }
__device__ __forceinline__ void named_arrive(u32 id, u32 threads) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }

}  // namespace fkbar
