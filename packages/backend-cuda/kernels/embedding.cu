// FastKernels embedding gather (vLLM VocabParallelEmbedding): out[t, :] = weight[ids[t] - start, :].
// With start 0 and the whole table it is `embedding` (tp 1); with a rank's shard of the table (rows [start, start + V)
// of the full one) it is `embeddingMasked` under tensor parallelism, where the ids of other shards give zero rows.
//
// A row copy that never looks at the values: the host picks the widest unit FK_U (uint4 = 16 bytes, then
// 8/4/2/1) dividing the row bytes, the row stride and both base addresses. One block per token (grid-strided).
// An id - start outside [0, V) writes a zero row and sets *flag when flag is not null (embeddingMasked passes null:
// those rows are other ranks'); nothing outside the table is read.
// -DFK_U=<unit type> -DFK_ID=<int | long long>.
#include "fk_pdl.cuh"
#ifndef FK_U
#define FK_U uint4
#endif
#ifndef FK_ID
#define FK_ID long long
#endif

extern "C" __global__ void fk_embedding(FK_U* __restrict__ out, const FK_ID* __restrict__ ids, const FK_U* __restrict__ w,
                                        long long n, long long V, int units, long long wsu, int* flag, long long start) {
  fk_pdl_entry();
  for (long long t = blockIdx.x; t < n; t += gridDim.x) {
    const long long id = (long long)ids[t] - start;
    FK_U* o = out + t * units;
    if (id < 0 || id >= V) {
      if (flag && threadIdx.x == 0) atomicExch(flag, 1);
      const FK_U z = {};
      for (int j = threadIdx.x; j < units; j += blockDim.x) o[j] = z;
      continue;
    }
    const FK_U* r = w + id * wsu;
#pragma unroll 4
    for (int j = threadIdx.x; j < units; j += blockDim.x) o[j] = __ldg(r + j);
  }
}
