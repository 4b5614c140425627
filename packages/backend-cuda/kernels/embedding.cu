// FastKernels embedding gather (vLLM VocabParallelEmbedding, tp 1): out[t, :] = weight[ids[t], :].
//
// A row copy that never looks at the values: the host picks the widest unit FK_U (uint4 = 16 bytes, then
// 8/4/2/1) dividing the row bytes, the row stride and both base addresses. One block per token (grid-strided).
// An id outside [0, V) writes a zero row and sets *flag when flag is not null; nothing outside the table is read.
// -DFK_U=<unit type> -DFK_ID=<int | long long>.
#ifndef FK_U
#define FK_U uint4
#endif
#ifndef FK_ID
#define FK_ID long long
#endif

extern "C" __global__ void fk_embedding(FK_U* __restrict__ out, const FK_ID* __restrict__ ids, const FK_U* __restrict__ w,
                                        long long n, long long V, int units, long long wsu, int* flag) {
  for (long long t = blockIdx.x; t < n; t += gridDim.x) {
    const long long id = (long long)ids[t];
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
