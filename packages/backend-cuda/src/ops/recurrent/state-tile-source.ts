/**
 * The CUDA text the recurrent linear-attention kernels share (gla-source.ts: fk_gla_recurrent / fk_gla_chunk;
 * gdn-source.ts: the delta rule's and KDA's): a CTA owns a [K, BV] tile of one head's state, each thread [RK][VEC] of
 * it in registers (CT threads across a row, RG row groups); the sequence's token range and state slot come from
 * cu_seqlens / ssm_state_indices on the device. GLA addresses its own head (h, batch row bt); the delta rule a value
 * head hv of q / k head h = hv / R (batch row br). One copy here so both families load and store the state alike.
 */

/** The tile's shape constants and the state vector type (before the kernel's shared-memory declarations). */
export const STATE_TILE_CONSTS = String.raw`  constexpr int CT = FK_BV / FK_VEC;        // threads across a row of the tile
  constexpr int RG = FK_THREADS / CT;       // row groups
  constexpr int RK = (FK_K + RG - 1) / RG;  // rows a thread
  constexpr int WARPS = FK_THREADS / 32;
  typedef FkV<float, FK_VEC> SV;
`;

/** The thread's place in the tile, the sequence's tokens and slot, and its slice of the state loaded (zeros where none). */
export function stateTileSetup(heads: 'gla' | 'delta'): string {
  const gla = heads === 'gla';
  const ids = gla ? String.raw`  const int h = blockIdx.y, n = blockIdx.z;
` : String.raw`  const int hv = blockIdx.y, n = blockIdx.z, h = hv / R;
`;
  const rows = gla
    ? String.raw`  int bt, t0, t1;                   // batch row and token range of the sequence
  if (cu != nullptr) { bt = 0; t0 = (int)cu[n]; t1 = (int)cu[n + 1]; }
  else { bt = n; t0 = 0; t1 = T_len; }
`
    : String.raw`  long long br;
  int t0, t1;                       // batch row and token range of the sequence
  if (cu != nullptr) { br = 0; t0 = (int)cu[n]; t1 = (int)cu[n + 1]; }
  else { br = n; t0 = 0; t1 = T_len; }
`;
  return String.raw`  const int tid = threadIdx.x, ct = tid % CT, rg = tid / CT;
  const int lane = tid & 31, warp = tid >> 5;
${ids}  const int c0 = blockIdx.x * FK_BV;
  const int j0 = c0 + ct * FK_VEC;  // this thread's first column (VEC divides V: all VEC in or all out)
  const bool col_ok = j0 < V;
${rows}  long long slot = n;
  bool rd = s_in != nullptr, wr = s_out != nullptr;
  if (si != nullptr) {
    slot = (long long)si[n];
    if (slot < 0) { rd = false; wr = false; }  // PAD_SLOT_ID: a zero state, nothing written back
  }
  const long long head = (long long)${gla ? 'h' : 'hv'} * FK_K * V;
  float s[RK][FK_VEC];
#pragma unroll
  for (int r = 0; r < RK; ++r) {
    const int i = rg + r * RG;
    SV x;
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) x.v[e] = 0.f;
    if (rd && col_ok && (RK * RG == FK_K || i < FK_K)) x = *reinterpret_cast<const SV*>(s_in + slot * s_in_n + head + (long long)i * V + j0);
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) s[r][e] = x.v[e];
  }
`;
}

/** The thread's slice of the state written back (where asked and the sequence has a slot). */
export const STATE_TILE_STORE = String.raw`  if (wr && col_ok) {
#pragma unroll
    for (int r = 0; r < RK; ++r) {
      const int i = rg + r * RG;
      if (RK * RG == FK_K || i < FK_K) {
        SV x;
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) x.v[e] = s[r][e];
        *reinterpret_cast<SV*>(s_out + slot * s_out_n + head + (long long)i * V + j0) = x;
      }
    }
  }
`;
