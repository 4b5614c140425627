import { formatShape, type Backend, type Tensor } from '@fastkernels/core';
import { expectFloat, expectRank, gather, gatherInts, output, StridedView } from '../strided.js';

/**
 * softmax(scale * q.k) . v over the given keys, in float64; zeros when there are none. q.k spans `head` dims, the
 * values their first `valueDim`. With a sink logit (gpt-oss's learned per-head sinks), exp(sink) joins the softmax
 * denominator and contributes no value.
 */
function attendRow(
  q: Float64Array,
  qBase: number,
  head: number,
  valueDim: number,
  scale: number,
  keyOffsets: readonly number[],
  keys: Float64Array,
  valueOffsets: readonly number[],
  values: Float64Array,
  out: Float64Array,
  outBase: number,
  sink: number | null = null,
): void {
  const n = keyOffsets.length;
  if (n === 0) return; // out is zero-initialised
  const scores = new Float64Array(n);
  let max = -Infinity;
  for (let j = 0; j < n; j++) {
    let s = 0;
    const k0 = keyOffsets[j]!;
    for (let d = 0; d < head; d++) s += q[qBase + d]! * keys[k0 + d]!;
    scores[j] = s * scale;
    if (scores[j]! > max) max = scores[j]!;
  }
  if (sink !== null && sink > max) max = sink;
  let sum = sink === null ? 0 : Math.exp(sink - max);
  for (let j = 0; j < n; j++) {
    scores[j] = Math.exp(scores[j]! - max);
    sum += scores[j]!;
  }
  for (let j = 0; j < n; j++) {
    const p = scores[j]! / sum;
    const v0 = valueOffsets[j]!;
    for (let d = 0; d < valueDim; d++) out[outBase + d]! += p * values[v0 + d]!;
  }
}

function sinksOf(sinks: Tensor | null, nQ: number, what: string): Float64Array | null {
  if (!sinks) return null;
  if (sinks.numel !== nQ) throw new RangeError(`${what}: sinks ${formatShape(sinks.shape)} must hold one logit per query head (${nQ})`);
  return gather(sinks, `${what} sinks`);
}

function checkGqa(nQ: number, nKv: number, what: string): number {
  if (nKv <= 0 || nQ % nKv !== 0) throw new RangeError(`${what}: ${nQ} query heads are not a multiple of ${nKv} kv heads`);
  return nQ / nKv;
}

/**
 * Decode attention over a paged cache. Sequence b has L = seqLens[b] tokens; token t sits in block
 * blockTables[b][t / blockSize] at offset t % blockSize. Query head h reads kv head h / (nQ / nKv).
 * slidingWindow w > 0 keeps only the last w tokens. sinks [nQ] (optional): a per-head logit in every softmax's
 * denominator. valueDim (default head): the values are the first valueDim dims of each vCache row (MLA's latent rows,
 * keys and values at once). Output [B, nQ, valueDim] in the query's dtype.
 */
export function pagedDecodeAttention(
  backend: Backend,
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
  expectFloat(query, what, 'query');
  expectRank(query, 3, what, 'query [B, nQ, head]');
  expectRank(kCache, 4, what, 'kCache [numBlocks, blockSize, nKv, head]');
  expectRank(vCache, 4, what, 'vCache [numBlocks, blockSize, nKv, head]');
  expectRank(blockTables, 2, what, 'blockTables [B, maxBlocks]');
  const [B, nQ, head] = query.shape as [number, number, number];
  const [numBlocks, blockSize, nKv] = kCache.shape as [number, number, number, number];
  if (kCache.shape[3] !== head || vCache.shape.some((d, i) => d !== kCache.shape[i])) {
    throw new RangeError(`${what}: caches ${formatShape(kCache.shape)} / ${formatShape(vCache.shape)} do not match each other or head size ${head}`);
  }
  if (blockTables.shape[0] !== B || seqLens.numel !== B) throw new RangeError(`${what}: blockTables ${formatShape(blockTables.shape)} and seqLens ${formatShape(seqLens.shape)} must have ${B} rows`);
  if (!Number.isInteger(valueDim) || valueDim < 1 || valueDim > head) throw new RangeError(`${what}: value width ${valueDim} must be an integer in 1..${head} (the first dims of each value row)`);
  const group = checkGqa(nQ, nKv, what);
  const S = sinksOf(sinks, nQ, what);
  const maxBlocks = blockTables.shape[1]!;
  const tables = gatherInts(blockTables, `${what} blockTables`);
  const lens = gatherInts(seqLens, `${what} seqLens`);
  const Q = gather(query, `${what} query`);
  const K = new StridedView(kCache, `${what} kCache`);
  const V = new StridedView(vCache, `${what} vCache`);
  const kd = K.strides[3]!;
  const vd = V.strides[3]!;
  const out = new Float64Array(B * nQ * valueDim);
  for (let b = 0; b < B; b++) {
    const L = lens[b]!;
    if (L < 0 || L > maxBlocks * blockSize) throw new RangeError(`${what}: seqLens[${b}] = ${L} exceeds the ${maxBlocks} blocks of ${blockSize} in its block table`);
    const start = slidingWindow > 0 ? Math.max(0, L - slidingWindow) : 0;
    for (let kvh = 0; kvh < nKv; kvh++) {
      // the sequence's key and value rows decoded once into float64 (every query head of the group reads them: 32 heads
      // on one MLA latent row), then read in the same order as before: the same sums, bit for bit
      const n = L - start;
      const keys = new Float64Array(n * head);
      const values = new Float64Array(n * valueDim);
      for (let t = start; t < L; t++) {
        const block = tables[b * maxBlocks + Math.floor(t / blockSize)]!;
        if (block < 0 || block >= numBlocks) throw new RangeError(`${what}: blockTables[${b}][${Math.floor(t / blockSize)}] = ${block} out of range for ${numBlocks} blocks`);
        const ko = K.at(block, t % blockSize, kvh);
        const vo = V.at(block, t % blockSize, kvh);
        const j = t - start;
        for (let d = 0; d < head; d++) keys[j * head + d] = K.acc.get(ko + d * kd);
        for (let d = 0; d < valueDim; d++) values[j * valueDim + d] = V.acc.get(vo + d * vd);
      }
      const kOffs = Array.from({ length: n }, (_, j) => j * head);
      const vOffs = Array.from({ length: n }, (_, j) => j * valueDim);
      for (let g = 0; g < group; g++) {
        const h = kvh * group + g;
        const row = b * nQ + h;
        attendRow(Q, row * head, head, valueDim, scale, kOffs, keys, vOffs, values, out, row * valueDim, S ? S[h]! : null);
      }
    }
  }
  return output(backend, [B, nQ, valueDim], query.dtype, out, what);
}

/**
 * flash_attn_varlen_func. Sequence i owns q rows cuSeqlensQ[i]..cuSeqlensQ[i+1] and k/v rows
 * cuSeqlensK[i]..cuSeqlensK[i+1]. With lq queries and lk keys, query j is aligned to key
 * j + lk - lq (bottom-right). Causal hides keys after that; slidingWindow w > 0 hides keys before
 * (j + lk - lq) - w + 1 (applied with or without causal, like flash-attn's left window).
 * A query row that sees no key is zero. sinks [nQ] (optional): a per-head logit in every softmax's denominator.
 * Output [Tq, nQ, head] in q's dtype.
 */
export function varlenPrefillAttention(
  backend: Backend,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  cuSeqlensQ: Tensor,
  cuSeqlensK: Tensor,
  scale: number,
  causal: boolean,
  slidingWindow: number,
  sinks: Tensor | null = null,
): Tensor {
  const what = 'varlenPrefillAttention';
  expectFloat(q, what, 'q');
  expectRank(q, 3, what, 'q [Tq, nQ, head]');
  expectRank(k, 3, what, 'k [Tk, nKv, head]');
  expectRank(v, 3, what, 'v [Tk, nKv, head]');
  const [Tq, nQ, head] = q.shape as [number, number, number];
  const [Tk, nKv] = k.shape as [number, number, number];
  if (k.shape[2] !== head || v.shape.some((d, i) => d !== k.shape[i])) throw new RangeError(`${what}: k ${formatShape(k.shape)} and v ${formatShape(v.shape)} must both be [Tk, nKv, ${head}]`);
  const group = checkGqa(nQ, nKv, what);
  const S = sinksOf(sinks, nQ, what);
  const cq = gatherInts(cuSeqlensQ, `${what} cuSeqlensQ`);
  const ck = gatherInts(cuSeqlensK, `${what} cuSeqlensK`);
  if (cq.length !== ck.length || cq.length < 1) throw new RangeError(`${what}: cuSeqlensQ (${cq.length}) and cuSeqlensK (${ck.length}) must both have B + 1 entries`);
  const Q = gather(q, `${what} q`);
  const K = gather(k, `${what} k`);
  const V = gather(v, `${what} v`);
  const out = new Float64Array(Q.length);
  for (let i = 0; i + 1 < cq.length; i++) {
    const q0 = cq[i]!;
    const q1 = cq[i + 1]!;
    const k0 = ck[i]!;
    const k1 = ck[i + 1]!;
    if (q0 < 0 || q1 < q0 || q1 > Tq || k0 < 0 || k1 < k0 || k1 > Tk) {
      throw new RangeError(`${what}: sequence ${i} spans q [${q0}, ${q1}) of ${Tq} and k [${k0}, ${k1}) of ${Tk}: cu_seqlens must be non-decreasing and in range`);
    }
    const lq = q1 - q0;
    const lk = k1 - k0;
    for (let j = 0; j < lq; j++) {
      const diag = j + lk - lq;
      const hi = causal ? Math.min(diag, lk - 1) : lk - 1;
      const lo = slidingWindow > 0 ? Math.max(0, diag - slidingWindow + 1) : 0;
      for (let kvh = 0; kvh < nKv; kvh++) {
        const offs: number[] = [];
        for (let key = lo; key <= hi; key++) offs.push(((k0 + key) * nKv + kvh) * head);
        for (let g = 0; g < group; g++) {
          const base = ((q0 + j) * nQ + kvh * group + g) * head;
          attendRow(Q, base, head, head, scale, offs, K, offs, V, out, base, S ? S[kvh * group + g]! : null);
        }
      }
    }
  }
  return output(backend, q.shape, q.dtype, out, what);
}
