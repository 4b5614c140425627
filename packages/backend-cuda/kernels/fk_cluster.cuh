// Thread-block clusters (Hopper, sm_90): the cluster barrier, the CTA's rank, and a float read from another CTA's shared
// memory (distributed shared memory). Used by softmax.cu (fk_softmax_cluster) and attention_decode.cu (the splits of a
// head merged in a cluster, FK_CLUSTER). Included as a file by nvcc; scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once

// Every thread of every CTA of the cluster arrives; shared-memory writes before it are visible to the cluster after it.
__device__ __forceinline__ void fk_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned fk_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// f32 at the same shared-memory offset in CTA `rank` of the cluster.
__device__ __forceinline__ float fk_ld_cluster(const float* p, unsigned rank) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  unsigned ra;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory");
  return v;
}
