// Hopper's bulk-copy engine (cp.async.bulk, sm_90+) and the shared-memory mbarriers that count its bytes, for
// lab_ring_chain.cuh. A copy needs no registers and no waiting thread: one lane issues it, and consumers wait on
// the slot's mbarrier phase. (Run 18 also built an engine GEMV on them, fk_gemv_ring: slower in the decode step, taken
// out; docs/experiments.md, commit 7473e96.)
#pragma once

__device__ __forceinline__ unsigned lab_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void lab_mbar_init(unsigned long long* b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(lab_smem_addr(b)), "r"(count) : "memory");
}
// Makes the initialisations above visible to the async proxy (the copy engine) before any copy signals them.
__device__ __forceinline__ void lab_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void lab_mbar_arrive(unsigned long long* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(lab_smem_addr(b)) : "memory");
}
// One arrival that also expects `bytes` of copies to land before the phase completes.
__device__ __forceinline__ void lab_mbar_expect(unsigned long long* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(lab_smem_addr(b)), "r"(bytes) : "memory");
}
// Until the barrier's phase with parity `parity` has completed (it knows only the current phase and the one before:
// the caller must know which of the two it means).
__device__ __forceinline__ void lab_mbar_wait(unsigned long long* b, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n LAB_MBAR_WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra LAB_MBAR_WAIT;\n}\n" ::"r"(lab_smem_addr(b)),
      "r"(parity)
      : "memory");
}
// `bytes` (a multiple of 16, 16-byte aligned ends) from global `src` into shared `dst`, counted on `bar` when they land.
__device__ __forceinline__ void lab_bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(lab_smem_addr(dst)), "l"(src),
               "r"(bytes), "r"(lab_smem_addr(bar))
               : "memory");
}
