// FastKernels rotary embedding (vLLM RotaryEmbedding.forward_native semantics), out of place.
//
// One block per token; blockIdx.y = 0 rotates the query, 1 the key (one launch for both). Each head's first
// `rot` dims are rotated by cos_sin_cache[pos] (cos | sin halves, read in the cache's own dtype), the rest is
// copied through. Neox style pairs (i, i + rot/2), GPT-J style (2i, 2i + 1). fp32 math, rounded once.
// A position outside [0, maxPos) writes a zero row and sets *flag (when flag is not null): never reads outside.
// -DFK_T=<act type> -DFK_C=<cache type> -DFK_POS=<int | long long> -DFK_NEOX=0|1 -DFK_VEC=<n> (neox vector width)
// -DFK_CVEC=0|1 (neox: cos/sin loaded as FK_VEC-element vectors).
#include "fk_vec.cuh"
#include "fk_pdl.cuh"
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

// in: [T, heads * headSize] rows at token stride s (elements, last dims contiguous); out: contiguous.
extern "C" __global__ void fk_rotary(FK_T* __restrict__ qo, const FK_T* __restrict__ qi, long long qs, int nq,
                                     FK_T* __restrict__ ko, const FK_T* __restrict__ ki, long long ks, int nk,
                                     const FK_POS* __restrict__ pos, const FK_C* __restrict__ cache, int T, long long maxPos,
                                     int headSize, int rot, int* flag) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  const bool isKey = blockIdx.y == 1;
  FK_T* __restrict__ o = isKey ? ko : qo;
  const FK_T* __restrict__ in = isKey ? ki : qi;
  const long long s = isKey ? ks : qs;
  const int heads = isKey ? nk : nq;
  if (heads == 0) return;
  const int half = rot / 2;
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const long long p = (long long)pos[t];
    const FK_T* xr = in + t * s;
    FK_T* yr = o + (long long)t * heads * headSize;
    if (p < 0 || p >= maxPos) {
      if (flag && threadIdx.x == 0) atomicExch(flag, 1);
      for (int j = threadIdx.x; j < heads * headSize; j += blockDim.x) fk_set(yr[j], 0.f);
      continue;
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
    }
#endif
    // the pass-through tail [rot, headSize) of every head
    const int tail = headSize - rot;
    if (tail > 0) {
      for (int j = threadIdx.x; j < heads * tail; j += blockDim.x) {
        const int h = j / tail;
        const int i = rot + (j - h * tail);
        yr[h * headSize + i] = xr[h * headSize + i];
      }
    }
  }
}
