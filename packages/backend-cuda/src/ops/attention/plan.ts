/**
 * The launch plan of the dense SDPA kernel (kernels/attention_dense.cu) and what it declines: pure functions of the
 * shapes and dtypes, unit-tested without a GPU.
 *
 * Tiles: a warp owns 16 query rows (the mma's m); a CTA 4 warps (64 rows), or 1 warp when the queries fit 16 rows
 * (short L: no idle warps). Up to 128 head dims the keys come 64 a tile and Q stays in registers; wider heads (up to 256)
 * take 32 keys a tile and read Q's fragments from shared memory each tile, so the fp32 O accumulators (Dv / 2 a thread)
 * fit the 255 registers without spills (ptxas -v: attention-dense-nvcc.test.ts).
 */

/** Rows of the mma tile (query rows a warp owns). */
export const DENSE_SDPA_WARP_ROWS = 16;
/** The largest head dim (q / k and v) the kernel takes. */
export const DENSE_SDPA_MAX_HEAD_DIM = 256;
/** Widest padded head dim whose Q fragments stay in registers (and whose key tiles are 64). */
const NARROW = 128;

export interface DenseSdpaShape {
  /** Batch (the product of the leading dims before the heads) and heads of the output. */
  readonly batch: number;
  readonly heads: number;
  /** Query rows and keys. */
  readonly L: number;
  readonly S: number;
  /** Head dims of q / k and of v / the output. */
  readonly D: number;
  readonly Dv: number;
}

export interface DenseSdpaPlan {
  readonly warps: number;
  readonly rowsPerCta: number;
  readonly keysPerTile: number;
  /** Q's fragments in registers for the whole CTA (else re-read from shared memory every key tile). */
  readonly qInRegisters: boolean;
  /** Head dims rounded up to the mma's 16 (the pad is zero-filled in shared memory). */
  readonly paddedD: number;
  readonly paddedDv: number;
  /** Q, and 2 stages of K and V, rows padded by 16 bytes (kernels/attention_dense.cu QP / VP). */
  readonly sharedBytes: number;
  /** x: query tiles, y: heads, z: batch. */
  readonly grid: readonly [number, number, number];
  readonly block: number;
}

const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;

export function planDenseSdpa(p: DenseSdpaShape): DenseSdpaPlan {
  const paddedD = roundUp(p.D, 16);
  const paddedDv = roundUp(p.Dv, 16);
  const narrow = Math.max(paddedD, paddedDv) <= NARROW;
  const warps = p.L <= DENSE_SDPA_WARP_ROWS ? 1 : 4;
  const rowsPerCta = DENSE_SDPA_WARP_ROWS * warps;
  const keysPerTile = narrow ? 64 : 32;
  const sharedBytes = 2 * (rowsPerCta * (paddedD + 8) + 2 * keysPerTile * (paddedD + 8) + 2 * keysPerTile * (paddedDv + 8));
  return {
    warps, rowsPerCta, keysPerTile, qInRegisters: narrow, paddedD, paddedDv, sharedBytes,
    grid: [Math.max(1, Math.ceil(p.L / rowsPerCta)), p.heads, p.batch], block: warps * 32,
  };
}

export interface DenseSdpaCall extends DenseSdpaShape {
  readonly dtype: string;
  readonly kDtype: string;
  readonly vDtype: string;
  readonly dropout: number;
}

/** Why the kernel cannot take a call (the registry then decomposes it), or null. */
export function denseSdpaDecline(c: DenseSdpaCall): string | null {
  if (c.dtype !== 'bf16' && c.dtype !== 'f16') return `dtype ${c.dtype}: the dense SDPA kernel takes bf16 / f16 (tensor cores)`;
  if (c.kDtype !== c.dtype || c.vDtype !== c.dtype) return `query ${c.dtype}, key ${c.kDtype}, value ${c.vDtype}: the dense SDPA kernel takes one dtype`;
  if (c.dropout !== 0) return `dropout_p ${c.dropout}: the dense SDPA kernel is for inference (0)`;
  for (const [n, d] of [['query/key', c.D], ['value', c.Dv]] as const) {
    if (d < 8 || d > DENSE_SDPA_MAX_HEAD_DIM || d % 8 !== 0) return `${n} head dim ${d}: the dense SDPA kernel takes multiples of 8 in [8, ${DENSE_SDPA_MAX_HEAD_DIM}] (16-byte rows)`;
  }
  if (c.heads > 65535 || c.batch > 65535) return `${c.batch} batch x ${c.heads} heads: past the grid's 65535 limit on y / z`;
  if (c.L >= 2 ** 31 || c.S >= 2 ** 31) return `L ${c.L} / S ${c.S}: past 32-bit row indices`;
  return null;
}

/** What decides whether a dense SDPA call can run on the flash prefill kernel (sdpaViaPrefillDecline). */
export interface SdpaViaPrefillCall {
  readonly dtype: string;
  readonly D: number;
  readonly Dv: number;
  readonly L: number;
  readonly S: number;
  readonly causal: boolean;
  readonly masked: boolean;
  readonly dropout: number;
  /** q, k and v share the output's leading (batch) dims and each has a head dim: no broadcast over batch. */
  readonly sameBatch: boolean;
  /** query heads / key heads is a whole number. */
  readonly gqa: boolean;
}

/**
 * Why a dense SDPA call cannot take the flash prefill kernel (varlen_prefill_attention: the wgmma kernel at head dim 128
 * on sm_90a, the mma.sync one at 64), or null when it can: bf16 / f16, one head dim of 64 or 128 for q, k and v, no
 * mask or dropout, and causal only where L = S (SDPA's causal mask is top-left aligned, the prefill kernel's bottom-right:
 * the same mask then). The dense kernel (attention_dense.cu, mma.sync) takes the rest.
 */
export function sdpaViaPrefillDecline(c: SdpaViaPrefillCall): string | null {
  if (c.dtype !== 'bf16' && c.dtype !== 'f16') return `dtype ${c.dtype}: the prefill kernel takes bf16 / f16`;
  if (c.D !== c.Dv || (c.D !== 64 && c.D !== 128)) return `head dims ${c.D} / ${c.Dv}: the prefill kernel takes one head dim of 64 or 128`;
  if (c.S === 0) return 'no keys (the dense kernel writes the zeros)';
  if (c.masked) return 'an attention mask: the prefill kernel has causal and window masks only';
  if (c.dropout !== 0) return `dropout_p ${c.dropout}`;
  if (c.causal && c.L !== c.S) return `causal with L ${c.L} != S ${c.S}: SDPA aligns the mask top-left, the prefill kernel bottom-right`;
  if (!c.sameBatch) return 'q, k and v do not share their batch dims (or one has no head dim)';
  if (!c.gqa) return 'query heads are not a multiple of key heads';
  return null;
}

