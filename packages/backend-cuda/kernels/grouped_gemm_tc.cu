// FastKernels tensor-core grouped GEMM (grouped_gemm and mxfp4_grouped_gemm past a decode step's rows: prefill):
// out[t] = x[t] @ W[e(t)]^T (+ bias[e(t)]), bf16 / f16 in, f32 accumulation on mma.sync.m16n8k16, one rounding at the
// store. The second of two launches: grouped_gemm_route.cu has grouped the rows by expert on the device (perm) and
// laid out one m-tile slot per BM rows of an expert (tiles); the host sizes the grid from shapes alone (ceil(T / BM) + E
// slots x ceil(N / BN) column tiles), so nothing is read on the host and the launches can be captured in a CUDA graph.
//
// A CTA takes one slot and FK_BN output columns: it gathers its (up to) BM rows of x by perm with cp.async, streams the
// expert's weight rows beside them through an FK_STAGES-deep shared-memory ring of FK_BK-wide k tiles, and multiplies
// on tensor cores (fk_mma_warp_tile.cuh). The weight, by FK_MXFP4 / FK_NCONTIG:
// - bf16 / f16 W [E, N, K] read in place, k contiguous (rows 16-byte aligned; the ring's tile is [n][k]), or with
//   FK_NCONTIG n contiguous (the transposed view of HF's [E, K, N], gpt-oss's dense experts: k rows of 16-byte aligned
//   n chunks; the tile is [k][n], read by ldmatrix.trans);
// - FK_MXFP4: MXFP4 blocks u8 [E, N, K / 32, 16] + scales u8 [E, N, K / 32]: the ring holds the packed bytes (4.25 bits a
//   weight); each k tile is decoded one tile ahead of the mma (between its k16 steps) into a double-buffered tile: value =
//   fp4 e2m1 * 2^(scale - 127) computed exactly in float and rounded once to T, as mxfp4_dequant does (element 2j of a
//   block is the low nibble of byte j, 2j + 1 the high; scale 255 is NaN). The scales go global -> registers two tiles
//   ahead of their use (a scale row is not 4-byte aligned for cp.async).
// Slots of group E (rows no expert takes) write zero rows; slots past the last tile exit. The epilogue adds the bias
// (FK_BIAS) in f32, rounds once and scatters each row to out[perm row] ([T, N] contiguous; pairs stored packed where N
// is even). Rows past the slot's group, columns past N and k past K are zero-filled in shared memory, never read.
//
// Requirements the host checks (else the op's decomposition runs): x rows 16-byte aligned (pointer and row stride) and
// K % 8 == 0; dense W rows likewise (FK_NCONTIG: N % 8 == 0, the k and expert strides multiples of 8 elements);
// MXFP4 blocks contiguous from a 16-byte boundary. w_s is the weight's row stride: n's, or k's under FK_NCONTIG.
// NVRTC specialisation (the host prepends #defines): FK_T, FK_BM, FK_BN, FK_BK, FK_WM, FK_WN, FK_STAGES, FK_MXFP4,
// FK_NCONTIG, FK_BIAS.
// The configurations the host can launch are compiled with no spills by src/ops/moe/grouped-gemm-tc-nvcc.test.ts; the
// defaults compile standalone.
// compile-cu: -DFK_BM=128 -DFK_BN=128 -DFK_BK=64 -DFK_WM=2 -DFK_WN=4 -DFK_STAGES=3 -DFK_MXFP4=1 -DFK_BIAS=1
// compile-cu: -DFK_BM=64 -DFK_BN=128 -DFK_BK=64 -DFK_WM=2 -DFK_WN=4 -DFK_STAGES=4 -DFK_MXFP4=0 -DFK_T=__half
// compile-cu: -DFK_BM=128 -DFK_BN=128 -DFK_BK=64 -DFK_WM=2 -DFK_WN=4 -DFK_STAGES=3 -DFK_MXFP4=0 -DFK_NCONTIG=1 -DFK_BIAS=1
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "fk_tile_order.cuh"  // fktile::tile_of: the grouped launch order

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_BM
#define FK_BM 64
#endif
#ifndef FK_BN
#define FK_BN 128
#endif
#ifndef FK_BK
#define FK_BK 64
#endif
#ifndef FK_WM
#define FK_WM 2
#endif
#ifndef FK_WN
#define FK_WN 4
#endif
#ifndef FK_STAGES
#define FK_STAGES 4
#endif
#ifndef FK_MXFP4
#define FK_MXFP4 1
#endif
#ifndef FK_NCONTIG
#define FK_NCONTIG 0
#endif
#ifndef FK_BIAS
#define FK_BIAS 0
#endif

namespace fkgg {

typedef FK_T T;
typedef unsigned int u32;

#include "fk_mma.cuh"
#include "fk_moe_gemm_tile.cuh"  // BM .. STAGES, the warp tile (MI x NI), the chunk loaders, the ring fill
#include "fk_mma_warp_tile.cuh"

constexpr int A_ELEMS = BM * PITCH;
static_assert(BK % 32 == 0 && STAGES >= 3, "BK: a multiple of 32 (whole MXFP4 blocks); at least 3 stages");
#if FK_MXFP4
constexpr int BLK = BK / 32;             // 32-value blocks of a weight row in a k tile
constexpr int RAW_CHUNKS = BN * BLK;     // 16 bytes each
constexpr int DEC = RAW_CHUNKS / NT;     // blocks a thread copies and decodes a k tile
constexpr int STAGE_BYTES = A_ELEMS * 2 + RAW_CHUNKS * 16;
constexpr int DEC_ELEMS = BN * PITCH;    // one decoded tile
static_assert(RAW_CHUNKS % NT == 0, "every thread decodes the same number of blocks");
#elif FK_NCONTIG
constexpr int PITCH_N = BN + 8;          // [k][n] tile pitch: 16 bytes past the row (distinct banks for ldmatrix.trans)
constexpr int NCPR = BN / 8;             // 16-byte chunks of a k row of the weight tile
constexpr int KSTEP = NT / NCPR;         // k rows one pass of the threads copies
constexpr int B_CHUNKS = BK * NCPR;
constexpr int STAGE_BYTES = (A_ELEMS + BK * PITCH_N) * 2;
static_assert(NT % NCPR == 0 && B_CHUNKS % NT == 0, "every thread copies the same chunk column, the same number of weight chunks a stage");
#else
constexpr int STAGE_BYTES = (A_ELEMS + BN * PITCH) * 2;
#endif
static_assert(STAGE_BYTES % 16 == 0, "stages start 16-byte aligned");

__device__ __forceinline__ float load1(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load1(const __half* p) { return __half2float(*p); }

#if FK_MXFP4
// e8m0 scale s as a float: 2^(s - 127) (s = 0: the subnormal 2^-127), 255 NaN
__device__ __forceinline__ float e8m0(u32 s) {
  return s == 255u ? __int_as_float(0x7fc00000) : __int_as_float(s == 0u ? 0x00400000 : (int)(s << 23));
}
// fp4 e2m1 code c (low 4 bits): its exponent and mantissa bits as a float's lowest exponent bits and top mantissa bit
// are the value times 2^-126 (exponent 0 lands on the matching subnormal), so one exact multiply decodes it
__device__ __forceinline__ float fp4(u32 c) { return __int_as_float((int)(((c & 7u) << 22) | ((c & 8u) << 28))) * 0x1p126f; }
#endif

}  // namespace fkgg

extern "C" __global__ void __launch_bounds__(fkgg::NT) fk_grouped_gemm_tc(
    FK_T* __restrict__ out, const FK_T* __restrict__ x, const void* __restrict__ w, const unsigned char* __restrict__ scales,
    const int* __restrict__ perm, const int4* __restrict__ tiles, const FK_T* __restrict__ bias, int N, int K, int E,
    int slots, int n_tiles, int group_m, long long xs, long long w_e, long long w_s, long long bs) {
  using namespace fkgg;
  extern __shared__ __align__(16) unsigned char fk_smem[];
  __shared__ int s_row[BM];  // output row of each tile row, -1 past the group
#if FK_BIAS
  __shared__ const T* s_bias;  // the expert's bias row (kept here, not in registers, over the main loop)
#endif

  int pm, pn;
  fktile::tile_of(blockIdx.x, slots, n_tiles, group_m, pm, pn);  // one expert's slots run together
  const int4 tile = tiles[pm];
  const int e = tile.x;
  if (e < 0) return;  // past the last tile: uniform over the CTA
  const int n0 = pn * BN;
  const int tid = threadIdx.x;
  for (int r = tid; r < BM; r += NT) s_row[r] = tile.y + r < tile.z ? perm[tile.y + r] : -1;
#if FK_BIAS
  if (tid == 0) s_bias = e < E ? bias + (long long)e * bs : nullptr;
#endif
  __syncthreads();

  if (e >= E) {
    // rows no expert takes: zeros (column pairs)
    for (int i = tid; i < BM * (BN / 2); i += NT) {
      const int r = s_row[i / (BN / 2)], n = n0 + 2 * (i % (BN / 2));
      if (r < 0) continue;
      T* o = out + (long long)r * N + n;
      if (n + 1 < N && !(N & 1)) {
        *reinterpret_cast<u32*>(o) = 0u;
      } else {
        if (n < N) store1(o, 0.f);
        if (n + 1 < N) store1(o + 1, 0.f);
      }
    }
    return;
  }

  // this thread's A chunks: column ccol of rows crow + i * RSTEP (one gathered source row each, fixed over the k loop)
  const int ccol = (tid % CPR) * 8, crow = tid / CPR;
  const T* a_src[A_CHUNKS / NT];
  a_row_sources(a_src, s_row, x, xs, 1, crow, ccol);
  const int KT = (K + BK - 1) / BK;

#if FK_MXFP4
  const unsigned char* blocks = static_cast<const unsigned char*>(w);
  const int G = K / 32;
  // this thread's weight blocks: chunk c = tid + i NT is block c % BLK of tile row c / BLK
  long long blk_row[DEC];  // the row's first block (index into scales; x16 into blocks), -1 past N
#pragma unroll
  for (int i = 0; i < DEC; ++i) {
    const int c = tid + i * NT, n = n0 + c / BLK;
    blk_row[i] = n < N ? ((long long)e * N + n) * G + c % BLK : -1;
  }
  auto block_in = [&](int i, int kt) { return blk_row[i] >= 0 && kt < KT && kt * BLK + (tid + i * NT) % BLK < G; };
  auto load_scales = [&](u32 (&sc)[DEC], int kt) {
#pragma unroll
    for (int i = 0; i < DEC; ++i) sc[i] = block_in(i, kt) ? (u32)__ldg(scales + blk_row[i] + kt * BLK) : 256u;  // 256: no block, zeros
  };
#elif FK_NCONTIG
  const T* wt = static_cast<const T*>(w);
  const int bcol = (tid % NCPR) * 8, brow = tid / NCPR;  // this thread's weight chunks: n bcol.. of k rows brow + i KSTEP
  const T* b_base = wt + (long long)e * w_e + n0 + bcol;
  const bool b_nin = n0 + bcol < N;  // N % 8 == 0: a chunk is wholly in or out
#else
  const T* wt = static_cast<const T*>(w);
  const T* b_base = wt + (long long)e * w_e + (long long)(n0 + crow) * w_s + ccol;
#endif

  // k tile kt into ring slot st (chunks past K, rows past the group or N: 16 zero bytes, nothing read)
  auto load_stage = [&](int st, int kt) {
    unsigned char* base = fk_smem + st * STAGE_BYTES;
    T* sa = reinterpret_cast<T*>(base);
    const int k0 = kt * BK;
    const bool kin = k0 + ccol < K;
    load_a_rows(sa, a_src, x, crow, ccol, k0, kin);
#if FK_MXFP4
    unsigned char* raw = base + A_ELEMS * 2;
#pragma unroll
    for (int i = 0; i < DEC; ++i) {
      const bool ok = block_in(i, kt);
      cp_async16(smem_u32(raw + (tid + i * NT) * 16), ok ? blocks + (blk_row[i] + kt * BLK) * 16 : blocks, ok ? 16 : 0);
    }
#elif FK_NCONTIG
    T* sb = sa + A_ELEMS;
#pragma unroll
    for (int i = 0; i < B_CHUNKS / NT; ++i) {
      const int k = k0 + brow + i * KSTEP;
      const bool ok = b_nin && k < K;
      cp_async16(smem_u32(sb + (brow + i * KSTEP) * PITCH_N + bcol), ok ? b_base + (long long)k * w_s : wt, ok ? 16 : 0);
    }
#else
    load_w_rows(sa + A_ELEMS, b_base, w_s, wt, n0, N, crow, ccol, k0, kin);
#endif
  };

  float acc[MI][NI][4];
  zero_acc(acc);
  ring_fill(KT, load_stage);

  const int warp = tid / 32, lane = tid % 32;
  const int wm = warp / WN, wn = warp % WN;

#if FK_MXFP4
  T* dec = reinterpret_cast<T*>(fk_smem + STAGES * STAGE_BYTES);  // two decoded tiles [BN][PITCH]
  // the blocks of ring slot st (k tile with scales sc) decoded into dec buffer d: 4 16-byte stores a block
  // A k tile's blocks (ring slot st) into registers: this thread's raw words and scale factors (0 for a missing block).
  auto fetch = [&](int st, const u32 (&sc)[DEC], u32 (&words)[DEC][4], float (&f)[DEC]) {
    const unsigned char* raw = fk_smem + st * STAGE_BYTES + A_ELEMS * 2;
#pragma unroll
    for (int i = 0; i < DEC; ++i) {
      const uint4 q = *reinterpret_cast<const uint4*>(raw + (tid + i * NT) * 16);
      words[i][0] = q.x, words[i][1] = q.y, words[i][2] = q.z, words[i][3] = q.w;
      f[i] = sc[i] > 255u ? 0.f : e8m0(sc[i]);
    }
  };
  // Word w (8 values) of them decoded into dec buffer d: one 16-byte store.
  auto decode_word = [&](int d, const u32 (&words)[DEC][4], const float (&f)[DEC], int w) {
    const int i = w / 4, wq = w % 4, c = tid + i * NT;
    u32 p[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const u32 byte = words[i][wq] >> (8 * b);
      p[b] = Mma<T>::pack(fp4(byte) * f[i], fp4(byte >> 4) * f[i]);
    }
    *reinterpret_cast<uint4*>(dec + d * DEC_ELEMS + (c / BLK) * PITCH + (c % BLK) * 32 + wq * 8) = make_uint4(p[0], p[1], p[2], p[3]);
  };
  constexpr int WORDS = DEC * 4, KSTEPS = BK / 16;
  static_assert(WORDS % KSTEPS == 0, "a tile's words spread evenly over the next tile's k16 steps");
  u32 sc_cur[DEC], sc_next[DEC];
  u32 words[DEC][4];
  float f[DEC];
  load_scales(sc_cur, 0);
  load_scales(sc_next, 1);
  cp_async_wait<STAGES - 2>();
  __syncthreads();  // tile 0 landed
  fetch(0, sc_cur, words, f);
#pragma unroll
  for (int w = 0; w < WORDS; ++w) decode_word(0, words, f, w);
#pragma unroll
  for (int i = 0; i < DEC; ++i) sc_cur[i] = sc_next[i];
  load_scales(sc_next, 2);
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 3>();
    __syncthreads();  // tile kt decoded and tile kt + 1 landed for every thread; every warp is done with tile kt - 1
    {
      const int next = kt + STAGES - 1;
      if (next < KT) load_stage(next % STAGES, next);
      cp_async_commit();
    }
    const bool more = kt + 1 < KT;  // uniform over the CTA
    if (more) fetch((kt + 1) % STAGES, sc_cur, words, f);
    const T* sa = reinterpret_cast<const T*>(fk_smem + (kt % STAGES) * STAGE_BYTES);
    const T* sb = dec + (kt & 1) * DEC_ELEMS;
    // tile kt's mma steps with tile kt + 1's decode between them (tensor and ALU work of one warp interleaved)
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      warp_tile_k16<T, MI, NI, PITCH>(acc, sa, sb, wm * WTM, wn * WTN, kk * 16, lane);
      if (more) {
#pragma unroll
        for (int w = kk * (WORDS / KSTEPS); w < (kk + 1) * (WORDS / KSTEPS); ++w) decode_word((kt + 1) & 1, words, f, w);
      }
    }
    if (more) {
#pragma unroll
      for (int i = 0; i < DEC; ++i) sc_cur[i] = sc_next[i];
      load_scales(sc_next, kt + 3);
    }
  }
#else
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile kt landed for every thread; every warp is done with the slot refilled next
    {
      const int next = kt + STAGES - 1;
      if (next < KT) load_stage(next % STAGES, next);
      cp_async_commit();
    }
    const T* sa = reinterpret_cast<const T*>(fk_smem + (kt % STAGES) * STAGE_BYTES);
    const T* sb = sa + A_ELEMS;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
#if FK_NCONTIG
      warp_tile_k16_kn<T, MI, NI, PITCH, PITCH_N>(acc, sa, sb, wm * WTM, wn * WTN, kk * 16, lane);
#else
      warp_tile_k16<T, MI, NI, PITCH>(acc, sa, sb, wm * WTM, wn * WTN, kk * 16, lane);
#endif
    }
  }
#endif
  cp_async_wait<0>();

  // epilogue: rows g and g + 8 of each m16 tile, columns 2 t4 and 2 t4 + 1 of each n8 tile
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int j = 0; j < NI; ++j) {
    const int n = n0 + wn * WTN + j * 8 + 2 * t4;
    float b0 = 0.f, b1 = 0.f;
#if FK_BIAS
    const T* br = s_bias;
    if (n < N) b0 = load1(br + n);
    if (n + 1 < N) b1 = load1(br + n + 1);
#endif
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = s_row[wm * WTM + i * 16 + g + 8 * h];
        if (r < 0) continue;
        T* o = out + (long long)r * N + n;
        const float v0 = acc[i][j][2 * h] + b0, v1 = acc[i][j][2 * h + 1] + b1;
        if (n + 1 < N && !(N & 1)) {
          *reinterpret_cast<u32*>(o) = Mma<T>::pack(v0, v1);  // N even: the pair is 4-byte aligned
        } else {
          if (n < N) store1(o, v0);
          if (n + 1 < N) store1(o + 1, v1);
        }
      }
    }
  }
}
