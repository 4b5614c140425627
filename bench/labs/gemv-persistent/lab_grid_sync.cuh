// A split barrier across the blocks of one grid, for kernels whose blocks are all resident at once (one wave) and
// wait for each other between phases (bench/labs/gemv-persistent/gemv_persistent_lab.cu): a block arrives when its
// writes of a phase are done and waits, possibly later, until `target` arrivals are counted; work that needs nothing
// from the other blocks (loads of weights) can go on in between. `counter` is a global unsigned the caller zeroes.
// Every thread of the block calls both (they sync the block). The engine has no such kernel: run 17 measured the
// persistent GEMV chain no faster than kernel boundaries, and fk_gemv_mlp (LlamaMLP in one launch) 1.7% slower.
#pragma once

// The block's writes so far are done (release at GPU scope), then one arrival on *counter.
__device__ __forceinline__ void lab_grid_arrive(unsigned* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
  }
}

// Until *counter >= target (acquire at GPU scope): what the arrived blocks wrote is then visible to this block's loads
// through L2 (__ldcg: an L1 line of this SM may be older).
__device__ __forceinline__ void lab_grid_wait(const unsigned* counter, unsigned target) {
  if (threadIdx.x == 0) {
    for (;;) {
      unsigned n;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(n) : "l"(counter) : "memory");
      if (n >= target) break;
      __nanosleep(32);
    }
    __threadfence();  // as cooperative groups' grid sync
  }
  __syncthreads();
}
