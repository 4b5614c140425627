/**
 * Attention ops of the decoder spine on CUDA (kernels/attention_decode.cu, kernels/attention_prefill.cu).
 *
 * - pagedDecodeAttention: split-K flash decoding over the paged cache; a CTA per (split, group of query heads
 *   sharing a kv head, sequence), fp32 partials merged by a combine kernel when there is more than one split.
 *   bf16/f16 at head dim 64/128 take the tensor-core kernel (per-warp cp.async rings of 16-token tiles; a
 *   sequence that fits one split is written directly); the rest (or attention.decodeMma off in the tuning) the
 *   register-streaming kernel.
 *   The split size is chosen from the block table's capacity (seq_lens stay on the device: no host sync, so
 *   decode is graph-capturable; splits past a sequence's length exit at once).
 * - varlenPrefillAttention: on sm_90a the FlashAttention-3-style TMA kernel (prefill-fa3.ts: bf16/f16, head dim 64/128,
 *   with or without sinks, TMA-addressable operands; attention.prefillFa3), else the wgmma kernel (sm_90a, head dim 128) or the
 *   FlashAttention-2 style mma.sync kernel for bf16/f16 at head dim 64/128; a simple
 *   fp32-accumulating warp-per-row kernel for fp32 and other head dims (<= 256). Tiles are found on the device
 *   from cu_seqlens_q (no host sync either).
 *
 * Both read strided q/k/v/caches in place (any row and head strides, the head dim contiguous), so a slice of a
 * fused qkv projection needs no copy; anything else is copied contiguous first.
 *
 * Both take optional sinks [nQ] (gpt-oss's per-head logits in every softmax denominator): the kernels' FK_SINKS=1 build,
 * reading them as fp32 (converted first when they are not). Every kernel's last argument is the sinks pointer, 0 without
 * sinks (the build without them does not declare it: kernels/attention_decode.cu).
 */
import { formatShape, Tensor, type Backend, type DType } from '@fastkernels/core';
import type { CudaKernel } from '../../kernel.js';
import { cudaTuning } from '../../tuning/load.js';
import { planDecode, planPrefill, vectorBytes } from './attention-plan.js';
import { asDType, fileKernel, lastDimContiguous, ptr } from '../launch/common.js';
import { fa3Operand, fa3Route, launchPrefillFa3, type Fa3Maps } from './prefill-fa3.js';
import type { SpineContext } from '../launch/context.js';
import { mlaRouteDecline, pagedMlaDecode } from './mla-decode.js';


const CTYPE: Partial<Record<DType, string>> = { f32: 'float', f16: '__half', bf16: '__nv_bfloat16' };
const LOG2E = Math.LOG2E;

function ctype(what: string, t: Tensor): string {
  const c = CTYPE[t.dtype];
  if (!c) throw new TypeError(`${what}: dtype ${t.dtype} is not supported on CUDA (f32, f16, bf16)`);
  return c;
}

/** An int32 index tensor, contiguous (copied, or converted from i64, when needed). */
function int32Contiguous(what: string, t: Tensor, temps: Tensor[]): Tensor {
  if (t.dtype === 'i32' && t.isContiguous()) return t;
  if (t.dtype !== 'i32' && t.dtype !== 'i64') throw new TypeError(`${what}: expected an i32 tensor, got ${t.dtype}`);
  const c = t.dtype === 'i32' ? t.contiguous() : t.to('i32'); // both give a contiguous tensor
  temps.push(c);
  return c;
}

function checkGqa(what: string, nQ: number, nKv: number): number {
  if (nKv <= 0 || nQ % nKv !== 0) throw new RangeError(`${what}: ${nQ} query heads are not a multiple of ${nKv} kv heads`);
  return nQ / nKv;
}

/** Strides of dims 0..rank-2 of t (elements); the last dim is contiguous. */
function outerStrides(t: Tensor): number[] {
  return t.strides.slice(0, -1).map((s, i) => (t.shape[i] === 1 ? 0 : s));
}

/** The sinks [nQ] as a contiguous fp32 tensor (converted or copied into temps when needed), or null without sinks. */
function sinksF32(what: string, sinks: Tensor | null | undefined, query: Tensor, nQ: number, temps: Tensor[]): Tensor | null {
  if (!sinks) return null;
  if (sinks.numel !== nQ || sinks.rank !== 1) throw new RangeError(`${what}: sinks ${formatShape(sinks.shape)} must be [${nQ}] (one logit per query head)`);
  if (sinks.dtype !== 'f32' && sinks.dtype !== 'f16' && sinks.dtype !== 'bf16') throw new TypeError(`${what}: sinks dtype ${sinks.dtype} is not supported on CUDA (f32, f16, bf16)`);
  if (sinks.device !== query.device) throw new RangeError(`${what}: sinks are on device ${sinks.device}, the query on ${query.device}`);
  return asDType(sinks, 'f32', temps);
}

/** The spine context of a CUDA backend (CudaOps.spine), for the registry kernels (register.ts). */
export function spineOf(what: string, backend: Backend): SpineContext {
  const spine = (backend.ops as { spine?: SpineContext }).spine;
  if (!spine) throw new Error(`${what}: backend '${backend.name}' has no CUDA spine context (backend.ops.spine)`);
  return spine;
}

/** The FK_SINKS define of a build with sinks (none without: the build from before sinks). */
const sinkDefines = (sinks: Tensor | null): string[] => (sinks ? ['-DFK_SINKS=1'] : []);

// ------------------------------------------------------------------------------------------------- decode

/**
 * valueDim (default the head size): the values are the first valueDim dims of each vCache row; the output is
 * [B, nQ, valueDim]. The MLA kernel (D > 256) computes only those columns; the kernels up to 256 compute the whole row
 * and the first valueDim columns are copied out (one more launch: nothing at those sizes passes a narrower value yet).
 */
export function pagedDecodeAttention(
  ctx: SpineContext,
  query: Tensor,
  kCache: Tensor,
  vCache: Tensor,
  blockTables: Tensor,
  seqLens: Tensor,
  scale: number,
  slidingWindow: number,
  sinks: Tensor | null = null,
  valueDim: number = query.shape[2]!,
): Tensor {
  const what = 'pagedDecodeAttention';
  if (query.rank !== 3) throw new RangeError(`${what}: query must be [B, nQ, head], got ${formatShape(query.shape)}`);
  if (kCache.rank !== 4 || vCache.rank !== 4) throw new RangeError(`${what}: caches must be [numBlocks, blockSize, nKv, head], got ${formatShape(kCache.shape)} / ${formatShape(vCache.shape)}`);
  if (blockTables.rank !== 2) throw new RangeError(`${what}: blockTables must be [B, maxBlocks], got ${formatShape(blockTables.shape)}`);
  const [B, nQ, D] = query.shape as [number, number, number];
  const [, blockSize, nKv] = kCache.shape as [number, number, number, number];
  if (kCache.shape[3] !== D || vCache.shape.some((d, i) => d !== kCache.shape[i])) {
    throw new RangeError(`${what}: caches ${formatShape(kCache.shape)} / ${formatShape(vCache.shape)} do not match each other or head size ${D}`);
  }
  if (blockTables.shape[0] !== B || seqLens.numel !== B) throw new RangeError(`${what}: blockTables ${formatShape(blockTables.shape)} and seqLens ${formatShape(seqLens.shape)} must have ${B} rows`);
  const T = ctype(what, query);
  if (kCache.dtype !== query.dtype || vCache.dtype !== query.dtype) throw new TypeError(`${what}: caches (${kCache.dtype}, ${vCache.dtype}) must have the query's dtype ${query.dtype}`);
  const group = checkGqa(what, nQ, nKv);
  if (!Number.isInteger(valueDim) || valueDim < 1 || valueDim > D) throw new RangeError(`${what}: value width ${valueDim} must be an integer in 1..${D} (the first dims of each value row)`);
  if (D > 256) {
    // MLA's absorbed decode (one latent kv head, the rows both keys and values): its own kernel (mla-decode.ts)
    const mla = mlaRouteDecline(query, kCache, vCache, sinks, slidingWindow);
    if (mla === null) return pagedMlaDecode(ctx, query, kCache, blockTables, seqLens, scale, valueDim);
    throw new RangeError(`${what}: head size ${D} > 256 is supported on CUDA only for MLA's latent cache, not here: ${mla}`);
  }
  if (valueDim !== D) {
    const full = pagedDecodeAttention(ctx, query, kCache, vCache, blockTables, seqLens, scale, slidingWindow, sinks);
    const view = full.narrow(2, 0, valueDim);
    try {
      return view.contiguous();
    } finally {
      view.dispose();
      full.dispose();
    }
  }
  if (B > 65535) throw new RangeError(`${what}: batch ${B} > 65535`);

  const out = Tensor.empty(query.backend, [B, nQ, D], query.dtype, { device: query.device });
  if (B === 0 || nQ === 0 || D === 0) return out;
  const temps: Tensor[] = [];
  try {
    const q = lastDimContiguous(query, temps);
    const kc = lastDimContiguous(kCache, temps);
    const vc = lastDimContiguous(vCache, temps);
    const bt = int32Contiguous(`${what} blockTables`, blockTables, temps);
    const lens = int32Contiguous(`${what} seqLens`, seqLens, temps);
    const sk = sinksF32(what, sinks, query, nQ, temps); // before earlyKv below: a conversion is a launch
    // FK_EARLY_KV reads the caches, the table and the lengths before its PDL wait, all but each sequence's newest key:
    // only right after the KV-cache write of one token a sequence into these caches (the decode step's), with nothing of
    // ours launched since (a copy above would be such a launch)
    const earlyKv = cudaTuning().attention.decodeEarlyKv && ctx.followsKvWrite(ptr(kc), ptr(vc), B);
    const it = query.itemsize;
    const [qsb, qsh] = outerStrides(q) as [number, number];
    const [ksb, kst, ksh] = outerStrides(kc) as [number, number, number];
    const [vsb, vst, vsh] = outerStrides(vc) as [number, number, number];
    const vb = vectorBytes(it, [D * it, ptr(q), ptr(kc), ptr(vc), ...[qsb, qsh, ksb, kst, ksh, vsb, vst, vsh].map((s) => s * it)]);
    const maxBlocks = bt.shape[1]!;
    const cacheVb = vectorBytes(it, [D * it, ptr(kc), ptr(vc), ...[ksb, kst, ksh, vsb, vst, vsh].map((s) => s * it)]);
    const plan = planDecode({
      batch: B, qHeads: nQ, kvHeads: nKv, headDim: D, itemsize: it, vecBytes: vb, blockSize, maxBlocks,
      slidingWindow: Math.max(0, slidingWindow), multiprocessors: ctx.multiprocessors, dtype: query.dtype, cacheVecBytes: cacheVb,
      sharedPerBlockOptin: ctx.runtime.properties().sharedPerBlockOptin,
    });
    const main = plan.mma
      ? decodeKernel(ctx, 'fk_paged_decode_mma', [
          `-DFK_T=${T}`, `-DFK_D=${D}`, `-DFK_MHG=${plan.headsPerCta}`, `-DFK_MWARPS=${plan.warps}`, `-DFK_STAGES=${plan.stages}`, `-DFK_BS=${blockSize}`, '-DFK_DEC_PATH=2',
          ...(earlyKv ? ['-DFK_EARLY_KV=1'] : []), ...sinkDefines(sk),
        ])
      : decodeKernel(ctx, 'fk_paged_decode', [
          `-DFK_T=${T}`, `-DFK_D=${D}`, `-DFK_VB=${plan.vecBytes}`, `-DFK_HG=${plan.headsPerCta}`, `-DFK_UNROLL=${plan.unroll}`, `-DFK_BS=${blockSize}`, `-DFK_WARPS=${plan.warps}`,
          '-DFK_DEC_PATH=1', ...sinkDefines(sk),
        ]);
    let partAcc: Tensor | undefined;
    let partMl: Tensor | undefined;
    if (plan.splits > 1) {
      partAcc = Tensor.empty(query.backend, [B * nQ * plan.splits * D], 'f32', { device: query.device });
      partMl = Tensor.empty(query.backend, [B * nQ * plan.splits * 2], 'f32', { device: query.device });
      temps.push(partAcc, partMl);
    }
    const scaleLog2 = scale * LOG2E;
    const window = Math.max(0, slidingWindow);
    main.launch(plan.grid, plan.warps * 32, plan.sharedBytes, [
      ptr(out), partAcc ? ptr(partAcc) : 0, partMl ? ptr(partMl) : 0,
      ptr(q), qsb, qsh,
      ptr(kc), ksb, kst, ksh,
      ptr(vc), vsb, vst, vsh,
      ptr(bt), outerStrides(bt)[0]!, maxBlocks,
      ptr(lens), nQ, group, window, scaleLog2, plan.chunk, plan.splits, sk ? ptr(sk) : 0,
    ]);
    if (plan.splits > 1) {
      // Only FK_T and the unroll matter to the combine kernel; the other macros keep one compiled module per (T).
      // With sinks the combine kernel adds them for the sequences it merges (the main kernel for those it writes).
      const combine = decodeKernel(ctx, 'fk_paged_decode_combine', [`-DFK_T=${T}`, `-DFK_COMBINE_UNROLL=${cudaTuning().attention.decodeCombineUnroll}`, ...sinkDefines(sk)]);
      combine.launch([nQ, B, 1], Math.min(256, Math.ceil(D / 32) * 32), 0, [
        ptr(out), ptr(partAcc!), ptr(partMl!), ptr(lens), maxBlocks * blockSize, nQ, D, window, plan.chunk, plan.splits, plan.mma ? 1 : 0, sk ? ptr(sk) : 0,
      ]);
    }
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
}

/**
 * Whether this prefill takes the FA3 kernel (prefill-fa3.ts, fa3Route): its encoded tensor maps, or why not. Every cheap
 * test first; then the maps are encoded (cached), and a layout the driver refuses declines with the driver's words.
 */
export function prefillFa3Route(
  ctx: SpineContext, q: Tensor, k: Tensor, v: Tensor, totalQ: number, numSeqs: number,
): { take: true; maps: Fa3Maps } | { take: false; reason: string } {
  return fa3Route(ctx, q.dtype, q.shape[2]!, { q: fa3Operand(q), k: fa3Operand(k), v: fa3Operand(v) }, totalQ, numSeqs);
}

function decodeKernel(ctx: SpineContext, entry: string, options: string[]): CudaKernel {
  return fileKernel(ctx, 'attention_decode.cu', entry, options);
}

// ------------------------------------------------------------------------------------------------ prefill

export function varlenPrefillAttention(
  ctx: SpineContext,
  qIn: Tensor,
  kIn: Tensor,
  vIn: Tensor,
  cuSeqlensQ: Tensor,
  cuSeqlensK: Tensor,
  scale: number,
  causal: boolean,
  slidingWindow: number,
  sinks: Tensor | null = null,
): Tensor {
  const what = 'varlenPrefillAttention';
  if (qIn.rank !== 3 || kIn.rank !== 3 || vIn.rank !== 3) throw new RangeError(`${what}: q, k, v must be [T, heads, head], got ${formatShape(qIn.shape)}, ${formatShape(kIn.shape)}, ${formatShape(vIn.shape)}`);
  const [Tq, nQ, D] = qIn.shape as [number, number, number];
  const [, nKv] = kIn.shape as [number, number, number];
  if (kIn.shape[2] !== D || vIn.shape.some((d, i) => d !== kIn.shape[i])) throw new RangeError(`${what}: k ${formatShape(kIn.shape)} and v ${formatShape(vIn.shape)} must both be [Tk, nKv, ${D}]`);
  const T = ctype(what, qIn);
  if (kIn.dtype !== qIn.dtype || vIn.dtype !== qIn.dtype) throw new TypeError(`${what}: k (${kIn.dtype}) and v (${vIn.dtype}) must have q's dtype ${qIn.dtype}`);
  const group = checkGqa(what, nQ, nKv);
  if (cuSeqlensQ.numel !== cuSeqlensK.numel || cuSeqlensQ.numel < 1) throw new RangeError(`${what}: cuSeqlensQ (${cuSeqlensQ.numel}) and cuSeqlensK (${cuSeqlensK.numel}) must both have B + 1 entries`);
  if (D > 256) throw new RangeError(`${what}: head size ${D} > 256 is not supported on CUDA`);

  const out = Tensor.empty(qIn.backend, [Tq, nQ, D], qIn.dtype, { device: qIn.device });
  if (Tq === 0 || nQ === 0 || D === 0) return out;
  const temps: Tensor[] = [];
  try {
    const numSeqs = cuSeqlensQ.numel - 1;
    const cuQ = int32Contiguous(`${what} cuSeqlensQ`, cuSeqlensQ, temps);
    const cuK = int32Contiguous(`${what} cuSeqlensK`, cuSeqlensK, temps);
    const sk = sinksF32(what, sinks, qIn, nQ, temps);
    const plan = planPrefill({ totalQ: Tq, qHeads: nQ, headDim: D, dtype: qIn.dtype, numSeqs, arch: ctx.runtime.properties().arch });
    let q = lastDimContiguous(qIn, temps);
    let k = lastDimContiguous(kIn, temps);
    let v = lastDimContiguous(vIn, temps);
    const window = Math.max(0, slidingWindow);
    const scaleLog2 = scale * LOG2E;
    const fa3 = prefillFa3Route(ctx, q, k, v, Tq, numSeqs);
    if (fa3.take) {
      launchPrefillFa3(ctx, {
        out, maps: fa3.maps, dtype: qIn.dtype as 'bf16' | 'f16', headDim: D, cuQ, cuK, sinks: sk, numSeqs, totalQ: Tq, qHeads: nQ, group, causal, window, scaleLog2,
      });
      return out;
    }
    if (plan.mma) {
      // cp.async moves 16-byte chunks: every row/head start must be 16-byte aligned, else copy contiguous.
      const aligned = (t: Tensor) => [ptr(t), ...outerStrides(t).map((s) => s * t.itemsize)].every((x) => x % 16 === 0);
      const fix = (t: Tensor) => (aligned(t) ? t : (temps.push(t.contiguous()), temps[temps.length - 1]!));
      q = fix(q);
      k = fix(k);
      v = fix(v);
    }
    if (plan.grid[1] > 65535 && plan.mma) throw new RangeError(`${what}: ${plan.grid[1]} query tiles exceed the grid limit`);
    const [qsr, qsh] = outerStrides(q) as [number, number];
    const [ksr, ksh] = outerStrides(k) as [number, number];
    const [vsr, vsh] = outerStrides(v) as [number, number];
    if (plan.mma) {
      const entry = plan.kernel === 'wgmma' ? 'fk_varlen_prefill_wgmma' : 'fk_varlen_prefill';
      const kernel = fileKernel(ctx, 'attention_prefill.cu', entry, [`-DFK_T=${T}`, `-DFK_D=${D}`, `-DFK_WARPS=${plan.warps}`, `-DFK_SKIP_RESCALE=${plan.skipRescale ? 1 : 0}`, ...sinkDefines(sk)]);
      kernel.launch(plan.grid, plan.block, plan.sharedBytes, [
        ptr(out), ptr(q), qsr, qsh, ptr(k), ksr, ksh, ptr(v), vsr, vsh,
        ptr(cuQ), ptr(cuK), numSeqs, Tq, nQ, group, causal ? 1 : 0, window, scaleLog2, sk ? ptr(sk) : 0,
      ]);
    } else {
      const kernel = fileKernel(ctx, 'attention_prefill.cu', 'fk_varlen_prefill_simple', [`-DFK_T=${T}`, `-DFK_D=${D}`, `-DFK_WARPS=${plan.warps}`, ...sinkDefines(sk)]);
      if (plan.grid[0] > 2 ** 31 - 1 || plan.grid[1] > 65535) throw new RangeError(`${what}: grid ${plan.grid.join('x')} too large`);
      kernel.launch(plan.grid, plan.block, 0, [
        ptr(out), ptr(q), qsr, qsh, ptr(k), ksr, ksh, ptr(v), vsr, vsh,
        ptr(cuQ), ptr(cuK), numSeqs, Tq, nQ, group, causal ? 1 : 0, window, scaleLog2, sk ? ptr(sk) : 0,
      ]);
    }
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
}
