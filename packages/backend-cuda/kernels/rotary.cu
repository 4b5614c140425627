// FastKernels rotary embedding (vLLM RotaryEmbedding.forward_native semantics), out of place.
//
// fk_rotary: a block per token, or fewer blocks striding over tokens (each loads its next token's position a token
// ahead); blockIdx.y = 0 rotates the query, 1 the key (one launch for both). Each head's first `rot` dims are rotated
// by cos_sin_cache[pos] (cos | sin halves, read in the cache's own dtype), the rest is copied through. Neox style
// pairs (i, i + rot/2), GPT-J style (2i, 2i + 1). fp32 math, rounded once.
// A position outside [0, maxPos) writes a zero row and sets *flag (when flag is not null): never reads outside.
// fk_rotary_store_kv: the same rotary, and the paged KV-cache write of the rotated key and the value (fk_store_kvcache,
// kvcache.cu) in the same launch.
// -DFK_T=<act type> -DFK_C=<cache type> -DFK_POS=<int | long long> -DFK_NEOX=0|1 -DFK_VEC=<n> (neox vector width)
// -DFK_CVEC=0|1 (neox: cos/sin loaded as FK_VEC-element vectors) -DFK_SLOT=<int | long long> (fk_rotary_store_kv).
#include "fk_vec.cuh"
#include "fk_pdl.cuh"
#include "fk_kv_slot.cuh"
#ifndef FK_C
#define FK_C FK_T
#endif
#ifndef FK_POS
#define FK_POS long long
#endif
#ifndef FK_NEOX
#define FK_NEOX 1
#endif
#ifndef FK_CVEC
#define FK_CVEC 0  // 1: the cache rows are read FK_VEC elements at a time (host checks the alignment)
#endif
#ifndef FK_SLOT
#define FK_SLOT long long
#endif

// One token of heads x headSize at position p: x (row xr) rotated by cos_sin_cache[p] into y (yr, contiguous). With KV
// the same values also go to the token's cache slot, head h at dr + h * dh (head dim contiguous; dr null: no slot).
// fk_rotary and fk_rotary_store_kv both call this, so they round the same fp32 expressions and write the same bits.
// p outside [0, maxPos): zeros (in y and the slot) and *flag set (when flag is not null).
template <bool KV>
__device__ __forceinline__ void fk_rotary_token(FK_T* yr, FK_T* dr, long long dh, const FK_T* xr, const FK_C* cache, long long p, long long maxPos,
                                                int heads, int headSize, int rot, int half, int* flag) {
  typedef FkVec<FK_T, FK_VEC> V;
  if (p < 0 || p >= maxPos) {
    if (flag && threadIdx.x == 0) atomicExch(flag, 1);
    for (int j = threadIdx.x; j < heads * headSize; j += blockDim.x) {
      fk_set(yr[j], 0.f);
      if (KV && dr) {
        const int h = j / headSize;
        fk_set(dr[h * dh + (j - h * headSize)], 0.f);
      }
    }
    return;
  }
  const FK_C* cr = cache + p * rot;
#if FK_NEOX
  const int per = half / FK_VEC;  // vectors per half-rotation
  for (int j = threadIdx.x; j < heads * per; j += blockDim.x) {
    const int h = j / per;
    const int i = (j - h * per) * FK_VEC;
    const V a = *reinterpret_cast<const V*>(xr + h * headSize + i);
    const V b = *reinterpret_cast<const V*>(xr + h * headSize + half + i);
    V ra, rb;
#if FK_CVEC
    // cos / sin as vectors too (two loads instead of 2 * FK_VEC scalar ones; the rows are L1/L2 hits after
    // the first head of the token)
    typedef FkVec<FK_C, FK_VEC> CV;
    const CV cv = *reinterpret_cast<const CV*>(cr + i);
    const CV sv = *reinterpret_cast<const CV*>(cr + half + i);
#endif
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) {
#if FK_CVEC
      const float c = fk_f(cv.v[e]);
      const float sn = fk_f(sv.v[e]);
#else
      const float c = fk_f(cr[i + e]);
      const float sn = fk_f(cr[half + i + e]);
#endif
      const float x1 = fk_f(a.v[e]);
      const float x2 = fk_f(b.v[e]);
      fk_set(ra.v[e], x1 * c - x2 * sn);
      fk_set(rb.v[e], x2 * c + x1 * sn);
    }
    *reinterpret_cast<V*>(yr + h * headSize + i) = ra;
    *reinterpret_cast<V*>(yr + h * headSize + half + i) = rb;
    if (KV && dr) {
      *reinterpret_cast<V*>(dr + h * dh + i) = ra;
      *reinterpret_cast<V*>(dr + h * dh + half + i) = rb;
    }
  }
#else
  for (int j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const int h = j / half;
    const int i = j - h * half;
    const float c = fk_f(cr[i]);
    const float sn = fk_f(cr[half + i]);
    const float x1 = fk_f(xr[h * headSize + 2 * i]);
    const float x2 = fk_f(xr[h * headSize + 2 * i + 1]);
    fk_set(yr[h * headSize + 2 * i], x1 * c - x2 * sn);
    fk_set(yr[h * headSize + 2 * i + 1], x2 * c + x1 * sn);
    if (KV && dr) {  // the values just stored (this thread's own writes)
      dr[h * dh + 2 * i] = yr[h * headSize + 2 * i];
      dr[h * dh + 2 * i + 1] = yr[h * headSize + 2 * i + 1];
    }
  }
#endif
  // the pass-through tail [rot, headSize) of every head
  const int tail = headSize - rot;
  if (tail > 0) {
    for (int j = threadIdx.x; j < heads * tail; j += blockDim.x) {
      const int h = j / tail;
      const int i = rot + (j - h * tail);
      const FK_T x = xr[h * headSize + i];
      yr[h * headSize + i] = x;
      if (KV && dr) dr[h * dh + i] = x;
    }
  }
}

// in: [T, heads * headSize] rows at token stride s (elements, last dims contiguous); out: contiguous.
extern "C" __global__ void fk_rotary(FK_T* __restrict__ qo, const FK_T* __restrict__ qi, long long qs, int nq,
                                     FK_T* __restrict__ ko, const FK_T* __restrict__ ki, long long ks, int nk,
                                     const FK_POS* __restrict__ pos, const FK_C* __restrict__ cache, int T, long long maxPos,
                                     int headSize, int rot, int* flag) {
  fk_pdl_entry();
  const bool isKey = blockIdx.y == 1;
  FK_T* __restrict__ o = isKey ? ko : qo;
  const FK_T* __restrict__ in = isKey ? ki : qi;
  const long long s = isKey ? ks : qs;
  const int heads = isKey ? nk : nq;
  if (heads == 0) return;
  const int half = rot / 2;
  // a block strides over tokens: its next token's position loads while this token is rotated, so only the first
  // waits for a position before its row and cache loads
  long long pNext = blockIdx.x < T ? (long long)pos[blockIdx.x] : 0;
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const long long p = pNext;
    if (t + gridDim.x < T) pNext = (long long)pos[t + gridDim.x];
    const FK_T* xr = in + t * s;
    FK_T* yr = o + (long long)t * heads * headSize;
    fk_rotary_token<false>(yr, nullptr, 0, xr, cache, p, maxPos, heads, headSize, rot, half, flag);
  }
}

// fk_rotary then fk_store_kvcache(k viewed as [T, nk, headSize], value) in one launch (Ops.rotaryStoreKvcache):
// blockIdx.y = 0 rotates the query, 1 the key (into ko and, at the token's slot, into kc), 2 copies the value row into
// vc. The rotation is fk_rotary_token as in fk_rotary and the slot fk_kv_slot as in fk_store_kvcache, so q, k and
// both caches get the bits the two kernels would write. q / k in as in fk_rotary; value [T, nk, headSize] at token /
// head strides vts / vhs; caches [numBlocks, blockSize, nk, headSize] at block / offset / head strides (every head
// dim contiguous). Slots < 0 are skipped, slots past the cache are skipped and set *flag like bad positions.
extern "C" __global__ void fk_rotary_store_kv(FK_T* __restrict__ qo, const FK_T* __restrict__ qi, long long qs, int nq,
                                              FK_T* __restrict__ ko, const FK_T* __restrict__ ki, long long ks, int nk,
                                              const FK_T* __restrict__ vi, long long vts, long long vhs,
                                              FK_T* __restrict__ kc, long long kcb, long long kco, long long kch,
                                              FK_T* __restrict__ vc, long long vcb, long long vco, long long vch,
                                              const FK_SLOT* __restrict__ slots, int blockSize, long long capacity,
                                              const FK_POS* __restrict__ pos, const FK_C* __restrict__ cache, int T, long long maxPos,
                                              int headSize, int rot, int* flag) {
  fk_pdl_entry();
  const int half = rot / 2;
  if (blockIdx.y == 0) {
    if (nq == 0) return;
    for (int t = blockIdx.x; t < T; t += gridDim.x) {
      fk_rotary_token<false>(qo + (long long)t * nq * headSize, nullptr, 0, qi + t * qs, cache, (long long)pos[t], maxPos, nq, headSize, rot, half, flag);
    }
    return;
  }
  if (nk == 0) return;
  typedef FkVec<FK_T, FK_VEC> V;
  const int nv = headSize / FK_VEC;  // value vectors per head
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    long long blk = 0, off = 0;
    const bool stored = fk_kv_slot((long long)slots[t], blockSize, capacity, flag, blk, off);
    if (blockIdx.y == 1) {
      FK_T* dr = stored ? kc + blk * kcb + off * kco : nullptr;
      fk_rotary_token<true>(ko + (long long)t * nk * headSize, dr, kch, ki + t * ks, cache, (long long)pos[t], maxPos, nk, headSize, rot, half, flag);
    } else if (stored) {
      const FK_T* vr = vi + t * vts;
      FK_T* dr = vc + blk * vcb + off * vco;
      for (int j = threadIdx.x; j < nk * nv; j += blockDim.x) {
        const int h = j / nv;
        const int c = (j - h * nv) * FK_VEC;
        *reinterpret_cast<V*>(dr + h * vch + c) = *reinterpret_cast<const V*>(vr + h * vhs + c);
      }
    }
  }
}
