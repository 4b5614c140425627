// FastKernels permutation copies: dst = src between two layouts of the same dtype (a bit copy), the fast paths of
// CudaOps.copy (ops/layout/copy-plan.ts picks one; fk_copy in elementwise.cu stays the general fallback):
//   fk_copy_rows       both sides contiguous along the same innermost (coalesced) dim: [B, H, S, D] <-> [B, S, H, D],
//                      a slice's rows; 16-byte vectors along the run, the outer dims' offsets per vector.
//   fk_copy_transpose  the destination's contiguous dim (i) is not the source's (j): NCHW <-> NHWC, a transpose's
//                      .contiguous(); 64 x 64 tiles through shared memory, 16-byte loads along j and stores along i.
// Compiled by NVRTC with -DFK_ELEM_BYTES=1|2|4|8 (the element size: values are moved as bits) and -DFK_INDEX=int|long
// long (rows only: int when every offset fits); the defaults compile standalone with `nvcc -std=c++17 -arch=sm_90a -c`.
// No CUDA headers: the file also runs on the host (g++) in permute-copy-host.test.ts.

#ifndef FK_ELEM_BYTES
#define FK_ELEM_BYTES 2
#endif
#ifndef FK_INDEX
#define FK_INDEX int
#endif

#if FK_ELEM_BYTES == 1
typedef unsigned char fk_elem;
#elif FK_ELEM_BYTES == 2
typedef unsigned short fk_elem;
#elif FK_ELEM_BYTES == 4
typedef unsigned int fk_elem;
#else
typedef unsigned long long fk_elem;
#endif

#define FK_VEC (16 / FK_ELEM_BYTES)  // elements in a 16-byte vector
#define FK_OUTER_RANK 5
#define FK_TILE 64
#define FK_TILE_THREADS 256
// one extra 4-byte word per shared row (8 bytes for 8-byte elements): with 2-byte elements both the row writes of the
// load phase and the column reads of the store phase hit 32 distinct banks
#define FK_TILE_PITCH (FK_TILE + (FK_ELEM_BYTES >= 4 ? 1 : 4 / FK_ELEM_BYTES))

// Up to five outer dims (sizes, then element strides in dst and src), innermost last.
struct FkOuterDims {
  long long sizes[FK_OUTER_RANK];
  long long dst[FK_OUTER_RANK];
  long long src[FK_OUTER_RANK];
  int rank;
};

struct FkRowsGeo {
  FkOuterDims outer;
  long long runVecs;  // vectors (of vec elements) in one contiguous run
  long long total;    // runs x runVecs
  int vec;            // FK_VEC when both sides are aligned to it, else 1
};

struct FkTransposeGeo {
  FkOuterDims outer;
  long long ni, nj;  // i: contiguous in dst; j: contiguous in src
  long long dstJ;    // dst stride of j
  long long srcI;    // src stride of i
  long long tilesI, tilesJ, tiles;  // tiles = outer count x tilesI x tilesJ
  int vecSrc, vecDst;               // 16-byte loads / stores allowed (pointers and strides aligned)
};

// dst and src element offsets of outer position p (row-major over outer.sizes).
template <typename I>
__device__ __forceinline__ void fk_outer_offsets(const FkOuterDims& o, I p, I& od, I& os) {
  od = 0;
  os = 0;
#pragma unroll
  for (int d = FK_OUTER_RANK - 1; d >= 0; --d) {
    if (d < o.rank) {
      const I n = (I)o.sizes[d];
      const I idx = p % n;
      p /= n;
      od += idx * (I)o.dst[d];
      os += idx * (I)o.src[d];
    }
  }
}

typedef uint4 fk_vec16;  // built into NVRTC and nvcc; the host test declares it

// One 16-byte store (NVVM splits a uint4 built from separate words into four 4-byte stores)
__device__ __forceinline__ void fk_store16(fk_elem* p, const fk_vec16& v) {
#ifdef __CUDA_ARCH__
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#else
  *reinterpret_cast<fk_vec16*>(p) = v;
#endif
}

// Element k of a 16-byte vector and its inverse, by shifts (a union of the two lowers to narrow stores)
__device__ __forceinline__ unsigned fk_word(const fk_vec16& v, int w) { return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w; }
__device__ __forceinline__ fk_elem fk_unpack(const fk_vec16& v, int k) {
#if FK_ELEM_BYTES == 8
  return (fk_elem)fk_word(v, 2 * k) | ((fk_elem)fk_word(v, 2 * k + 1) << 32);
#else
  constexpr int PER = 4 / FK_ELEM_BYTES;
  return (fk_elem)(fk_word(v, k / PER) >> (8 * FK_ELEM_BYTES * (k % PER)));
#endif
}
__device__ __forceinline__ fk_vec16 fk_pack(const fk_elem* e) {
  unsigned w[4];
#if FK_ELEM_BYTES == 8
#pragma unroll
  for (int k = 0; k < 2; k++) {
    w[2 * k] = (unsigned)e[k];
    w[2 * k + 1] = (unsigned)(e[k] >> 32);
  }
#else
  constexpr int PER = 4 / FK_ELEM_BYTES;
#pragma unroll
  for (int q = 0; q < 4; q++) {
    unsigned x = 0;
#pragma unroll
    for (int k = 0; k < PER; k++) x |= (unsigned)e[q * PER + k] << (8 * FK_ELEM_BYTES * k);
    w[q] = x;
  }
#endif
  return make_uint4(w[0], w[1], w[2], w[3]);
}

extern "C" __global__ void __launch_bounds__(256) fk_copy_rows(fk_elem* __restrict__ dst, const fk_elem* __restrict__ src, FkRowsGeo g) {
  const FK_INDEX runVecs = (FK_INDEX)g.runVecs;
  const FK_INDEX total = (FK_INDEX)g.total;
  const FK_INDEX step = (FK_INDEX)gridDim.x * (FK_INDEX)blockDim.x;
  for (FK_INDEX t = (FK_INDEX)blockIdx.x * (FK_INDEX)blockDim.x + (FK_INDEX)threadIdx.x; t < total; t += step) {
    const FK_INDEX run = t / runVecs;
    const FK_INDEX e = (t - run * runVecs) * (FK_INDEX)g.vec;
    FK_INDEX od, os;
    fk_outer_offsets<FK_INDEX>(g.outer, run, od, os);
    if (g.vec == FK_VEC)
      *reinterpret_cast<fk_vec16*>(dst + od + e) = *reinterpret_cast<const fk_vec16*>(src + os + e);
    else
      dst[od + e] = src[os + e];
  }
}

extern "C" __global__ void __launch_bounds__(FK_TILE_THREADS) fk_copy_transpose(fk_elem* __restrict__ dst, const fk_elem* __restrict__ src, FkTransposeGeo g) {
  __shared__ fk_elem tile[FK_TILE][FK_TILE_PITCH];  // tile[i][j]
  const int tid = threadIdx.x;
  constexpr int CHUNKS = FK_TILE / FK_VEC;           // 16-byte chunks along a tile row
  constexpr int LOAD_ROWS = FK_TILE_THREADS / CHUNKS;  // i rows one load pass covers
  // store pass: 8 j columns fastest, then the i chunks (see FK_TILE_PITCH), then groups of 8 columns
  constexpr int STORE_COLS = FK_TILE_THREADS / CHUNKS;
  const int lc = tid % CHUNKS, lr = tid / CHUNKS;
  const int sj = (tid % 8) + 8 * (tid / (8 * CHUNKS)), sc = (tid / 8) % CHUNKS;
  for (long long t = blockIdx.x; t < g.tiles; t += gridDim.x) {
    const long long tj = t % g.tilesJ;
    const long long rest = t / g.tilesJ;
    const long long ti = rest % g.tilesI;
    long long od, os;
    fk_outer_offsets<long long>(g.outer, rest / g.tilesI, od, os);
    const long long i0 = ti * FK_TILE, j0 = tj * FK_TILE;
    const fk_elem* s = src + os + i0 * g.srcI + j0;
    fk_elem* d = dst + od + j0 * g.dstJ + i0;
    const int ni = (int)(g.ni - i0 < FK_TILE ? g.ni - i0 : FK_TILE);
    const int nj = (int)(g.nj - j0 < FK_TILE ? g.nj - j0 : FK_TILE);
    // load: rows of the tile along j (contiguous in src)
    for (int r = lr; r < ni; r += LOAD_ROWS) {
      const int j = lc * FK_VEC;
      const fk_elem* p = s + r * g.srcI + j;
      if (g.vecSrc && j + FK_VEC <= nj) {
        const fk_vec16 v = *reinterpret_cast<const fk_vec16*>(p);
#pragma unroll
        for (int k = 0; k < FK_VEC; k++) tile[r][j + k] = fk_unpack(v, k);
      } else {
        for (int k = 0; k < FK_VEC && j + k < nj; k++) tile[r][j + k] = p[k];
      }
    }
    __syncthreads();
    // store: columns of the tile along i (contiguous in dst)
    for (int c = sj; c < nj; c += STORE_COLS) {
      const int i = sc * FK_VEC;
      fk_elem* p = d + c * g.dstJ + i;
      if (g.vecDst && i + FK_VEC <= ni) {
        fk_elem e[FK_VEC];
#pragma unroll
        for (int k = 0; k < FK_VEC; k++) e[k] = tile[i + k][c];
        fk_store16(p, fk_pack(e));
      } else {
        for (int k = 0; k < FK_VEC && i + k < ni; k++) p[k] = tile[i + k][c];
      }
    }
    __syncthreads();
  }
}
