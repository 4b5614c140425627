/**
 * What the two tensor-core MoE GEMMs (kernels/fused_moe.cu, grouped_gemm_tc.cu) compile from alike: the element type
 * and the CTA tile's shape, FK_T and FK_BM .. FK_WN of kernels/fk_moe_gemm_tile.cuh. Each plan adds its own stages,
 * launch order and epilogue defines.
 */

export type MmaDType = 'bf16' | 'f16';

/** A CTA tile: BM x BN output over BK-wide k tiles, WM x WN warps. */
export interface MmaTile {
  readonly name: string;
  readonly BM: number;
  readonly BN: number;
  readonly BK: number;
  readonly WM: number;
  readonly WN: number;
}

/** FK_T and the tile's FK_BM, FK_BN, FK_BK, FK_WM, FK_WN, in that order (the order is part of the cubin cache key). */
export function mmaTileDefines(t: MmaTile, dtype: MmaDType): Record<string, string | number> {
  return {
    FK_T: dtype === 'bf16' ? '__nv_bfloat16' : '__half',
    FK_BM: t.BM,
    FK_BN: t.BN,
    FK_BK: t.BK,
    FK_WM: t.WM,
    FK_WN: t.WN,
  };
}
