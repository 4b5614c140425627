// Programmatic dependent launch (Hopper, sm_90+). A kernel launched with LAUNCH_PDL (src/args.ts) may start while the
// kernel before it on the stream is still running, once that kernel's blocks have all executed fk_pdl_trigger (or
// ended). It must call fk_pdl_wait before it reads anything the earlier kernel wrote: the wait returns when that
// kernel has completed and its writes are visible (at once when the launch was an ordinary one). What a kernel does
// before its wait must not depend on earlier kernels: fk_gemv streams its weights in before it waits for x.
// On older GPUs both are no-ops. fk_pdl_entry is the first statement of every kernel in the files src/spine/pdl.ts lists
// (a CPU test checks it): those kernels may be launched with LAUNCH_PDL when LAUNCH_TUNING.pdl is on.
#pragma once
__device__ __forceinline__ void fk_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets a LAUNCH_PDL kernel that follows start now; harmless when the next kernel is an ordinary launch.
__device__ __forceinline__ void fk_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// Wait for the kernel before (its writes are visible after this), then let the next LAUNCH_PDL kernel be scheduled:
// its launch and ramp overlap this kernel's work, one level deep (it cannot start before this one has begun).
__device__ __forceinline__ void fk_pdl_entry() {
  fk_pdl_wait();
  fk_pdl_trigger();
}
