// FastKernels sampler: the exact algorithm of core's Ops.sample (packages/core/src/ops.ts), one block of
// 512 threads per row of logits [B, V] (f32).
//
//  1. T == 0 (or T not > 0): argmax (NaN ignored, ties -> lowest index). A row whose maximum is not finite
//     (all NaN / all -inf / a +inf) also ends here (the reference's fallback).
//  2.-3. top-k: the k-th largest logit found by a 3-pass radix select (11/11/10 bits) over order-preserving
//     32-bit keys of the logits. Dividing by T > 0 preserves order (and creates no ties in float64), so
//     selecting on the logits is exactly selecting on s = logits / T; -0 and +0 share a key (they compare equal).
//  4. top-p: q_i = exp((l_i - l_max) / T) as fixed point (2^40 scale, u64: deterministic, order-free sums);
//     a 3-pass radix select over the kept keys, walking buckets from the top, finds the key tau where the mass
//     of larger keys is < p * Z and adding tau's group reaches it; inside tau's group (equal logits, equal q)
//     the first n by index are kept, n = ceil((p Z - mass above) / q) (the reference's running sum).
//  5.-6. exponential race in the log domain: argmax over kept i of (l_i - l_max) / T - ln(-ln u_i),
//     u_i = counterUniform(seed, b, i) reproduced bit for bit (fmix32, ((h >> 9) + 0.5) / 2^23); this is the
//     argmax of pi_i / E_i (the softmax normaliser is common to all i). Ties -> lowest index.
// float32 (and the fixed-point mass) may differ from the float64 reference only at near-ties.
// -DFK_VEC4=1 when every row is 16-byte aligned (float4 loads).

#ifndef FK_VEC4
#define FK_VEC4 1
#endif
#define FK_NB 2048
#define FK_MASS_SCALE 1099511627776.0f  // 2^40

typedef unsigned long long u64;

__device__ __forceinline__ unsigned fk_key(float x) {
  unsigned b = __float_as_uint(x);
  if (b == 0x80000000u) b = 0u;  // -0 -> +0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ unsigned fk_fmix32(unsigned h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// core/src/rng.ts counterUniform, bit for bit.
__device__ __forceinline__ float fk_counter_uniform(u64 seed, unsigned row, unsigned col) {
  const unsigned lo = (unsigned)seed;
  const unsigned hi = (unsigned)(seed >> 32);
  unsigned h = fk_fmix32(col + 0x9e3779b9u);
  h = fk_fmix32(row ^ h);
  h = fk_fmix32(hi ^ h);
  h = fk_fmix32(lo ^ h);
  return ((float)(h >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

// f(i, v) for every element of the row, in a coalesced order (float4 loads when aligned). The loads of
// FK_UNR consecutive strides are all issued before the first use: without that the loop waits one full memory
// latency per stride (one CTA per row has few bytes in flight otherwise).
#define FK_UNR 8
template <class F>
__device__ __forceinline__ void fk_row_foreach(const float* __restrict__ row, int V, F&& f) {
#if FK_VEC4
  const int nv = V >> 2;
  const float4* r4 = reinterpret_cast<const float4*>(row);
  for (int base = threadIdx.x; base < nv; base += FK_UNR * blockDim.x) {
    float4 v[FK_UNR];
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int j = base + u * blockDim.x;
      if (j < nv) v[u] = __ldg(r4 + j);
    }
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int j = base + u * blockDim.x;
      if (j < nv) {
        f(4 * j, v[u].x);
        f(4 * j + 1, v[u].y);
        f(4 * j + 2, v[u].z);
        f(4 * j + 3, v[u].w);
      }
    }
  }
  for (int i = 4 * nv + threadIdx.x; i < V; i += blockDim.x) f(i, row[i]);
#else
  for (int base = threadIdx.x; base < V; base += FK_UNR * blockDim.x) {
    float v[FK_UNR];
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int i = base + u * blockDim.x;
      if (i < V) v[u] = __ldg(row + i);
    }
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int i = base + u * blockDim.x;
      if (i < V) f(i, v[u]);
    }
  }
#endif
}

__device__ __forceinline__ u64 fk_block_max(u64 v, u64* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const u64 w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  __syncthreads();  // red may still be read from a previous reduction
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) v = red[w] > v ? red[w] : v;
  return v;
}

__device__ __forceinline__ u64 fk_block_sum(u64 v, u64* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) v += red[w];
  return v;
}

// Walk the histogram h[0, nb) from the top bin down: the bin b with above(b) < target <= above(b) + h[b]
// (above(b) = sum of the bins over b). Warp 0 does it: 32 lanes x (nb / 32) bins each, one warp scan.
// Writes *bin (-1 when the total is below target) and *above; the caller synchronises.
__device__ void fk_find_bin(const u64* h, int nb, double target, int* bin, u64* above) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const int per = nb / 32;
  const int hi = nb - 1 - lane * per;  // this lane's bins: hi, hi - 1, ..., hi - per + 1
  u64 own = 0;
  for (int q = 0; q < per; ++q) own += h[hi - q];
  u64 incl = own;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  const u64 excl = incl - own;
  const bool mine = (double)excl < target && target <= (double)incl;
  const unsigned who = __ballot_sync(0xffffffffu, mine);
  if (who == 0) {
    if (lane == 0) {
      *bin = -1;
      *above = 0;
    }
    return;
  }
  if (lane == __ffs(who) - 1) {
    u64 cum = excl;
    int found = hi - per + 1;
    for (int q = 0; q < per; ++q) {
      const u64 c = h[hi - q];
      if ((double)cum < target && target <= (double)(cum + c)) {
        found = hi - q;
        break;
      }
      cum += c;
    }
    *bin = found;
    *above = cum;
  }
}

extern "C" __global__ void __launch_bounds__(512) fk_sample(long long* __restrict__ out, const float* __restrict__ logits, long long ls, int V,
                                                             const float* __restrict__ temperature, const int* __restrict__ topK,
                                                             const float* __restrict__ topP, const long long* __restrict__ seeds) {
  __shared__ u64 s_cnt[FK_NB];
  __shared__ u64 s_mass[FK_NB];
  __shared__ u64 s_red[32];
  __shared__ unsigned s_bal[32];
  __shared__ int s_bin;
  __shared__ u64 s_above;
  __shared__ int s_need, s_cut;

  const int b = blockIdx.x;
  const float* __restrict__ row = logits + b * ls;

  // 1. argmax (packed (key, ~index): the max is the largest value, lowest index)
  u64 best = 0;
  fk_row_foreach(row, V, [&](int i, float v) {
    if (v == v) {
      const u64 pk = ((u64)fk_key(v) << 32) | (u64)(0xffffffffu - (unsigned)i);
      best = pk > best ? pk : best;
    }
  });
  best = fk_block_max(best, s_red);
  const int amax = best ? (int)(0xffffffffu - (unsigned)(best & 0xffffffffu)) : 0;
  const float T = temperature[b];
  if (!(T > 0.f) || best == 0 || (__float_as_uint(row[amax]) & 0x7fffffffu) == 0x7f800000u) {
    if (threadIdx.x == 0) out[b] = amax;
    return;
  }
  const float lmax = row[amax];

  // 3. top-k threshold key (0 = keep every non-NaN logit: every non-NaN key is > 0)
  const int k = topK[b];
  unsigned kthr = 0;
  if (k > 0 && k < V) {
    unsigned prefix = 0, mask = 0;
    double need = (double)k;
    bool all = false;
    for (int pass = 0; pass < 3; ++pass) {
      const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
      const unsigned bmask = pass == 2 ? 1023u : 2047u;
      for (int j = threadIdx.x; j < FK_NB; j += blockDim.x) s_cnt[j] = 0;
      __syncthreads();
      fk_row_foreach(row, V, [&](int, float v) {
        if (v == v) {
          const unsigned key = fk_key(v);
          if ((key & mask) == prefix) atomicAdd(&s_cnt[(key >> shift) & bmask], 1ull);
        }
      });
      __syncthreads();
      fk_find_bin(s_cnt, (int)bmask + 1, need, &s_bin, &s_above);
      __syncthreads();
      const int bin = s_bin;
      const u64 above = s_above;
      __syncthreads();
      if (bin < 0) {  // fewer than k non-NaN logits: keep them all
        all = true;
        break;
      }
      prefix |= (unsigned)bin << shift;
      mask |= bmask << shift;
      need -= (double)above;
    }
    kthr = all ? 0u : prefix;
  }

  // q_i in fixed point (exp of a non-positive number: at most 2^40)
  auto massOf = [&](float v) -> u64 { return (u64)__float2ull_rn(expf((v - lmax) / T) * FK_MASS_SCALE); };

  // 4. top-p
  const float p = topP[b];
  bool useP = p < 1.f;
  unsigned tau = 0;
  int cut = 0x7fffffff;
  if (useP) {
    u64 z = 0;
    fk_row_foreach(row, V, [&](int, float v) {
      if (v == v && fk_key(v) >= kthr) z += massOf(v);
    });
    z = fk_block_sum(z, s_red);
    double target = (double)p * (double)z;
    if (!(target >= 0.5)) target = 0.5;  // p <= 0: the first token only (the top logit has mass 2^40)
    unsigned prefix = 0, mask = 0;
    u64 aboveAll = 0;
    int lastBin = 0;
    for (int pass = 0; pass < 3 && useP; ++pass) {
      const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
      const unsigned bmask = pass == 2 ? 1023u : 2047u;
      for (int j = threadIdx.x; j < FK_NB; j += blockDim.x) {
        s_cnt[j] = 0;
        s_mass[j] = 0;
      }
      __syncthreads();
      fk_row_foreach(row, V, [&](int, float v) {
        if (v == v) {
          const unsigned key = fk_key(v);
          if (key >= kthr && (key & mask) == prefix) {
            const unsigned bin = (key >> shift) & bmask;
            atomicAdd(&s_cnt[bin], 1ull);
            const u64 m = massOf(v);
            if (m) atomicAdd(&s_mass[bin], m);
          }
        }
      });
      __syncthreads();
      fk_find_bin(s_mass, (int)bmask + 1, target - (double)aboveAll, &s_bin, &s_above);
      __syncthreads();
      const int bin = s_bin;
      const u64 above = s_above;
      __syncthreads();
      if (bin < 0) {
        useP = false;  // the kept mass never reaches p Z (rounding): keep everything
        break;
      }
      prefix |= (unsigned)bin << shift;
      mask |= bmask << shift;
      aboveAll += above;
      lastBin = bin;
    }
    if (useP) {
      tau = prefix;
      const u64 cnt = s_cnt[lastBin];
      const u64 each = s_mass[lastBin] / (cnt ? cnt : 1);  // equal keys: equal masses
      double nTake = each ? ceil((target - (double)aboveAll) / (double)each) : 1.0;
      if (nTake < 1.0) nTake = 1.0;
      if (nTake < (double)cnt) {
        // index of the nTake-th element (in index order) whose key is tau
        if (threadIdx.x == 0) {
          s_need = (int)nTake;
          s_cut = -1;
        }
        __syncthreads();
        for (int base = 0; base < V; base += blockDim.x) {
          const int i = base + threadIdx.x;
          bool hit = false;
          if (i < V) {
            const float v = row[i];
            hit = v == v && fk_key(v) == tau;
          }
          const unsigned bal = __ballot_sync(0xffffffffu, hit);
          if ((threadIdx.x & 31) == 0) s_bal[threadIdx.x >> 5] = bal;
          __syncthreads();
          if (threadIdx.x == 0) {
            int need = s_need;
            for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {
              unsigned m = s_bal[w];
              const int c = __popc(m);
              if (need <= c) {
                for (int q = 1; q < need; ++q) m &= m - 1;
                s_cut = base + w * 32 + __ffs(m) - 1;
                break;
              }
              need -= c;
            }
            s_need = need;
          }
          __syncthreads();
          if (s_cut >= 0) break;
        }
        cut = s_cut >= 0 ? s_cut : 0x7fffffff;
        __syncthreads();
      }
    }
  }

  // 5.-6. exponential race over the kept set
  const u64 seed = (u64)seeds[b];
  u64 win = 0;
  fk_row_foreach(row, V, [&](int i, float v) {
    if (v == v) {
      const unsigned key = fk_key(v);
      if (key >= kthr && (!useP || key > tau || (key == tau && i <= cut))) {
        const float u = fk_counter_uniform(seed, (unsigned)b, (unsigned)i);
        const float score = (v - lmax) / T - logf(-logf(u));
        const u64 pk = ((u64)fk_key(score) << 32) | (u64)(0xffffffffu - (unsigned)i);
        win = pk > win ? pk : win;
      }
    }
  });
  win = fk_block_max(win, s_red);
  if (threadIdx.x == 0) out[b] = win ? (long long)(0xffffffffu - (unsigned)(win & 0xffffffffu)) : amax;
}
