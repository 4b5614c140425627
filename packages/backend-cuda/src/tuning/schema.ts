/**
 * The shape of a tuning file (packages/backend-cuda/tuning/*.json): every launch choice of the CUDA backend's own
 * kernels and the engine's decode loop, one section per consumer. Strict: a key not declared here is an error, so a
 * misspelt knob in an A/B file cannot pass silently. Each key's description is what `fastkernels tuning show` and
 * docs/tuning.md say about it; why a value was chosen is in docs/experiments.md.
 */
import { z } from '@fastkernels/core';

const count = (min = 0, max?: number) => (max === undefined ? z.number().int().min(min) : z.number().int().min(min).max(max));

export const TUNING_SECTIONS = {
  launch: z.strictObject({
    pdl: z.boolean().describe('launch the kernels of PDL_READY_FILES with programmatic dependent launch inside CUDA graph captures (sm_90+)'),
    pdlEager: z.boolean().describe('also use PDL launches outside graph capture (slower for large eager grids)'),
  }),
  linear: z.strictObject({
    gemvMaxRows: count(0).describe('largest M (rows of x) that takes a GEMV kernel instead of cuBLASLt (at most 8 are used); 0 = off'),
    gemvStream: z.boolean().describe('take fk_gemv_stream (one wave, loads always in flight) where K is a multiple of 32 vectors'),
    gemvStreamWarpsPerSm: count(1).describe("warps per SM of fk_gemv_stream's one-wave grid, capped by occupancy"),
    gemvWarps: count(1).describe('warps (= output rows) per block of fk_gemv and fk_gemv_stream (FK_WARPS)'),
    gemvUnroll: count(1).describe('16-byte weight vectors each lane of fk_gemv_stream keeps in flight (FK_UNR)'),
    gemvPlainUnroll: count(1).describe('FK_UNR of fk_gemv (taken where fk_gemv_stream\'s K rule fails)'),
    gemvFuseGlu: z.boolean().describe("a gated MLP's gate_up projection and its silu in one fk_gemv_stream launch"),
    gemvLateTrigger: z.enum(['off', 'glu', 'all']).describe('which fk_gemv_stream builds let the next PDL kernel in only when their blocks exit'),
    gemvFuseNorm: z.boolean().describe("a pre-norm projection's RMSNorm in fk_gemv_stream's prologue"),
    gemvNormPrefetch: z.boolean().describe("the fused norm's weight copied into shared memory before the PDL wait (FK_NORM_PF)"),
  }),
  norm: z.strictObject({
    vecsPerThread: count(1).describe('16-byte vectors of its row each thread of fk_rms_norm holds in registers (FK_NPT)'),
  }),
  kvStore: z.strictObject({
    tokensPerBlock: count(1).describe('tokens per block of the KV-cache write, all loads in flight before the first store (FK_TPB)'),
  }),
  rotary: z.strictObject({
    blocksPerSm: count(0).describe('0: one rotary block per token; N: at most N blocks per SM striding over tokens'),
    fuseKvStore: z.boolean().describe('rotary and the KV-cache write as one kernel (fk_rotary_store_kv)'),
  }),
  attention: z.strictObject({
    decodeWarps: count(1).describe('warps per CTA of the register-streaming decode kernel'),
    decodeMaxHeadsPerCta: count(1).describe('most query heads of one kv group a decode CTA takes'),
    decodeUnroll: count(0).describe('tokens per lane row loaded before first use (0: 4, or 2 when heads x elements per lane > 32)'),
    decodeCtasPerSm: count(1).describe('decode CTAs aimed for per SM when choosing the KV split (register-streaming kernel)'),
    decodeMinSplitTokens: count(1).describe('fewest keys per split (register-streaming kernel)'),
    decodeSplitTokens: count(0).describe('force a split size in tokens (0: automatic)'),
    decodeMma: z.boolean().describe('use the tensor-core decode kernel (fk_paged_decode_mma) where it applies'),
    decodeMmaWarps: count(1, 8).describe('warps per CTA of the mma decode kernel'),
    decodeMmaStages: count(0, 8).describe('cp.async ring depth per warp in 16-token tiles (0: as many as decodeMmaSmemBytes allows)'),
    decodeMmaSmemBytes: count(1).describe('shared memory one mma decode CTA may take for its rings when decodeMmaStages is 0'),
    decodeMmaCtasPerSm: count(1).describe('mma decode CTAs aimed for per SM when choosing the split size'),
    decodeMmaMinSplitTokens: count(1).describe('fewest keys per split of the mma decode kernel (rounded up to one tile a warp)'),
    decodeEarlyKv: z.boolean().describe("the mma decode kernel's first cache loads issued before its PDL wait (FK_EARLY_KV)"),
    decodeCombineUnroll: count(0, 16).describe('most splits the decode combine merges from registers, loads all issued at once; 0: loops only'),
    prefillWarps: count(1).describe('warps per prefill CTA on the mma path (16 query rows each)'),
    prefillSkipRescale: z.boolean().describe('skip the O rescale of a key tile when no row max of the warp moved (head dim 128)'),
    prefillMma: z.boolean().describe('use the tensor-core prefill kernel where it applies'),
    prefillWgmma: z.boolean().describe('on sm_90a at head dim 128, the wgmma prefill kernel instead of mma.sync'),
    prefillFa3: z.boolean().describe('on sm_90a, bf16 / f16 at head dim 64 or 128 without sinks, the FlashAttention-3-style TMA prefill kernel (fk_varlen_prefill_fa3) before the wgmma / mma.sync ones'),
  }),
  recurrent: z.strictObject({
    chunkGlaTensorCore: z.boolean().describe('on sm_80+, bf16 / f16 chunk_gla with K <= 256 and K, V multiples of 16 on the tensor-core chunked kernels (fk_gla_chunk_prep + fk_gla_chunk_tc) instead of the CUDA-core fk_gla_chunk'),
    chunkDeltaTensorCore: z.boolean().describe('on sm_80+, bf16 / f16 chunk_gated_delta_rule with K, V multiples of 16 and K <= 256 on the tensor-core chunked kernels (fk_gdn_chunk_prep + fk_gdn_chunk_tc) instead of the CUDA-core fk_gdn_chunk'),
    chunkGlaTileColumns: count(0, 64).refine((v) => [0, 16, 32, 64].includes(v), 'expected 0, 16, 32 or 64').describe("value columns a CTA of fk_gla_chunk_tc walks (16, 32 or 64; 0: the plan's, the narrowest tile whose grid fits one wave); a width V does not divide falls back to the plan's"),
    chunkDeltaTileColumns: count(0, 64).refine((v) => [0, 16, 32, 64].includes(v), 'expected 0, 16, 32 or 64').describe("value columns a CTA of fk_gdn_chunk_tc walks (16, 32 or 64; 0: the plan's, the narrowest tile whose grid fits one wave); a width V does not divide, or one past the device's shared memory, falls back to the plan's"),
  }),
  moe: z.strictObject({
    fusedMoeWgmma: z.boolean().describe('on sm_90a, a bf16 / f16 fused_moe_gemm at prefill (block size a multiple or a divisor of 128, at least 128 rows an expert) on the wgmma + TMA route (fk_moe_tile_map below 128-row blocks, fk_moe_gather_rows, fk_fused_moe_wgmma) instead of the mma.sync fk_fused_moe; off until measured (bench/labs/moe-wgmma)'),
  }),
  softmax: z.strictObject({
    longRowVectors: count(1).describe('vectors a thread keeps in registers on one block a row for long 16-bit rows (FK_NPT)'),
    clusterMaxRows: count(0).describe('most rows (of long rows) that take the cluster path; 0: fewer rows than SMs'),
    clusterSize: count(2, 8).refine((v) => [2, 4, 8].includes(v), 'expected 2, 4 or 8').describe('CTAs a row on the cluster path (2, 4 or 8)'),
    oneReadMinRowBytes: count(0).describe('rows of more input bytes than this take the one-read kernel (a cluster a row, slices in shared memory; sm_90); 0 = off'),
    oneReadSliceBytes: count(1024).describe("a one-read row's bytes per CTA aimed at: its cluster is the fewest CTAs (2, 4 or 8) that keep the slices at most this"),
  }),
  sampler: z.strictObject({
    multiCta: z.boolean().describe('force the multi-CTA sampler for every call'),
    multiCtaMinSampledRows: count(1).describe('fewest drawing rows for which the multi-CTA path is chosen (above 65535: never)'),
    unhinted: z.enum(['single', 'multi']).describe('the path of a call without a hint (nothing known about its rows)'),
    multiCtaCtasPerSm: count(1).describe('CTAs aimed for per SM in total on the multi-CTA path'),
    multiCtaMinPerCta: count(64).describe('fewest logits per CTA on the multi-CTA path (rounded up to a multiple of 64)'),
    multiCtaThreads: count(32, 1024).describe('threads per CTA of the multi-CTA kernels (FK_MT)'),
    greedySplitMaxRows: count(0).describe('most rows for which an all-greedy call takes the greedy split; 0 = off'),
  }),
  engine: z.strictObject({
    chainDecode: z.boolean().describe("launch the next graph decode step before this one's tokens are read (world size 1)"),
  }),
} as const;

type Sections = typeof TUNING_SECTIONS;
export type TuningSection = keyof Sections;
/** The effective tuning: every section, every key. */
export type Tuning = { -readonly [S in TuningSection]: z.output<Sections[S]> };
export type LaunchTuning = Tuning['launch'];
export type LinearTuning = Tuning['linear'];
export type NormTuning = Tuning['norm'];
export type KvStoreTuning = Tuning['kvStore'];
export type RotaryTuning = Tuning['rotary'];
export type AttentionTuning = Tuning['attention'];
export type RecurrentTuning = Tuning['recurrent'];
export type MoeTuning = Tuning['moe'];
export type SoftmaxTuning = Tuning['softmax'];
export type SamplerTuning = Tuning['sampler'];
export type EngineTuning = Tuning['engine'];

export const SECTION_NAMES = Object.keys(TUNING_SECTIONS) as TuningSection[];

const header = {
  description: z.string().optional().describe('what the file is for (free text)'),
  $schema: z.string().optional(),
};

/**
 * A device file: which devices it serves (`match`: substrings of the CUDA device name, case-insensitive; empty for
 * generic.json, the fallback) and every key of every section.
 */
export const DeviceTuningFileSchema = z.strictObject({
  ...header,
  match: z.array(z.string().min(1)).describe('substrings of the CUDA device name this file serves (case-insensitive)'),
  ...TUNING_SECTIONS,
});
export type DeviceTuningFile = z.output<typeof DeviceTuningFileSchema>;

/** An override file (FASTKERNELS_TUNING): any subset of sections and keys, laid over the device's file. */
export const OverrideTuningFileSchema = z.strictObject({
  ...header,
  launch: TUNING_SECTIONS.launch.partial().optional(),
  linear: TUNING_SECTIONS.linear.partial().optional(),
  norm: TUNING_SECTIONS.norm.partial().optional(),
  kvStore: TUNING_SECTIONS.kvStore.partial().optional(),
  rotary: TUNING_SECTIONS.rotary.partial().optional(),
  attention: TUNING_SECTIONS.attention.partial().optional(),
  recurrent: TUNING_SECTIONS.recurrent.partial().optional(),
  moe: TUNING_SECTIONS.moe.partial().optional(),
  softmax: TUNING_SECTIONS.softmax.partial().optional(),
  sampler: TUNING_SECTIONS.sampler.partial().optional(),
  engine: TUNING_SECTIONS.engine.partial().optional(),
});
export type OverrideTuningFile = z.output<typeof OverrideTuningFileSchema>;
