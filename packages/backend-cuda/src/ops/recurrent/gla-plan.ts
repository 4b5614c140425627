/**
 * Launch plans of the gated-linear-attention kernels (gla-source.ts) and what they decline: pure functions of the
 * shapes, unit-tested without a GPU.
 *
 * Both kernels give a CTA one (sequence, head, tile of BV value columns) and keep that [K, BV] f32 slice of the state
 * in registers for the whole sequence: o_t's columns only need their own state columns, so the V tiles are
 * independent and the only reduction (o = q S over K) stays inside the CTA. A thread owns VEC adjacent columns (one
 * 16-byte access of the state when VEC = 4) of RK rows i = rg + r * RG: `colThreads` = BV / VEC threads cover a row
 * (a power of two <= 32, so the row groups of a warp are reduced with shuffles) and RG = threads / colThreads row
 * groups cover K.
 */

/** Threads a CTA (fewer for small K: at least a warp). */
export const GLA_THREADS = 256;
/** State floats a thread keeps in registers (RK x VEC), above which BV is narrowed. */
export const GLA_STATE_REGS = 32;
/** Largest key head dim: its [K, BV] slice still fits GLA_STATE_REGS a thread at 256 threads (GLA uses 128 / 256). */
export const GLA_MAX_K = 1024;
/** Tokens the chunked kernel takes at a time (its intra-chunk attention; FLA's sub-chunk). */
export const GLA_CHUNK = 16;
/** The narrowest V tile the decode plan splits to for more CTAs (64-byte rows of f32 state a warp access). */
const MIN_BV_DECODE = 16;
/** Dynamic shared memory a CTA may take on sm_90 (227 KiB). */
export const GLA_MAX_SHARED = 227 * 1024;

export interface GlaShape {
  /** Sequences (B, or cu_seqlens' N) and heads, key and value head dims. */
  readonly N: number;
  readonly H: number;
  readonly K: number;
  readonly V: number;
}

export interface GlaPlan {
  readonly kind: 'recurrent' | 'chunk';
  /** Value columns a CTA, columns a thread (one access), threads across a row, row groups, rows a thread. */
  readonly bv: number;
  readonly vec: number;
  readonly colThreads: number;
  readonly rowGroups: number;
  readonly rowsPerThread: number;
  readonly threads: number;
  /** Chunked kernel: tokens a chunk (0 for the recurrent one). */
  readonly chunk: number;
  /** Dynamic shared memory (the chunked kernel; the recurrent one's is static). */
  readonly sharedBytes: number;
  /** x: V tiles, y: heads, z: sequences. */
  readonly grid: readonly [number, number, number];
}

const nextPow2 = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

/** Widest access (4, 2 or 1 floats) that divides V and that the state's alignment allows (`maxVec`, from the host). */
export function glaVec(V: number, maxVec: number): number {
  for (const v of [4, 2, 1]) if (v <= maxVec && V % v === 0) return v;
  return 1;
}

/** Floats of the chunked kernel's dynamic shared memory (gla-source.ts CHUNK_BODY's layout). */
export function glaChunkSharedFloats(K: number, bv: number, chunk: number, threads: number): number {
  // q, k, g -> b: [C][K] each; v [C][BV]; A [C][C]; the chunk's decay [K]; the o partials [warps][C][BV]
  return 3 * chunk * K + chunk * bv + chunk * chunk + K + (threads / 32) * chunk * bv;
}

/**
 * The plan for `kind` on shape `s`. maxVec: the widest state access the host found aligned (4 when the state tensors
 * are 16-byte aligned, else 1); sms: multiprocessors (the decode plan narrows BV until the grid has two CTAs an SM).
 */
export function planGla(kind: 'recurrent' | 'chunk', s: GlaShape, maxVec: number, sms: number): GlaPlan {
  const vec = glaVec(s.V, maxVec);
  let ct = Math.min(32, nextPow2(Math.ceil(s.V / vec)));
  const rows = (c: number) => Math.ceil(s.K / Math.max(32 / c, Math.min(GLA_THREADS / c, nextPow2(s.K))));
  while (ct > 1 && rows(ct) * vec > GLA_STATE_REGS) ct /= 2;
  const ctas = (c: number) => s.N * s.H * Math.ceil(s.V / (c * vec));
  // decode reads the state once: more, narrower tiles until the device has two CTAs an SM; prefill keeps BV wide (the
  // intra-chunk scores are recomputed per tile) unless the grid would leave SMs idle
  const want = kind === 'recurrent' ? 2 * sms : sms;
  while (ct > 1 && ct * vec > MIN_BV_DECODE && ctas(ct) < want) ct /= 2;
  const rowGroups = Math.max(32 / ct, Math.min(GLA_THREADS / ct, nextPow2(s.K)));
  const threads = ct * rowGroups;
  const bv = ct * vec;
  const chunk = kind === 'chunk' ? GLA_CHUNK : 0;
  return {
    kind, bv, vec, colThreads: ct, rowGroups, rowsPerThread: Math.ceil(s.K / rowGroups), threads, chunk,
    sharedBytes: kind === 'chunk' ? 4 * glaChunkSharedFloats(s.K, bv, chunk, threads) : 0,
    grid: [Math.ceil(s.V / bv), s.H, s.N],
  };
}

export interface GlaCall extends GlaShape {
  readonly op: string;
  readonly dtype: string;
  /** The state pool (ssm_state_indices given): its dtype and whether each slot is [H, K, V] contiguous. */
  readonly pool: { readonly dtype: string; readonly slotContiguous: boolean } | null;
  /** The device's opt-in dynamic shared memory a block (DeviceProperties.sharedPerBlockOptin; sm_90's 227 KiB when unknown). */
  readonly sharedPerBlockOptin?: number;
}

/** Why the CUDA kernels cannot take a call, or null. */
export function glaDecline(c: GlaCall): string | null {
  if (c.dtype !== 'f32' && c.dtype !== 'bf16' && c.dtype !== 'f16') return `dtype ${c.dtype}: the CUDA ${c.op} kernel takes f32, bf16, f16 (f64 runs on the CPU backend)`;
  if (c.K < 1 || c.K > GLA_MAX_K) return `key head dim ${c.K}: the CUDA ${c.op} kernel takes 1..${GLA_MAX_K}`;
  if (c.V < 1) return `value head dim ${c.V}: the CUDA ${c.op} kernel needs V >= 1`;
  if (c.H > 65535 || c.N > 65535) return `${c.N} sequences x ${c.H} heads: past the grid's 65535 limit on y / z`;
  if (c.pool && !c.pool.slotContiguous) return `the state pool's slots must each be one contiguous [H, K, V] block (updated in place; a copy would not be)`;
  if (c.op === 'chunk_gla') {
    const p = planGla('chunk', c, 4, 1);
    const limit = c.sharedPerBlockOptin ?? GLA_MAX_SHARED;
    if (p.sharedBytes > limit) return `K ${c.K}: the chunked kernel's ${p.sharedBytes} bytes of shared memory exceed the device's ${limit}`;
  }
  return null;
}
