// Programmatic dependent launch (Hopper, sm_90+). A kernel launched with LAUNCH_PDL (src/args.ts) may start while the
// kernel before it on the stream is still running, once that kernel's blocks have all executed fk_pdl_trigger (or
// ended). It must call fk_pdl_wait before it reads anything the earlier kernel wrote: the wait returns when that
// kernel has completed and its writes are visible. What a kernel does before its wait must not depend on earlier
// kernels: fk_gemv streams its weights in before it waits for x, and fk_paged_decode_mma built with FK_EARLY_KV its
// first cache tiles (all but the newest key) before it waits for q.
// fk_pdl_entry is the first statement of every kernel in the files src/launch-tuning.ts lists (a CPU test checks it).
// The instructions are compiled in only with -DFK_PDL=1, which the host passes exactly when it launches the kernel
// with LAUNCH_PDL (on an sm_90+ device, in CUDA graph captures: launch-tuning.ts): otherwise the machine code is the same
// as without them.
#pragma once
#ifndef FK_PDL
#define FK_PDL 0
#endif
#if FK_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FK_PDL_ON 1
#else
#define FK_PDL_ON 0
#endif
__device__ __forceinline__ void fk_pdl_wait() {
#if FK_PDL_ON
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets a LAUNCH_PDL kernel that follows be scheduled now; harmless when the next kernel is an ordinary launch.
__device__ __forceinline__ void fk_pdl_trigger() {
#if FK_PDL_ON
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// Wait for the kernel before (its writes are visible after this), then let the next LAUNCH_PDL kernel be scheduled:
// its launch and ramp overlap this kernel's work, one level deep (it cannot start before this one has begun).
__device__ __forceinline__ void fk_pdl_entry() {
  fk_pdl_wait();
  fk_pdl_trigger();
}

// A load of memory an earlier kernel wrote, made after fk_pdl_wait by a kernel whose wait is not its first statement
// (fk_gemv, fk_gemv_stream). In a PDL build the writer may still have been running when this kernel started; the
// read-only path (__ldg, or what nvcc makes of a const __restrict__ read: ld.global.nc) requires the data to be
// read-only for the reading kernel's whole lifetime, and its loads count as invariant, free to be moved above the wait.
// A tiny GLA model read a wrong x in its first bucket-1 graph replay on an H100 through fk_gemv's __ldg (PDL off, or
// no GEMV, fixed it). PDL builds use a coherent ld.global that asm volatile keeps after the wait; other builds keep
// __ldg (the same machine code as before).
__device__ __forceinline__ uint4 fk_ld_dep(const uint4* p) {
#if FK_PDL_ON
  uint4 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
#else
  return __ldg(p);
#endif
}
