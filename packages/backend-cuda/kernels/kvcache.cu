// FastKernels paged KV-cache write (vLLM reshape_and_cache_flash), in place.
//
// key/value [T, nKv, head] (token and head strides given, head dim contiguous) go to kCache/vCache
// [numBlocks, blockSize, nKv, head] (block, offset and head strides given, head dim contiguous) at
// slot = slots[t] (fk_kv_slot.cuh: block = slot / blockSize, offset = slot % blockSize). slot < 0 is padding and
// skipped; slot >= capacity is skipped and sets *flag (when flag is not null). FK_TPB tokens per block (all their loads
// issued before the stores, without waiting for the slot ids: a padding token's row is read, not stored), 16-byte
// accesses.
// FK_KV_PARTS=1: a latent cache (MLA: one tensor whose rows are the keys and the values): only key -> kc is written;
// value and vc are not read (the host passes null).
// -DFK_T=<type> -DFK_VEC=<n> -DFK_SLOT=<int | long long> -DFK_TPB=<tokens per block> [-DFK_KV_PARTS=1].
// compile-cu: -DFK_KV_PARTS=1
#include "fk_vec.cuh"  // FK_T / FK_VEC defaults and FkVec, as the other memory-bound kernels
#include "fk_pdl.cuh"
#include "fk_kv_slot.cuh"
#ifndef FK_SLOT
#define FK_SLOT long long
#endif
#ifndef FK_TPB
#define FK_TPB 4  // tokens per block iteration (tuning kvStore.tokensPerBlock)
#endif
#ifndef FK_KV_PARTS
#define FK_KV_PARTS 2  // K and V; 1: the key alone (a latent cache)
#endif

extern "C" __global__ void fk_store_kvcache(const FK_T* __restrict__ key, const FK_T* __restrict__ value, FK_T* __restrict__ kc,
                                            FK_T* __restrict__ vc, const FK_SLOT* __restrict__ slots, int T, int nKv, int head,
                                            long long kts, long long khs, long long vts, long long vhs,
                                            long long kcb, long long kco, long long kch, long long vcb, long long vco, long long vch,
                                            int blockSize, long long capacity, int* flag) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  const int nv = head / FK_VEC;
  const int per = nKv * nv;
  // FK_TPB tokens per block: every thread issues its vector loads for all of them before the first store
  // (FK_TPB * 16 bytes in flight per thread instead of 16).
  for (long long t0 = (long long)blockIdx.x * FK_TPB; t0 < T; t0 += (long long)gridDim.x * FK_TPB) {
    // The slot ids and the thread's rows of its first item are loaded before any slot id is examined (every token's
    // row is read, a padding token's too), so the two round trips overlap; the stores skip what the slots say to skip.
    FK_SLOT sid[FK_TPB];
#pragma unroll
    for (int u = 0; u < FK_TPB; ++u) sid[u] = t0 + u < T ? slots[t0 + u] : (FK_SLOT)-1;
    for (int j = threadIdx.x; j < FK_KV_PARTS * per; j += blockDim.x) {
      // item j of a token's FK_KV_PARTS * per vectors: K (j < per) or V, head h, first element c
      const bool isV = FK_KV_PARTS == 2 && j >= per;
      const int jj = isV ? j - per : j;
      const int h = jj / nv;
      const int c = (jj - h * nv) * FK_VEC;
      V v[FK_TPB];
#pragma unroll
      for (int u = 0; u < FK_TPB; ++u) {
        const long long t = t0 + u;
        if (t < T) v[u] = *reinterpret_cast<const V*>(isV ? value + t * vts + h * vhs + c : key + t * kts + h * khs + c);
      }
#pragma unroll
      for (int u = 0; u < FK_TPB; ++u) {
        long long blk, off;
        if (t0 + u < T && fk_kv_slot((long long)sid[u], blockSize, capacity, flag, blk, off)) {
          FK_T* dst = isV ? vc + blk * vcb + off * vco + h * vch + c : kc + blk * kcb + off * kco + h * kch + c;
          *reinterpret_cast<V*>(dst) = v[u];
        }
      }
    }
  }
}
