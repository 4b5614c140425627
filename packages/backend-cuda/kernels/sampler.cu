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
//     u_i = counterUniform(seed_b, 0, i) reproduced bit for bit (row 0 for every row: slot-independent) (fmix32, ((h >> 9) + 0.5) / 2^23); this is the
//     argmax of pi_i / E_i (the softmax normaliser is common to all i). Ties -> lowest index.
// float32 (and the fixed-point mass) may differ from the float64 reference only at near-ties.
// -DFK_VEC4=1 when every row is 16-byte aligned (float4 loads).

#ifndef FK_VEC4
#define FK_VEC4 1
#endif
#ifndef FK_SKIP_GREEDY
#define FK_SKIP_GREEDY 0  // fk_sample: leave greedy rows to the greedy split that ran before it
#endif
#define FK_NB 2048
#define FK_MASS_SCALE 1099511627776.0f  // 2^40

typedef unsigned long long u64;

__device__ __forceinline__ unsigned fk_key(float x) {
  unsigned b = __float_as_uint(x);
  if (b == 0x80000000u) b = 0u;  // -0 -> +0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

#include "fk_hash.cuh"  // fk_fmix32
#include "fk_pdl.cuh"

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

// f(i, v) for i in [lo, hi) (lo a multiple of 4 under FK_VEC4), in a coalesced order (float4 loads when aligned).
// The loads of FK_UNR consecutive strides are all issued before the first use: without that the loop waits one full
// memory latency per stride (one CTA per row has few bytes in flight otherwise).
#define FK_UNR 8
template <class F>
__device__ __forceinline__ void fk_range_foreach(const float* __restrict__ row, int lo, int hi, F&& f) {
#if FK_VEC4
  const int v0 = lo >> 2, v1 = hi >> 2;
  const float4* r4 = reinterpret_cast<const float4*>(row);
  for (int base = v0 + (int)threadIdx.x; base < v1; base += FK_UNR * blockDim.x) {
    float4 v[FK_UNR];
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int j = base + u * blockDim.x;
      if (j < v1) v[u] = __ldg(r4 + j);
    }
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int j = base + u * blockDim.x;
      if (j < v1) {
        f(4 * j, v[u].x);
        f(4 * j + 1, v[u].y);
        f(4 * j + 2, v[u].z);
        f(4 * j + 3, v[u].w);
      }
    }
  }
  for (int i = 4 * v1 + threadIdx.x; i < hi; i += blockDim.x) f(i, row[i]);
#else
  for (int base = lo + (int)threadIdx.x; base < hi; base += FK_UNR * blockDim.x) {
    float v[FK_UNR];
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int i = base + u * blockDim.x;
      if (i < hi) v[u] = __ldg(row + i);
    }
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int i = base + u * blockDim.x;
      if (i < hi) f(i, v[u]);
    }
  }
#endif
}

// f(i, v) for every element of the row.
template <class F>
__device__ __forceinline__ void fk_row_foreach(const float* __restrict__ row, int V, F&& f) {
  fk_range_foreach(row, 0, V, f);
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

// The index of the s_need-th element of the row (in index order) whose key is tau, left in s_cut (-1: fewer than that).
// Block-wide: every thread calls it; s_need and s_cut (set by the caller, then synchronised) are shared; s_bal holds a
// count a warp. Tiles of 8 x blockDim consecutive elements, 8 a thread (thread t's before thread t + 1's): a block scan
// of the per-thread hit counts finds the thread holding the s_need-th, two barriers a tile. (A tie at the top-p cut:
// common with bf16 logits, which repeat values; the row is scanned from the start until the cut.)
__device__ __forceinline__ void fk_find_nth_key(const float* __restrict__ row, int V, unsigned tau, unsigned* s_bal, int& s_need, int& s_cut) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int base = 0; base < V; base += 8 * blockDim.x) {
    const int i0 = base + 8 * threadIdx.x;
    unsigned hits = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int i = i0 + e;
      if (i < V) {
        const float v = row[i];
        if (v == v && fk_key(v) == tau) hits |= 1u << e;
      }
    }
    const int cnt = __popc(hits);
    int incl = cnt;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += n;
    }
    if (lane == 31) s_bal[warp] = (unsigned)incl;
    __syncthreads();
    const int need = s_need;
    int before = 0, total = 0;
    for (int w = 0; w < nw; ++w) {
      const int c = (int)s_bal[w];
      before += w < warp ? c : 0;
      total += c;
    }
    const int excl = before + incl - cnt;  // hits of the tile before this thread's 8
    if (excl < need && need <= excl + cnt) {
      unsigned m = hits;
      for (int q = 1; q < need - excl; ++q) m &= m - 1;
      s_cut = i0 + __ffs(m) - 1;
    }
    __syncthreads();
    if (s_cut >= 0) return;
    if (threadIdx.x == 0) s_need = need - total;  // read after the next tile's first barrier
  }
}

// One radix pass's count / mass histogram in shared memory, updated with 32-bit atomics only: a 64-bit shared
// atomicAdd is a compare-and-swap loop on sm_90, and logits crowd a few dozen bins of the top key bits (sign, exponent,
// two mantissa bits), so those loops spun on every element (B32 mixed took 244 us). A bin's mass stays an exact u64,
// mhi * 2^32 + mlo: the add that wraps mlo carries one into mhi (atomics are serialised, so each wrap is seen once).
// Integer sums: the result does not depend on the order of the adds. Counts fit 32 bits (V < 2^32), and mhi does for
// V < 2^23 (each mass is at most 2^40: at most 2^8 in mhi, plus carries).
struct FkSharedHist {
  unsigned cnt[FK_NB];
  unsigned mlo[FK_NB];
  unsigned mhi[FK_NB];
};

__device__ __forceinline__ void fk_hist_clear(FkSharedHist& h) {
  for (int j = threadIdx.x; j < FK_NB; j += blockDim.x) {
    h.cnt[j] = 0;
    h.mlo[j] = 0;
    h.mhi[j] = 0;
  }
}

__device__ __forceinline__ void fk_hist_add_mass(FkSharedHist& h, unsigned bin, u64 m) {
  const unsigned lo = (unsigned)m;
  const unsigned old = atomicAdd(&h.mlo[bin], lo);
  const unsigned hi = (unsigned)(m >> 32) + (old + lo < old ? 1u : 0u);
  if (hi) atomicAdd(&h.mhi[bin], hi);
}

__device__ __forceinline__ u64 fk_hist_mass(const FkSharedHist& h, int j) { return ((u64)h.mhi[j] << 32) + h.mlo[j]; }

// Walk the histogram (bin j's value is h(j), j in [0, nb)) from the top bin down: the bin b with above(b) < target <=
// above(b) + h(b) (above(b) = sum of the bins over b). Warp 0 does it: 32 lanes x (nb / 32) bins each, one warp scan.
// Writes *bin (-1 when the total is below target) and *above; the caller synchronises.
template <class H>
__device__ void fk_find_bin(H h, int nb, double target, int* bin, u64* above) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const int per = nb / 32;
  const int hi = nb - 1 - lane * per;  // this lane's bins: hi, hi - 1, ..., hi - per + 1
  u64 own = 0;
  for (int q = 0; q < per; ++q) own += h(hi - q);
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
      const u64 c = h(hi - q);
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
  fk_pdl_entry();
  __shared__ FkSharedHist s_h;
  __shared__ u64 s_red[32];
  __shared__ unsigned s_bal[32];
  __shared__ int s_bin;
  __shared__ u64 s_above;
  __shared__ int s_need, s_cut;

  const int b = blockIdx.x;
  const float* __restrict__ row = logits + b * ls;
#if FK_SKIP_GREEDY
  // the greedy split ran before (src/ops/sampling/sampler.ts): fk_ms_init has written every greedy row's token; only rows that
  // draw are left (none when the caller's hint was right)
  if (!(temperature[b] > 0.f)) return;
#endif

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
      for (int j = threadIdx.x; j < FK_NB; j += blockDim.x) s_h.cnt[j] = 0;
      __syncthreads();
      fk_row_foreach(row, V, [&](int, float v) {
        if (v == v) {
          const unsigned key = fk_key(v);
          if ((key & mask) == prefix) atomicAdd(&s_h.cnt[(key >> shift) & bmask], 1u);
        }
      });
      __syncthreads();
      fk_find_bin([&](int j) -> u64 { return s_h.cnt[j]; }, (int)bmask + 1, need, &s_bin, &s_above);
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
      fk_hist_clear(s_h);
      __syncthreads();
      fk_row_foreach(row, V, [&](int, float v) {
        if (v == v) {
          const unsigned key = fk_key(v);
          if (key >= kthr && (key & mask) == prefix) {
            const unsigned bin = (key >> shift) & bmask;
            atomicAdd(&s_h.cnt[bin], 1u);
            const u64 m = massOf(v);
            if (m) fk_hist_add_mass(s_h, bin, m);
          }
        }
      });
      __syncthreads();
      fk_find_bin([&](int j) { return fk_hist_mass(s_h, j); }, (int)bmask + 1, target - (double)aboveAll, &s_bin, &s_above);
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
      const u64 cnt = s_h.cnt[lastBin];
      const u64 each = fk_hist_mass(s_h, lastBin) / (cnt ? cnt : 1);  // equal keys: equal masses
      double nTake = each ? ceil((target - (double)aboveAll) / (double)each) : 1.0;
      if (nTake < 1.0) nTake = 1.0;
      if (nTake < (double)cnt) {
        // index of the nTake-th element (in index order) whose key is tau
        if (threadIdx.x == 0) {
          s_need = (int)nTake;
          s_cut = -1;
        }
        __syncthreads();
        fk_find_nth_key(row, V, tau, s_bal, s_need, s_cut);
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
        const float u = fk_counter_uniform(seed, 0u, (unsigned)i);  // row 0: the draw depends on the seed, not the slot
        const float score = (v - lmax) / T - logf(-logf(u));
        const u64 pk = ((u64)fk_key(score) << 32) | (u64)(0xffffffffu - (unsigned)i);
        win = pk > win ? pk : win;
      }
    }
  });
  win = fk_block_max(win, s_red);
  if (threadIdx.x == 0) out[b] = win ? (long long)(0xffffffffu - (unsigned)(win & 0xffffffffu)) : amax;
}

// =====================================================================================================
// Multi-CTA path (src/ops/sampling/sampler.ts: taken from tuning sampler.multiCtaMinSampledRows drawing rows on, run 10).
// The same algorithm, each row split over C CTAs of FK_MT threads (contiguous slices of `chunk` elements,
// a multiple of 64), as a fixed sequence of 8 kernels with no host sync (graph-capturable):
//   fk_ms_max    (C, B)  per-slice argmax -> part[b][c]; zeroes the row's global histograms and arrival count
//   fk_ms_hist   (C, B)  stage 0 first combines part[b] -> amax in every CTA of the row (greedy / non-finite rows:
//                        CTA 0 writes out[b] and marks the row done); the row state is written by stage 0
//                        stage s = 0..2 top-k radix passes (counts), 3..5 top-p passes (counts + masses):
//                        a shared histogram per CTA, its non-zero bins atomically added to the row's global one;
//                        the row's last CTA to finish (an arrival count) then selects (fk_ms_select_row): the bin
//                        walk on the global histogram, the state update, the histogram zeroed for the next stage;
//                        stage 3 also gets Z = the sum of its mass bins (pass 0 sees every kept logit, so that is the
//                        reference's Z exactly); stage 5 also finds the top-p cut inside a tied group (the index of
//                        the n-th element equal to tau: only rows whose cut falls in a tie do that pass)
//   fk_ms_race   (C, B)  per-slice exponential-race argmax -> part[b][c]; the row's last CTA combines -> out[b]
// Every sum is an integer (counts, 2^40 fixed-point masses) and every max a packed (key, ~index), so the atomics
// are order-free: the same inputs give the same tokens on every run, whichever CTA arrives last.
// =====================================================================================================
#ifndef FK_MT
#define FK_MT 256
#endif

struct FkRowState {
  u64 best;        // packed argmax
  float lmax, T;
  int done;        // 1: out[b] written (greedy / non-finite)
  int kActive;     // top-k radix select still running
  unsigned kprefix, kmask, kthr;
  double kneed;
  int useP;        // top-p still in effect
  unsigned pprefix, pmask, tau;
  int lastBin;
  u64 aboveAll;
  double target;
  int needCut;     // > 0: stage 5's select finds the needCut-th element equal to tau
  int cut;
  unsigned arrived;  // CTAs of the row done with the current kernel (fk_ms_hist, fk_ms_race); 0 between kernels
};
// the host's scratch has 16 words a row (samplerScratchWords)
static_assert(sizeof(FkRowState) <= 16 * 8, "FkRowState outgrew its 16 scratch words");

// Global scratch per row: hist[b] = FK_NB counts then FK_NB masses (u64); part[b][C]; st[b].
#define FK_HIST_PER_ROW (2 * FK_NB)

// After every thread of the CTA has published its share of row b (atomics / stores to global memory, then a
// __syncthreads): true in the row's last CTA to get here (in every thread), whose reads after it see the others'
// shares (a fence on each side of the count, as the CUDA programming guide's last-block reduction). That CTA resets
// the count for the next kernel.
__device__ __forceinline__ bool fk_row_last_cta(FkRowState* s, int C) {
  __shared__ int s_last;
  if (threadIdx.x == 0) {
    __threadfence();
    s_last = atomicAdd(&s->arrived, 1u) == (unsigned)(C - 1);
  }
  __syncthreads();
  const bool last = s_last != 0;
  if (last) {
    __threadfence();
    if (threadIdx.x == 0) s->arrived = 0;
  }
  return last;
}

extern "C" __global__ void __launch_bounds__(FK_MT) fk_ms_max(const float* __restrict__ logits, long long ls, int V, int chunk,
                                                              u64* __restrict__ part, u64* __restrict__ hist, FkRowState* st) {
  fk_pdl_entry();
  __shared__ u64 s_red[32];
  const int b = blockIdx.y, c = blockIdx.x, C = gridDim.x;
  const float* __restrict__ row = logits + b * ls;
  u64* h = hist + (long long)b * FK_HIST_PER_ROW;
  for (int j = c * blockDim.x + threadIdx.x; j < FK_HIST_PER_ROW; j += C * blockDim.x) h[j] = 0;
  if (c == 0 && threadIdx.x == 0) st[b].arrived = 0;  // stage 0's arrival count (the rest of the state is stage 0's)
  const int lo = c * chunk, hi = min(V, lo + chunk);
  u64 best = 0;
  fk_range_foreach(row, lo, hi, [&](int i, float v) {
    if (v == v) {
      const u64 pk = ((u64)fk_key(v) << 32) | (u64)(0xffffffffu - (unsigned)i);
      best = pk > best ? pk : best;
    }
  });
  best = fk_block_max(best, s_red);
  if (threadIdx.x == 0) part[(long long)b * C + c] = best;
}

// The row's packed argmax from fk_ms_max's C partials (a whole warp calls it; every lane gets it).
__device__ __forceinline__ u64 fk_ms_row_best(const u64* __restrict__ rowPart, int C) {
  const int lane = threadIdx.x & 31;
  u64 best = 0;
  for (int c = lane; c < C; c += 32) {
    const u64 v = rowPart[c];
    best = v > best ? v : best;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const u64 w = __shfl_xor_sync(0xffffffffu, best, o);
    best = w > best ? w : best;
  }
  return best;
}

// The row's state before the radix passes: amax, and done for greedy / non-finite rows (whose token is amax).
__device__ FkRowState fk_ms_row_state(u64 best, const float* row, int V, float T, int k, float p) {
  const int amax = best ? (int)(0xffffffffu - (unsigned)(best & 0xffffffffu)) : 0;
  FkRowState s;
  s.best = best;
  s.T = T;
  s.lmax = row[amax];
  s.done = (!(T > 0.f) || best == 0 || (__float_as_uint(row[amax]) & 0x7fffffffu) == 0x7f800000u) ? 1 : 0;
  s.kActive = !s.done && k > 0 && k < V;
  s.kprefix = 0;
  s.kmask = 0;
  s.kthr = 0;
  s.kneed = (double)k;
  s.useP = !s.done && p < 1.f;
  s.pprefix = 0;
  s.pmask = 0;
  s.tau = 0;
  s.lastBin = 0;
  s.aboveAll = 0;
  s.target = (double)p;  // p until stage 3's select makes it p * Z
  s.needCut = 0;
  s.cut = 0x7fffffff;
  s.arrived = 0;
  return s;
}

__device__ __forceinline__ int fk_ms_amax(u64 best) { return best ? (int)(0xffffffffu - (unsigned)(best & 0xffffffffu)) : 0; }

// The greedy split's (sampler.ts): one warp per row writes the state and the token of greedy / non-finite rows.
// (The full multi-CTA path does this in fk_ms_hist's stage 0.)
extern "C" __global__ void fk_ms_init(long long* __restrict__ out, const float* __restrict__ logits, long long ls, int V, int C,
                                      const u64* __restrict__ part, FkRowState* __restrict__ st, const float* __restrict__ temperature,
                                      const int* __restrict__ topK, const float* __restrict__ topP) {
  fk_pdl_entry();
  const int b = blockIdx.x;
  const u64 best = fk_ms_row_best(part + (long long)b * C, C);
  if (threadIdx.x != 0) return;
  const FkRowState s = fk_ms_row_state(best, logits + b * ls, V, temperature[b], topK[b], topP[b]);
  if (s.done) out[b] = fk_ms_amax(best);
  st[b] = s;
}

// Stage `stage`'s select for row b, in the row's last CTA of fk_ms_hist (every thread calls it). h: the row's global
// histogram, complete (read through L2: the other CTAs' atomics are there, not in this SM's L1).
__device__ void fk_ms_select_row(FkRowState* s, u64* h, int stage, const float* __restrict__ row, int V) {
  __shared__ int s_bin;
  __shared__ u64 s_above;
  __shared__ double s_z;
  __shared__ unsigned s_bal[32];
  __shared__ int s_need, s_cut;
  const bool topp = stage >= 3;
  const int pass = topp ? stage - 3 : stage;
  const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
  const unsigned bmask = pass == 2 ? 1023u : 2047u;
  const int nb = (int)bmask + 1;
  const u64* hc = h;
  const u64* hm = h + FK_NB;
  if (topp && pass == 0) {
    // Z = sum of every kept mass (u64 adds: exact, order-free)
    if (threadIdx.x < 32) {
      u64 z = 0;
      for (int j = threadIdx.x; j < nb; j += 32) z += __ldcg(hm + j);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) z += __shfl_xor_sync(0xffffffffu, z, o);
      if (threadIdx.x == 0) s_z = (double)z;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double target = s->target * s_z;  // the initial state holds p in target
      if (!(target >= 0.5)) target = 0.5;  // p <= 0: the first token only (the top logit has mass 2^40)
      s->target = target;
    }
    __syncthreads();
  }
  const double goal = topp ? s->target - (double)s->aboveAll : s->kneed;
  const u64* hp = topp ? hm : hc;
  fk_find_bin([&](int j) { return __ldcg(hp + j); }, nb, goal, &s_bin, &s_above);
  __syncthreads();
  if (threadIdx.x == 0) {
    const int bin = s_bin;
    const u64 above = s_above;
    if (!topp) {
      if (bin < 0) {  // fewer than k non-NaN logits: keep them all
        s->kActive = 0;
        s->kthr = 0;
      } else {
        s->kprefix |= (unsigned)bin << shift;
        s->kmask |= bmask << shift;
        s->kneed -= (double)above;
        if (pass == 2) {
          s->kthr = s->kprefix;
          s->kActive = 0;
        }
      }
    } else {
      if (bin < 0) {
        s->useP = 0;  // the kept mass never reaches p Z (rounding): keep everything
      } else {
        s->pprefix |= (unsigned)bin << shift;
        s->pmask |= bmask << shift;
        s->aboveAll += above;
        s->lastBin = bin;
        if (pass == 2) {
          s->tau = s->pprefix;
          const u64 cnt = __ldcg(hc + bin);
          const u64 each = __ldcg(hm + bin) / (cnt ? cnt : 1);  // equal keys: equal masses
          double nTake = each ? ceil((s->target - (double)s->aboveAll) / (double)each) : 1.0;
          if (nTake < 1.0) nTake = 1.0;
          s->needCut = nTake < (double)cnt ? (int)nTake : 0;
        }
      }
    }
    s_need = topp && pass == 2 && s->useP ? s->needCut : 0;
    s_cut = -1;
  }
  __syncthreads();
  if (s_need > 0) {
    // top-p inside a tied group: the index of the needCut-th element (in index order) whose key is tau
    fk_find_nth_key(row, V, s->tau, s_bal, s_need, s_cut);
    if (threadIdx.x == 0) s->cut = s_cut >= 0 ? s_cut : 0x7fffffff;
  }
  for (int j = threadIdx.x; j < FK_HIST_PER_ROW; j += blockDim.x) h[j] = 0;
}

extern "C" __global__ void __launch_bounds__(FK_MT) fk_ms_hist(long long* __restrict__ out, const float* __restrict__ logits, long long ls, int V,
                                                               int chunk, const u64* __restrict__ part, FkRowState* st, u64* __restrict__ hist,
                                                               const float* __restrict__ temperature, const int* __restrict__ topK,
                                                               const float* __restrict__ topP, int stage) {
  fk_pdl_entry();
  __shared__ FkSharedHist s_h;
  __shared__ FkRowState s_cur;
  const int b = blockIdx.y, c = blockIdx.x, C = gridDim.x;
  const bool topp = stage >= 3;
  FkRowState* s = st + b;
  const float* __restrict__ row = logits + b * ls;
  if (stage == 0) {
    // the row's initial state, the same in every CTA of the row (from fk_ms_max's partials and the row's parameters);
    // written by the row's last CTA after its select, or here by CTA 0 where no top-k pass runs
    if (threadIdx.x < 32) {
      const u64 best = fk_ms_row_best(part + (long long)b * C, C);
      if (threadIdx.x == 0) s_cur = fk_ms_row_state(best, row, V, temperature[b], topK[b], topP[b]);
    }
    __syncthreads();
    if (!s_cur.kActive) {
      if (c == 0 && threadIdx.x == 0) {
        if (s_cur.done) out[b] = fk_ms_amax(s_cur.best);
        *s = s_cur;
      }
      return;
    }
  } else {
    // the state is only written by this row's last CTA, after every CTA of the row has read it here
    if (threadIdx.x == 0) s_cur = *s;
    __syncthreads();
    if (s_cur.done || (topp ? !s_cur.useP : !s_cur.kActive)) return;
  }
  const FkRowState& cur = s_cur;
  const int pass = topp ? stage - 3 : stage;
  const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
  const unsigned bmask = pass == 2 ? 1023u : 2047u;
  const unsigned prefix = topp ? cur.pprefix : cur.kprefix;
  const unsigned mask = topp ? cur.pmask : cur.kmask;
  const unsigned kthr = topp ? cur.kthr : 0u;
  const float lmax = cur.lmax, T = cur.T;
  const int nb = (int)bmask + 1;
  fk_hist_clear(s_h);
  __syncthreads();
  const int lo = c * chunk, hi = min(V, lo + chunk);
  fk_range_foreach(row, lo, hi, [&](int, float v) {
    if (v == v) {
      const unsigned key = fk_key(v);
      if (key >= kthr && (key & mask) == prefix) {
        const unsigned bin = (key >> shift) & bmask;
        atomicAdd(&s_h.cnt[bin], 1u);
        if (topp) {
          const u64 m = (u64)__float2ull_rn(expf((v - lmax) / T) * FK_MASS_SCALE);
          if (m) fk_hist_add_mass(s_h, bin, m);
        }
      }
    }
  });
  __syncthreads();
  u64* h = hist + (long long)b * FK_HIST_PER_ROW;
  for (int j = threadIdx.x; j < nb; j += blockDim.x) {
    const unsigned n = s_h.cnt[j];
    if (n) atomicAdd(&h[j], (u64)n);
    const u64 m = fk_hist_mass(s_h, j);
    if (m) atomicAdd(&h[FK_NB + j], m);
  }
  __syncthreads();
  if (!fk_row_last_cta(s, C)) return;
  if (stage == 0) {
    if (threadIdx.x == 0) *s = cur;  // the initial state (arrived 0), then the select's update
    __syncthreads();
  }
  fk_ms_select_row(s, h, stage, row, V);
}

extern "C" __global__ void __launch_bounds__(FK_MT) fk_ms_race(long long* __restrict__ out, const float* __restrict__ logits, long long ls, int V,
                                                               int chunk, FkRowState* st, const long long* __restrict__ seeds,
                                                               u64* __restrict__ part) {
  fk_pdl_entry();
  __shared__ u64 s_red[32];
  const int b = blockIdx.y, c = blockIdx.x, C = gridDim.x;
  FkRowState* s = st + b;
  if (s->done) return;
  const unsigned kthr = s->kthr, tau = s->tau;
  const bool useP = s->useP != 0;
  const int cut = s->cut;
  const float lmax = s->lmax, T = s->T;
  const u64 seed = (u64)seeds[b];
  const float* __restrict__ row = logits + b * ls;
  const int lo = c * chunk, hi = min(V, lo + chunk);
  u64 win = 0;
  fk_range_foreach(row, lo, hi, [&](int i, float v) {
    if (v == v) {
      const unsigned key = fk_key(v);
      if (key >= kthr && (!useP || key > tau || (key == tau && i <= cut))) {
        const float u = fk_counter_uniform(seed, 0u, (unsigned)i);  // row 0: the draw depends on the seed, not the slot
        const float score = (v - lmax) / T - logf(-logf(u));
        const u64 pk = ((u64)fk_key(score) << 32) | (u64)(0xffffffffu - (unsigned)i);
        win = pk > win ? pk : win;
      }
    }
  });
  win = fk_block_max(win, s_red);
  if (threadIdx.x == 0) part[(long long)b * C + c] = win;
  __syncthreads();
  if (!fk_row_last_cta(s, C) || threadIdx.x >= 32) return;
  // the row's token: the largest partial (warp 0)
  win = 0;
  for (int j = threadIdx.x; j < C; j += 32) {
    const u64 v = __ldcg(part + (long long)b * C + j);
    win = v > win ? v : win;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const u64 w = __shfl_xor_sync(0xffffffffu, win, o);
    win = w > win ? w : win;
  }
  if (threadIdx.x == 0) {
    const int amax = s->best ? (int)(0xffffffffu - (unsigned)(s->best & 0xffffffffu)) : 0;
    out[b] = win ? (long long)(0xffffffffu - (unsigned)(win & 0xffffffffu)) : amax;
  }
}
