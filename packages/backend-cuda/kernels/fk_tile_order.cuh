// The grouped launch order of the tensor-core MoE GEMMs (fused_moe.cu, grouped_gemm_tc.cu, fused_moe_wgmma.cu; Triton's
// GROUP_SIZE_M): a one-dimensional grid's CTA pid -> (row tile pm, column tile pn), group_m row tiles at a time over
// every column tile (row tile fastest in a group), so CTAs that share an expert's weight tiles run together and find
// them in L2. Included at file scope (its own namespace, so a lab compiling several of these files sees it once);
// scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once

namespace fktile {

__device__ __forceinline__ void tile_of(int pid, int m_tiles, int n_tiles, int group_m, int& pm, int& pn) {
  const int per_group = group_m * n_tiles;
  const int first = (pid / per_group) * group_m;
  const int size = min(m_tiles - first, group_m);
  const int in = pid % per_group;
  pm = first + in % size;
  pn = in / size;
}

}  // namespace fktile
