// FastKernels paged MLA decode attention: the absorbed decode of multi-latent attention (DeepSeek-V2/V3, Kimi-Linear)
// over a paged latent cache, at head sizes past the paged decode kernels' 256 (issue #32; attention_decode.cu).
//
// The cache has one "kv head": each cached row [kv_lora_rank | rope dims] (FK_MLA_D wide) is every query head's key,
// and its first FK_MLA_DV dims are its value. q [B, nQ, D] (any batch / head strides, dims contiguous), cache
// [blocks, FK_BS, 1, D] (any block / token strides, dims contiguous), out [B, nQ, DV] contiguous. It is
// paged_decode_attention with k_cache == v_cache: the op's route passes DV = D (src/ops/attention/mla-decode.ts).
//
// fk_paged_mla_decode: grid (splits, ceil(nQ / HPC), B), 8 warps. A CTA takes HPC = 16 FK_MLA_MT (16 or 32) query
// heads of one sequence and one split of its keys. Every cached row is read from global memory once per CTA and used
// by all of its heads: 32 heads share one row, which is what makes MLA's decode cheap in bandwidth. Tiles of BN = 32
// rows stream through an FK_STAGES-deep cp.async ring in shared memory (row pitch D + 16 bytes, padded to k16:
// ldmatrix's eight rows land in distinct banks), each row's page from the block table. Per tile, on mma.sync m16n8k16
// with the heads as M:
//   S = Q K^T  warp w takes the k16 steps of key group w % 4 (a quarter of D: its Q fragments stay in registers) for
//              tokens 16 (w / 4) .. + 15 of the tile and all heads; the four groups' partial scores meet in shared memory;
//   softmax    TPH threads a head sum them, scale (log2 domain), mask past the split's end and update the head's running
//              max / sum (every thread of a head holds the same values: xor-butterfly reductions), writing P (FK_T) and
//              the factor alpha that rescales the head's output;
//   O += P V   warp w owns n8 column tiles [w NV8, (w + 1) NV8) of DV for all heads (fp32 accumulators), V read from the
//              same tile with ldmatrix.trans.
// Three __syncthreads a tile. A sequence whose keys fit one split is written normalised; otherwise fp32 partials
// (unnormalised acc, max in the log2 domain, sum) in attention_decode.cu's layout, merged by its
// fk_paged_decode_combine (skip_single = 1). Splits past a sequence's end exit at once; a sequence with no key gets
// zeros (from split 0). seq_lens stay on the device and the grid depends only on shapes: capturable in CUDA graphs.
//
// All shared memory is the dynamic buffer (no static __shared__), and the device primitives (mma, ldmatrix, cp.async)
// come from fk_mma.cuh and the block below: a host replay (FK_HOST_REPLAY=1, mla-decode-host.test.ts) supplies its own.
//
// Specialised by NVRTC with -DFK_T=<__nv_bfloat16 | __half> -DFK_MLA_D=<key width> -DFK_MLA_DV=<value width <= D>
// -DFK_MLA_MT=<1 | 2: m16 head tiles a CTA> -DFK_STAGES=<ring depth> -DFK_BS=<cache block size> -DFK_MLA_CB=<16 | 8 | 4:
// bytes per cp.async>; the defaults below (Kimi-Linear-48B / DeepSeek-V3's 576 / 512) compile standalone with
// `nvcc -std=c++17 -arch=sm_90a -c`.
// compile-cu: -DFK_MLA_DV=576
// compile-cu: -DFK_T=__half -DFK_MLA_D=20 -DFK_MLA_DV=20 -DFK_MLA_MT=1 -DFK_MLA_CB=8 -DFK_STAGES=2
#include "fk_host_replay.cuh"
#if !FK_HOST_REPLAY
#include "fk_pdl.cuh"
#endif

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_MLA_D
#define FK_MLA_D 576
#endif
#ifndef FK_MLA_DV
#define FK_MLA_DV 512
#endif
#ifndef FK_MLA_MT
#define FK_MLA_MT 2
#endif
#ifndef FK_STAGES
#define FK_STAGES 3
#endif
#ifndef FK_BS
#define FK_BS 16
#endif
#ifndef FK_MLA_CB
#define FK_MLA_CB 16
#endif

namespace fkmla {

typedef unsigned int u32;
typedef FK_T T;
constexpr int D = FK_MLA_D;
constexpr int DV = FK_MLA_DV;
constexpr int DP = (D + 15) / 16 * 16;  // the key width padded to k16 (zero columns)
constexpr int PITCH = DP + 8;           // elements per cached row in shared memory (+16 bytes: conflict-free ldmatrix)
constexpr int KS = DP / 16;             // k16 steps of Q K^T
constexpr int KG = 4;                   // key groups (warps w and w + 4 share one)
constexpr int KSG = (KS + KG - 1) / KG; // k16 steps per key group
constexpr int BN = 32;                  // tokens per tile
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int MT = FK_MLA_MT;
constexpr int HPC = 16 * MT;            // query heads per CTA
constexpr int NT = (DV + 7) / 8;        // n8 column tiles of the value
constexpr int NV8 = (NT + WARPS - 1) / WARPS;  // column tiles per warp
constexpr int NS = FK_STAGES;
constexpr int CB = FK_MLA_CB;
constexpr int CE = CB / 2;              // elements per cp.async chunk
constexpr int CPR = DP / CE;            // chunks per padded row
constexpr int DCH = D / CE;             // chunks that hold data (the rest are zero-filled)
constexpr int LOAD_ROUNDS = (BN * CPR + THREADS - 1) / THREADS;
constexpr int PITCH_S = BN + 4;         // floats per row of a key group's partial scores
constexpr int PITCH_P = BN + 8;         // elements per row of P (80 bytes: conflict-free ldmatrix)
constexpr int TPH = THREADS / HPC;      // softmax threads per head
constexpr int EPT = BN / TPH;           // tokens per softmax thread
// the dynamic shared memory, in this order (bytes): the ring, the partial scores, P, then alpha / max / sum per head
constexpr int RING_BYTES = NS * BN * PITCH * 2;
constexpr int S_BYTES = KG * HPC * PITCH_S * 4;
constexpr int P_BYTES = HPC * PITCH_P * 2;
constexpr int SMEM_BYTES = RING_BYTES + S_BYTES + P_BYTES + 3 * HPC * 4;
static_assert(sizeof(T) == 2, "bf16 / f16 only (the tensor cores' operands)");
static_assert(DV >= 1 && DV <= D && D % 2 == 0, "the value is the first DV dims of an even-width row");
static_assert(MT == 1 || MT == 2, "16 or 32 heads a CTA (registers: Q and O fragments per head tile)");
static_assert(NS >= 2, "at least two stages");
static_assert(SMEM_BYTES <= 227 * 1024, "one CTA's shared memory fits an sm_90 SM (mla-decode.ts mlaSharedBytes plans the same)");
static_assert((CB == 16 || CB == 8 || CB == 4) && D % CE == 0, "cp.async chunks of 16, 8 or 4 bytes that divide a row");
static_assert(TPH <= 32 && BN % TPH == 0, "a head's softmax threads sit in one warp");

#if !FK_HOST_REPLAY
#include "fk_mma.cuh"
// One chunk of a cached row, global -> shared; src_bytes 0 writes zeros (rows past the split, columns past D).
template <int B>
__device__ __forceinline__ void cp_async_chunk(u32 dst, const void* src, int src_bytes) {
  if constexpr (B == 16) {
    cp_async16(dst, src, src_bytes);
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(B), "r"(src_bytes) : "memory");
  }
}
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ void st(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void st(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
#endif

// Two elements as one packed register (first in the low half); 0 past the row's end (D is even).
__device__ __forceinline__ u32 pack_pair(const T* row, int c) {
  if (c >= D) return 0u;
  const unsigned short* u = reinterpret_cast<const unsigned short*>(row + c);
  return (u32)u[0] | ((u32)u[1] << 16);
}

}  // namespace fkmla

extern "C" __global__ void __launch_bounds__(fkmla::THREADS) fk_paged_mla_decode(
    FK_T* __restrict__ out,             // [B, nQ, DV] contiguous
    float* __restrict__ part_acc,       // [B, nQ, num_splits, DV] (sequences spread over > 1 split)
    float* __restrict__ part_ml,        // [B, nQ, num_splits, 2]: max (log2 domain), sum
    const FK_T* __restrict__ q, long long q_sb, long long q_sh,
    const FK_T* __restrict__ cache, long long c_sblk, long long c_stok,
    const int* __restrict__ block_tables, long long bt_stride, int max_blocks,
    const int* __restrict__ seq_lens, int n_q_heads, float scale_log2, int chunk, int num_splits) {
  fk_pdl_entry();
  using namespace fkmla;
  extern __shared__ __align__(128) unsigned char fk_smem[];
  T* ring = reinterpret_cast<T*>(fk_smem);
  float* s_part = reinterpret_cast<float*>(fk_smem + RING_BYTES);  // [KG][HPC][PITCH_S]
  T* s_p = reinterpret_cast<T*>(fk_smem + RING_BYTES + S_BYTES);    // [HPC][PITCH_P]
  float* s_alpha = reinterpret_cast<float*>(fk_smem + RING_BYTES + S_BYTES + P_BYTES);
  float* s_m = s_alpha + HPC;
  float* s_l = s_m + HPC;

  const int split = blockIdx.x;
  const int h0 = blockIdx.y * HPC;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;  // fragment rows g and g + 8
  const int t4 = lane & 3;  // fragment column pair
  const int heads = min(HPC, n_q_heads - h0);

  const int L = min(seq_lens[b], max_blocks * FK_BS);
  const int s_begin = split * chunk;
  const int s_end = min(L, s_begin + chunk);
  const int nsp = (L + chunk - 1) / chunk;  // splits that hold keys (0 when none)
  const bool direct = num_splits == 1 || nsp <= 1;
  if (s_begin >= s_end) {
    if (split == 0 && direct)
      for (int i = tid; i < heads * DV; i += THREADS) st(out + ((long long)b * n_q_heads + h0 + i / DV) * DV + i % DV, 0.f);
    return;
  }

  // Q of this warp's key group as A fragments (heads past nQ and columns past D are zero)
  const int kg = warp % KG;
  const int tg = warp / KG;
  u32 qa[MT][KSG][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    const int hA = 16 * mt + g;
    const T* qA = hA < heads ? q + (long long)b * q_sb + (long long)(h0 + hA) * q_sh : nullptr;
    const T* qB = hA + 8 < heads ? q + (long long)b * q_sb + (long long)(h0 + hA + 8) * q_sh : nullptr;
#pragma unroll
    for (int ks = 0; ks < KSG; ks++) {
      const int c = 16 * (kg * KSG + ks) + 2 * t4;
      qa[mt][ks][0] = qA ? pack_pair(qA, c) : 0u;
      qa[mt][ks][1] = qB ? pack_pair(qB, c) : 0u;
      qa[mt][ks][2] = qA ? pack_pair(qA, c + 8) : 0u;
      qa[mt][ks][3] = qB ? pack_pair(qB, c + 8) : 0u;
    }
  }

  const int* bt = block_tables + (long long)b * bt_stride;
  const int n_tiles = (s_end - s_begin + BN - 1) / BN;
  // the page of row `lane` of tile j (0 past the split)
  auto page_of = [&](int j) -> int {
    const int t = s_begin + j * BN + lane;
    return j < n_tiles && t < s_end ? __ldg(bt + t / FK_BS) : 0;
  };
  // cp.async of tile j into its ring slot; pg = page_of(j) (each lane's row: shuffled to the chunks' threads)
  auto issue = [&](int j, int pg) {
    T* dst = ring + (j % NS) * BN * PITCH;
    const int t0 = s_begin + j * BN;
#pragma unroll
    for (int i = 0; i < LOAD_ROUNDS; i++) {
      const int c = tid + i * THREADS;
      const int r = c / CPR;
      const int ch = c % CPR;
      const int page = __shfl_sync(0xffffffffu, pg, r & 31);  // every lane shuffles, the tail's too
      if (c < BN * CPR) {
        const int t = t0 + r;
        const bool ok = t < s_end && ch < DCH;
        const T* src = ok ? cache + (long long)page * c_sblk + (long long)(t % FK_BS) * c_stok + ch * CE : cache;
        cp_async_chunk<CB>(smem_u32(dst + r * PITCH + ch * CE), src, ok ? CB : 0);
      }
    }
  };

  float o[MT][NV8][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int n = 0; n < NV8; n++) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
  // the softmax thread's head and tokens, its head's running max and sum (log2 domain)
  const int sh = tid / TPH;
  const int stok = (tid % TPH) * EPT;
  float m_run = neg_inf(), l_run = 0.f;

  int pg = page_of(0);
#pragma unroll
  for (int s = 0; s < NS - 1; s++) {
    const int pn = page_of(s + 1);
    if (s < n_tiles) issue(s, pg);
    cp_async_commit();
    pg = pn;
  }

  for (int j = 0; j < n_tiles; j++) {
    cp_async_wait<NS - 2>();
    __syncthreads();  // tile j is in; every warp is done with tile j - 1 (its slot is refilled next)
    {
      const int pn = page_of(j + NS);
      if (j + NS - 1 < n_tiles) issue(j + NS - 1, pg);
      cp_async_commit();
      pg = pn;
    }
    const T* tk = ring + (j % NS) * BN * PITCH;

    // S = Q K^T over this warp's key group, tokens 16 tg .. + 15
    {
      float s[MT][2][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KSG; ks++) {
        const int kk = kg * KSG + ks;
        if (kk < KS) {  // warp-uniform
          // matrices (tokens 0-7, k 0-7), (0-7, k 8-15), (8-15, k 0-7), (8-15, k 8-15): b0 / b1 of two n8 tiles
          const int n = 16 * tg + (lane >> 4) * 8 + (lane & 7);
          u32 b00, b01, b10, b11;
          ldsm_x4(smem_u32(tk + n * PITCH + 16 * kk + ((lane >> 3) & 1) * 8), b00, b01, b10, b11);
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            Mma<T>::mma(s[mt][0], qa[mt][ks], b00, b01);
            Mma<T>::mma(s[mt][1], qa[mt][ks], b10, b11);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
          float* p = s_part + (kg * HPC + 16 * mt + g) * PITCH_S + 16 * tg + 8 * nt + 2 * t4;
          p[0] = s[mt][nt][0];
          p[1] = s[mt][nt][1];
          p[8 * PITCH_S] = s[mt][nt][2];
          p[8 * PITCH_S + 1] = s[mt][nt][3];
        }
    }
    __syncthreads();

    // softmax: head sh, tokens stok .. + EPT - 1
    {
      float sc[EPT];
      float mx = neg_inf();
#pragma unroll
      for (int e = 0; e < EPT; e++) {
        float v = 0.f;
#pragma unroll
        for (int k = 0; k < KG; k++) v += s_part[(k * HPC + sh) * PITCH_S + stok + e];
        sc[e] = s_begin + j * BN + stok + e < s_end ? v * scale_log2 : neg_inf();
        mx = fmaxf(mx, sc[e]);
      }
#pragma unroll
      for (int x = 1; x < TPH; x <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
      const float m_new = fmaxf(m_run, mx);  // finite: every tile holds a key of the split
      const float alpha = exp2f(m_run - m_new);  // 0 on the first tile
      float sum = 0.f;
#pragma unroll
      for (int e = 0; e < EPT; e++) {
        const float p = exp2f(sc[e] - m_new);
        sum += p;
        st(s_p + sh * PITCH_P + stok + e, p);
      }
#pragma unroll
      for (int x = 1; x < TPH; x <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, x);
      l_run = l_run * alpha + sum;
      m_run = m_new;
      if (tid % TPH == 0) {
        s_alpha[sh] = alpha;
        s_m[sh] = m_run;  // the output's, after the last tile
        s_l[sh] = l_run;
      }
    }
    __syncthreads();

    // O = alpha O + P V over this warp's column tiles
    {
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        const float aA = s_alpha[16 * mt + g];
        const float aB = s_alpha[16 * mt + g + 8];
#pragma unroll
        for (int n = 0; n < NV8; n++) {
          o[mt][n][0] *= aA;
          o[mt][n][1] *= aA;
          o[mt][n][2] *= aB;
          o[mt][n][3] *= aB;
        }
      }
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++) {
        u32 pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          const int r = 16 * mt + (lane & 7) + ((lane >> 3) & 1) * 8;
          ldsm_x4(smem_u32(s_p + r * PITCH_P + 16 * kk + (lane >> 4) * 8), pa[mt][0], pa[mt][1], pa[mt][2], pa[mt][3]);
        }
        // transposed matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15): lane l addresses
        // token row l % 8 (+ 8) of matrix l / 8
        const T* vrow = tk + (16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8) * PITCH;
#pragma unroll
        for (int n = 0; n < NV8; n += 2) {
          const int c0 = warp * NV8 + n;  // n8 column tile
          if (c0 >= NT) break;            // warp-uniform
          if (n + 1 < NV8 && c0 + 1 < NT) {
            u32 b0, b1, b2, b3;
            ldsm_x4_t(smem_u32(vrow + c0 * 8 + (lane >> 4) * 8), b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
              Mma<T>::mma(o[mt][n], pa[mt], b0, b1);
              Mma<T>::mma(o[mt][n + 1], pa[mt], b2, b3);
            }
          } else {
            u32 b0, b1;
            ldsm_x2_t(smem_u32(vrow + c0 * 8), b0, b1);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) Mma<T>::mma(o[mt][n], pa[mt], b0, b1);
          }
        }
      }
    }
  }

  // s_m / s_l hold each head's final max and sum: written before the last tile's third barrier
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int hl = 16 * mt + g + 8 * half;
      if (hl >= heads) continue;
      const long long bh = (long long)b * n_q_heads + h0 + hl;
      const float l = s_l[hl];
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int n = 0; n < NV8; n++) {
        const int c0 = warp * NV8 + n;
        if (c0 >= NT) break;
        const int col = c0 * 8 + 2 * t4;
        const float v0 = o[mt][n][2 * half], v1 = o[mt][n][2 * half + 1];
        if (direct) {
          if (col < DV) st(out + bh * DV + col, v0 * inv);
          if (col + 1 < DV) st(out + bh * DV + col + 1, v1 * inv);
        } else {
          float* pa = part_acc + (bh * num_splits + split) * DV;
          if (col < DV) pa[col] = v0;
          if (col + 1 < DV) pa[col + 1] = v1;
        }
      }
    }
  if (!direct && tid < heads) {
    float* ml = part_ml + (((long long)b * n_q_heads + h0 + tid) * num_splits + split) * 2;
    ml[0] = s_m[tid];
    ml[1] = s_l[tid];
  }
}
