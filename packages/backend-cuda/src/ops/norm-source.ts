/**
 * CUDA source of the generated row norms: layer_norm over the last dims and group_norm over (C / G) x spatial of NCHW,
 * both a normalisation of contiguous rows followed by a per-element (layer) or per-channel (group) affine map.
 * One pass over memory: each thread keeps up to NPT vectors of its row in registers; the mean is reduced first, then the
 * variance as the mean of (x - mean)^2 over the same registers (two-level f32, exact as a two-pass, no Welford
 * merging needed); vectors beyond NPT * TPR (rows longer than the host planned for) are read again. y = (x - mean) *
 * rsqrt(var + eps) * w + b, rounded once at the store, as PyTorch's kernels compute it in float.
 * layer_norm_modulate (adaLN) is the layer form with an epilogue: y = norm(x) * (offset + scale) + shift, scale and shift
 * read from one row each per `groupRows` rows of x (a sample's modulation row over its tokens), still rounded once.
 * The residual form (fk_add_layer_norm: add_layer_norm, the post-LN residual) reads x and r and normalises their sum
 * rounded to x's dtype (what the unfused add stores) in the same pass; the sum is not written.
 */
import { GEN_CTYPE, PRELUDE, conversionHelpers, type GenDType } from './ctypes.js';
import type { GeneratedKernel } from './elementwise-source.js';

export interface RowNormSpec {
  readonly kind: 'layer' | 'group';
  readonly inDType: GenDType;
  readonly outDType: GenDType;
  /** Weight / bias dtype (both the same), or null when neither is given. */
  readonly wDType: GenDType | null;
  readonly hasWeight: boolean;
  readonly hasBias: boolean;
  readonly vec: number;
  /** Threads a row: 32 (a warp a row, several rows a block) or the whole block. */
  readonly tpr: number;
  readonly block: number;
  /** Vectors a thread keeps in registers. */
  readonly npt: number;
  /** group_norm: the spatial size is a multiple of vec, so a vector lies in one channel. */
  readonly channelPerVector?: boolean;
  /** layer_norm: weight and bias may be read as vectors (the host checked their alignment). */
  readonly weightVector?: boolean;
  /** layer: the adaLN epilogue (layer_norm_modulate); scale / shift of one dtype, read as vectors when aligned. */
  readonly modulate?: { readonly dtype: GenDType; readonly vector: boolean };
  /** layer: normalise x + r (r of x's dtype, its rows at their own stride): fk_add_layer_norm. */
  readonly residual?: boolean;
}

export function rowNormSource(s: RowNormSpec): GeneratedKernel {
  const { inDType, outDType, vec: V, tpr, block, npt: NPT } = s;
  if (tpr !== 32 && (tpr % 32 !== 0 || tpr !== block)) throw new RangeError(`row norm: tpr ${tpr} must be 32 or the whole block`);
  const T = GEN_CTYPE[inDType];
  const OT = GEN_CTYPE[outDType];
  const wd = s.wDType ?? 'f32';
  const W = GEN_CTYPE[wd];
  const mod = s.modulate;
  if (mod && s.kind !== 'layer') throw new RangeError('row norm: the modulate epilogue is a layer-norm form');
  const res = !!s.residual;
  if (res && (s.kind !== 'layer' || mod)) throw new RangeError('row norm: the residual is a layer-norm form without the modulate epilogue');
  const entry = mod ? 'fk_layer_norm_modulate' : res ? 'fk_add_layer_norm' : s.kind === 'layer' ? 'fk_layer_norm' : 'fk_group_norm';
  const M = mod ? GEN_CTYPE[mod.dtype] : 'float';
  // adaLN: f * (offset + scale) + shift from this row's modulation rows scr / shr
  const modLines: string[] = [];
  if (mod && mod.vector) {
    modLines.push(
      `        const FkV<${M}, ${V}> sv = reinterpret_cast<const FkV<${M}, ${V}>*>(scr)[j];`,
      `        const FkV<${M}, ${V}> hv = reinterpret_cast<const FkV<${M}, ${V}>*>(shr)[j];`,
      `#pragma unroll`,
      `        for (int e = 0; e < ${V}; ++e) f[e] = f[e] * (fk_ld_${mod.dtype}(sv.v[e]) + off) + fk_ld_${mod.dtype}(hv.v[e]);`,
    );
  } else if (mod) {
    modLines.push(`#pragma unroll`, `        for (int e = 0; e < ${V}; ++e) f[e] = f[e] * (fk_ld_${mod.dtype}(scr[j * ${V} + e]) + off) + fk_ld_${mod.dtype}(shr[j * ${V} + e]);`);
  }
  const affine = s.hasWeight || s.hasBias;
  // the affine map of one vector at element index `base` of the row (layer) or of its group (group)
  const affineLines: string[] = [];
  if (affine) {
    if (s.kind === 'group') {
      if (s.channelPerVector) {
        affineLines.push(`        const long long c = cBase + (j * ${V}) / int(hw);  // 32-bit division: an index in a row is < L < 2^31`);
        if (s.hasWeight) affineLines.push(`        const float wv = fk_ld_${wd}(w[c]);`);
        if (s.hasBias) affineLines.push(`        const float bv = fk_ld_${wd}(b[c]);`);
        affineLines.push(`#pragma unroll`, `        for (int e = 0; e < ${V}; ++e) f[e] = f[e]${s.hasWeight ? ' * wv' : ''}${s.hasBias ? ' + bv' : ''};`);
      } else {
        affineLines.push(
          `#pragma unroll`,
          `        for (int e = 0; e < ${V}; ++e) {`,
          `          const long long c = cBase + (j * ${V} + e) / int(hw);`,
          `          f[e] = f[e]${s.hasWeight ? ` * fk_ld_${wd}(w[c])` : ''}${s.hasBias ? ` + fk_ld_${wd}(b[c])` : ''};`,
          `        }`,
        );
      }
    } else if (s.weightVector) {
      if (s.hasWeight) affineLines.push(`        const FkV<${W}, ${V}> wv = reinterpret_cast<const FkV<${W}, ${V}>*>(w)[j];`);
      if (s.hasBias) affineLines.push(`        const FkV<${W}, ${V}> bv = reinterpret_cast<const FkV<${W}, ${V}>*>(b)[j];`);
      affineLines.push(`#pragma unroll`, `        for (int e = 0; e < ${V}; ++e) f[e] = f[e]${s.hasWeight ? ` * fk_ld_${wd}(wv.v[e])` : ''}${s.hasBias ? ` + fk_ld_${wd}(bv.v[e])` : ''};`);
    } else {
      affineLines.push(`#pragma unroll`, `        for (int e = 0; e < ${V}; ++e) f[e] = f[e]${s.hasWeight ? ` * fk_ld_${wd}(w[j * ${V} + e])` : ''}${s.hasBias ? ` + fk_ld_${wd}(b[j * ${V} + e])` : ''};`);
    }
  }
  const vt = `FkV<${T}, ${V}>`;
  const outTail = `${s.kind === 'group' ? 'cBase, hw' : '0, 1'}${mod ? ', scr, shr, off' : ''}`;
  // a vector of the row: x's, or (residual) x + r rounded to x's dtype
  const load = (j: string) => (res ? `fk_sum_vec(xr, rr, ${j})` : `reinterpret_cast<const ${vt}*>(xr)[${j}]`);
  const src = [
    `// generated by backend-cuda/src/ops/norm-source.ts: ${s.kind}_norm, vec ${V}, ${tpr} threads a row, ${NPT} vectors a thread in registers`,
    PRELUDE,
    ...conversionHelpers([inDType, ...(affine ? [wd] : []), ...(mod ? [mod.dtype] : [])], [outDType, ...(res ? [inDType] : [])], 'float'),
    ...(res
      ? [
          `// x + r in float, rounded to the input dtype as the unfused add stores it`,
          `__device__ __forceinline__ ${vt} fk_sum_vec(const ${T}* __restrict__ xr, const ${T}* __restrict__ rr, int j) {`,
          `  ${vt} a = reinterpret_cast<const ${vt}*>(xr)[j];`,
          `  const ${vt} c = reinterpret_cast<const ${vt}*>(rr)[j];`,
          `#pragma unroll`,
          `  for (int e = 0; e < ${V}; ++e) a.v[e] = fk_st_${inDType}(fk_ld_${inDType}(a.v[e]) + fk_ld_${inDType}(c.v[e]));`,
          `  return a;`,
          `}`,
        ]
      : []),
    `// The compiler would keep each cached vector's float conversions from the mean pass live for the variance and`,
    `// write passes (8 floats instead of 16 raw bytes a bf16 vector, and spills at 1024 threads); an empty asm on the`,
    `// raw words after each pass makes it convert again (exact, so the same bits) from the raw registers.`,
    `template <class V> __device__ __forceinline__ void fk_opaque(V& a) {`,
    `  if constexpr (sizeof(V) % 4 == 0) {`,
    `    unsigned* w = reinterpret_cast<unsigned*>(&a);`,
    `#pragma unroll`,
    `    for (int i = 0; i < int(sizeof(V) / 4); ++i) asm volatile("" : "+r"(w[i]));`,
    `  } else {`,
    `    unsigned short* h = reinterpret_cast<unsigned short*>(&a);`,
    `#pragma unroll`,
    `    for (int i = 0; i < int(sizeof(V) / 2); ++i) asm volatile("" : "+h"(h[i]));`,
    `  }`,
    `}`,
    `__device__ __forceinline__ float fk_warp_sum(float a) {`,
    `#pragma unroll`,
    `  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);`,
    `  return a;`,
    `}`,
    tpr > 32
      ? [
          `// the row's sum across the block (every thread gets it); sh holds one float a warp`,
          `__device__ __forceinline__ float fk_row_sum(float a, float* sh, int lane) {`,
          `  a = fk_warp_sum(a);`,
          `  if (lane % 32 == 0) sh[lane / 32] = a;`,
          `  __syncthreads();`,
          `  float t = 0.f;`,
          `#pragma unroll`,
          `  for (int w = 0; w < ${tpr / 32}; ++w) t += sh[w];`,
          `  __syncthreads();`,
          `  return t;`,
          `}`,
        ].join('\n')
      : `__device__ __forceinline__ float fk_row_sum(float a, float*, int) { return fk_warp_sum(a); }`,
    `// vector j of a row: normalise, the affine map, one rounding at the store`,
    `__device__ __forceinline__ void fk_out(${OT}* __restrict__ yr, const ${vt}& a, int j, float mean, float rstd, const ${W}* __restrict__ w, const ${W}* __restrict__ b, long long cBase, long long hw${mod ? `, const ${M}* __restrict__ scr, const ${M}* __restrict__ shr, float off` : ''}) {`,
    `        float f[${V}];`,
    `#pragma unroll`,
    `        for (int e = 0; e < ${V}; ++e) f[e] = (fk_ld_${inDType}(a.v[e]) - mean) * rstd;`,
    ...affineLines,
    ...modLines,
    `        FkV<${OT}, ${V}> r;`,
    `#pragma unroll`,
    `        for (int e = 0; e < ${V}; ++e) r.v[e] = fk_st_${outDType}(f[e]);`,
    `        reinterpret_cast<FkV<${OT}, ${V}>*>(yr)[j] = r;`,
    `        (void)w; (void)b; (void)cBase; (void)hw;`,
    `}`,
    `// x rows of L elements at stride rs; y [rows, L] contiguous. group_norm: row = n * G + g, channel = g * cpg + index / hw.`,
    ...(mod ? [`// adaLN: row r modulates with scale row (r / sgr) * sst and shift row (r / hgr) * hst (stride 0: one row for all)`] : []),
    ...(res ? [`// residual: r's rows at stride rrs`] : []),
    `extern "C" __global__ void __launch_bounds__(${block}) ${entry}(${OT}* __restrict__ y, const ${T}* __restrict__ x, const ${W}* __restrict__ w, const ${W}* __restrict__ b, long long rows, int L, long long rs, float eps, int G, int cpg, long long hw${
      mod ? `, const ${M}* __restrict__ msc, const ${M}* __restrict__ msh, long long sgr, long long sst, long long hgr, long long hst, float off` : res ? `, const ${T}* __restrict__ r, long long rrs` : ''
    }) {`,
    `  const int lane = threadIdx.x % ${tpr};`,
    `  const long long rpb = ${block / tpr};`,
    `  __shared__ float sh[32];`,
    `  const int nv = L / ${V};`,
    `  for (long long row = blockIdx.x * rpb + threadIdx.x / ${tpr}; row < rows; row += gridDim.x * rpb) {`,
    `    const ${T}* xr = x + row * rs;`,
    ...(res ? [`    const ${T}* rr = r + row * rrs;`] : []),
    `    ${OT}* yr = y + row * (long long)L;`,
    s.kind === 'group' ? `    const long long cBase = (row % G) * (long long)cpg;` : `    (void)G; (void)cpg; (void)hw;`,
    ...(mod ? [`    const ${M}* scr = msc + (row / sgr) * sst;`, `    const ${M}* shr = msh + (row / hgr) * hst;`] : []),
    `    ${vt} cache[${NPT}];`,
    `    float s = 0.f;`,
    `#pragma unroll`,
    `    for (int k = 0; k < ${NPT}; ++k) {`,
    `      const int j = lane + k * ${tpr};`,
    `      if (j < nv) {`,
    `        cache[k] = ${load('j')};`,
    `#pragma unroll`,
    `        for (int e = 0; e < ${V}; ++e) s += fk_ld_${inDType}(cache[k].v[e]);`,
    `        fk_opaque(cache[k]);`,
    `      }`,
    `    }`,
    `    for (int j = lane + ${NPT * tpr}; j < nv; j += ${tpr}) {`,
    `      const ${vt} a = ${load('j')};`,
    `#pragma unroll`,
    `      for (int e = 0; e < ${V}; ++e) s += fk_ld_${inDType}(a.v[e]);`,
    `    }`,
    `    const float mean = fk_row_sum(s, sh, lane) / float(L);`,
    `    float q = 0.f;`,
    `#pragma unroll`,
    `    for (int k = 0; k < ${NPT}; ++k) {`,
    `      const int j = lane + k * ${tpr};`,
    `      if (j < nv) {`,
    `#pragma unroll`,
    `        for (int e = 0; e < ${V}; ++e) { const float d = fk_ld_${inDType}(cache[k].v[e]) - mean; q += d * d; }`,
    `        fk_opaque(cache[k]);`,
    `      }`,
    `    }`,
    `    for (int j = lane + ${NPT * tpr}; j < nv; j += ${tpr}) {`,
    `      const ${vt} a = ${load('j')};`,
    `#pragma unroll`,
    `      for (int e = 0; e < ${V}; ++e) { const float d = fk_ld_${inDType}(a.v[e]) - mean; q += d * d; }`,
    `    }`,
    `    const float rstd = rsqrtf(fk_row_sum(q, sh, lane) / float(L) + eps);`,
    `    // write: registers first, then the vectors read again`,
    `#pragma unroll`,
    `    for (int k = 0; k < ${NPT}; ++k) {`,
    `      const int j = lane + k * ${tpr};`,
    `      if (j < nv) fk_out(yr, cache[k], j, mean, rstd, w, b, ${outTail});`,
    `    }`,
    `    for (int j = lane + ${NPT * tpr}; j < nv; j += ${tpr}) fk_out(yr, ${load('j')}, j, mean, rstd, w, b, ${outTail});`,
    `  }`,
    `}`,
    '',
  ];
  const base = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'f32', 'i32', 'i32', 'i64'] as const;
  return { source: src.join('\n'), entry, signature: mod ? [...base, 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'f32'] : res ? [...base, 'ptr', 'i64'] : [...base] };
}
