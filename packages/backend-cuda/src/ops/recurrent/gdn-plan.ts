/**
 * Launch plans of the gated-DeltaNet kernels (gdn-source.ts) and what they decline: pure functions of the shapes and
 * dtypes, unit-tested without a GPU. The delta rule tiles its state as GLA's recurrent kernel does (gla-plan.ts, one
 * CTA per V tile x value head x sequence); the conv gives a CTA channels x token groups of one sequence.
 */
import { GLA_MAX_K, GLA_MAX_SHARED, planGla, type GlaPlan } from './gla-plan.js';
import { gdnChunkSharedFloats } from './gdn-source.js';

export interface GdnShape {
  /** Sequences (B, or cu_seqlens' N), value heads, key and value head dims. */
  readonly N: number;
  readonly HV: number;
  readonly K: number;
  readonly V: number;
}

/**
 * The delta rule's plan: GLA's tiling over the value heads (grid x: V tiles, y: value heads, z: sequences), the
 * recurrent kernel's or the chunked one's (its shared memory sized for gdn-source.ts's chunk layout; KDA's per-channel
 * gate sums take [C][K] more).
 */
export function planGdn(s: GdnShape, maxVec: number, sms: number, kind: 'recurrent' | 'chunk' = 'recurrent', gate: 'head' | 'channel' = 'head'): GlaPlan {
  const p = planGla(kind, { N: s.N, H: s.HV, K: s.K, V: s.V }, maxVec, sms);
  return kind === 'chunk' ? { ...p, sharedBytes: 4 * gdnChunkSharedFloats(s.K, p.bv, p.chunk, p.threads, gate) } : p;
}

/** The delta-rule ops these kernels run: gated DeltaNet's (a decay a head) and KDA's (a decay a key channel). */
export const DELTA_OPS = {
  fused_recurrent_gated_delta_rule: { kind: 'recurrent', gate: 'head' },
  chunk_gated_delta_rule: { kind: 'chunk', gate: 'head' },
  fused_recurrent_kda: { kind: 'recurrent', gate: 'channel' },
  chunk_kda: { kind: 'chunk', gate: 'channel' },
} as const satisfies Record<string, { kind: 'recurrent' | 'chunk'; gate: 'head' | 'channel' }>;
export type DeltaOp = keyof typeof DELTA_OPS;

const FLOAT = ['f32', 'bf16', 'f16'];

export interface GdnCall extends GdnShape {
  readonly op: string;
  /** q / k / v, g, beta. */
  readonly dtypes: readonly [string, string, string];
  /** q / k heads. */
  readonly H: number;
  readonly pool: { readonly dtype: string; readonly slotContiguous: boolean } | null;
  /** The device's opt-in dynamic shared memory a block (DeviceProperties.sharedPerBlockOptin; sm_90's 227 KiB when unknown). */
  readonly sharedPerBlockOptin?: number;
}

/** Why the CUDA delta-rule kernel cannot take a call, or null. */
export function gdnDecline(c: GdnCall): string | null {
  const [dt, gdt, bdt] = c.dtypes;
  if (!FLOAT.includes(dt)) return `dtype ${dt}: the CUDA ${c.op} kernel takes f32, bf16, f16 (f64 runs on the CPU backend)`;
  if (!FLOAT.includes(gdt) || !FLOAT.includes(bdt)) return `g ${gdt} / beta ${bdt}: the CUDA ${c.op} kernel takes f32, bf16, f16 gates`;
  if (c.K < 1 || c.K > GLA_MAX_K) return `key head dim ${c.K}: the CUDA ${c.op} kernel takes 1..${GLA_MAX_K}`;
  if (c.V < 1) return `value head dim ${c.V}: the CUDA ${c.op} kernel needs V >= 1`;
  if (c.H < 1 || c.HV % c.H !== 0) return `value heads ${c.HV} must be a multiple of q / k heads ${c.H}`;
  if (c.HV > 65535 || c.N > 65535) return `${c.N} sequences x ${c.HV} value heads: past the grid's 65535 limit on y / z`;
  if (c.pool && !c.pool.slotContiguous) return `the state pool's slots must each be one contiguous [HV, K, V] block (updated in place; a copy would not be)`;
  const d = DELTA_OPS[c.op as DeltaOp];
  if (d?.kind === 'chunk') {
    const p = planGdn(c, 4, 1, 'chunk', d.gate);
    const limit = c.sharedPerBlockOptin ?? GLA_MAX_SHARED;
    if (p.sharedBytes > limit) return `K ${c.K}: the chunked kernel's ${p.sharedBytes} bytes of shared memory exceed the device's ${limit}`;
  }
  return null;
}

/** Largest conv width the kernel keeps in registers. */
export const CONV_MAX_W = 16;

export interface ConvPlan {
  /** Channels and token groups a CTA (threads = ct * tg). */
  readonly ct: number;
  readonly tg: number;
  /** x: channel blocks, y: sequences. */
  readonly grid: readonly [number, number, number];
}

/**
 * Decode (one token a sequence): 128 channels a CTA, a thread a channel. Prefill: 32 channels x 8 token groups (a
 * warp reads 32 adjacent channels of a token: coalesced where channels are contiguous, as the engine's transposed view).
 * tokensPerSeq: L for batch rows; T / N for packed sequences (their lengths are on the device).
 */
export function planConv(N: number, D: number, tokensPerSeq: number): ConvPlan {
  const [ct, tg] = tokensPerSeq <= 1 ? [128, 1] : [32, 8];
  return { ct, tg, grid: [Math.max(1, Math.ceil(D / ct)), N, 1] };
}

export interface ConvCall {
  readonly op: string;
  /** x, weight, bias (null: none), the state read (null: none), the state written (null: none). */
  readonly dtypes: readonly [string, string, string | null, string | null, string | null];
  readonly hisDType: string | null;
  readonly N: number;
  readonly W: number;
}

/** Why the CUDA conv kernel cannot take a call, or null. */
export function convDecline(c: ConvCall): string | null {
  const [x, w, b, si, so] = c.dtypes;
  for (const [name, d] of [['x', x], ['weight', w], ['bias', b], ['the state', si], ['the new state', so]] as const) {
    if (d !== null && !FLOAT.includes(d)) return `${name} ${d}: the CUDA ${c.op} kernel takes f32, bf16, f16 (f64 runs on the CPU backend)`;
  }
  if (b !== null && b !== w) return `bias ${b} and weight ${w}: the CUDA ${c.op} kernel takes them in one dtype`;
  if (c.hisDType !== null && !['bool', 'u8', 'i32', 'i64'].includes(c.hisDType)) return `has_initial_state ${c.hisDType}: bool, u8, i32 or i64`;
  if (c.W < 1 || c.W > CONV_MAX_W) return `width ${c.W}: the CUDA ${c.op} kernel takes 1..${CONV_MAX_W}`;
  if (c.N > 65535) return `${c.N} sequences: past the grid's 65535 limit on y`;
  return null;
}
