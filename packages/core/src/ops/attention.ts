/**
 * The attention group: dense scaled_dot_product_attention with PyTorch's F.scaled_dot_product_attention semantics
 * (bool or additive attn_mask broadcast to [..., L, S], top-left causal, scale, enable_gqa), for inference.
 * The decoder engine's paged_decode_attention and varlen_prefill_attention are members too, routed to the backend's
 * Ops methods (the Llama path keeps calling those directly).
 */
import { z } from 'zod';
import { DTYPE_INFO } from '../dtype.js';
import { formatShape } from '../shape.js';
import { Tensor } from '../tensor.js';
import { broadcastShapesOf } from './broadcast.js';
import { commonFloatDType, expandsTo } from './matmul.js';
import { callOp1, defineOp, meta, opError, type TensorMeta } from './registry.js';

const sdpaAttrs = z
  .object({
    dropout_p: z.number().default(0),
    is_causal: z.boolean().default(false),
    scale: z.number().nullable().default(null),
    enable_gqa: z.boolean().default(false),
  })
  .strict();
export type SdpaAttrs = z.input<typeof sdpaAttrs>;

const OP = 'scaled_dot_product_attention';

defineOp({
  name: OP,
  group: 'attention',
  doc:
    'softmax(q k^T * scale + mask) v for query [..., Hq, L, E], key [..., Hkv, S, E], value [..., Hkv, S, Ev] -> [..., Hq, L, Ev]. ' +
    'attn_mask: bool (true = may attend) or float (added), broadcast to [..., L, S]; is_causal: query i sees keys 0..i (top-left, ' +
    'as torch); scale defaults to 1/sqrt(E); enable_gqa: Hq = g * Hkv, query head h reads kv head h / g. dropout_p must be 0. ' +
    'A row with every key masked gives zeros (torch math path since 2.5).',
  inputs: [{ name: 'query', dtypes: 'float' }, { name: 'key', dtypes: 'float' }, { name: 'value', dtypes: 'float' }, { name: 'attn_mask', optional: true }],
  attrs: sdpaAttrs,
  infer: ([q, k, v, m], a) => {
    const dtype = commonFloatDType(OP, [['query', q!], ['key', k!], ['value', v!]]);
    const [qs, ks, vs] = [q, k, v].map((t) => (t as TensorMeta).shape);
    for (const [n, s] of [['query', qs], ['key', ks], ['value', vs]] as const) if (s!.length < 2) opError(OP, `${n} needs at least 2 dims [..., seq, head_dim], got ${formatShape(s!)}`);
    if (a.dropout_p !== 0) opError(OP, `dropout_p must be 0 (inference), got ${a.dropout_p}`);
    if (a.is_causal && m) opError(OP, 'attn_mask must not be given when is_causal is true (as in torch)');
    const L = qs![qs!.length - 2]!;
    const E = qs![qs!.length - 1]!;
    const S = ks![ks!.length - 2]!;
    if (ks![ks!.length - 1] !== E) opError(OP, `key ${formatShape(ks!)} head dim must equal query's ${E} (query ${formatShape(qs!)})`);
    if (vs![vs!.length - 2] !== S) opError(OP, `value ${formatShape(vs!)} must have the ${S} keys of key ${formatShape(ks!)}`);
    const qLead = qs!.slice(0, -2);
    let kLead = ks!.slice(0, -2);
    const vLead = vs!.slice(0, -2);
    if (kLead.length !== vLead.length || kLead.some((d, i) => d !== vLead[i])) opError(OP, `key ${formatShape(ks!)} and value ${formatShape(vs!)} must share their leading dims`);
    if (a.enable_gqa && qs!.length >= 3 && ks!.length >= 3) {
      const Hq = qs![qs!.length - 3]!;
      const Hkv = ks![ks!.length - 3]!;
      if (Hkv === 0 || Hq % Hkv !== 0) opError(OP, `enable_gqa needs query heads (${Hq}) to be a multiple of key/value heads (${Hkv}); query ${formatShape(qs!)}, key ${formatShape(ks!)}`);
      kLead = [...kLead.slice(0, -1), Hq];
    }
    const lead = broadcastShapesOf(OP, [qLead, kLead], ['batch/head dims of query', a.enable_gqa ? 'batch/head dims of key' : 'batch/head dims of key (different head counts need enable_gqa=true)']);
    if (m) {
      const mt = m as TensorMeta;
      if (DTYPE_INFO[mt.dtype].kind === 'int') opError(OP, `attn_mask must be bool or float, got ${mt.dtype}`);
      const target = [...lead, L, S];
      if (!expandsTo(mt.shape, target)) opError(OP, `attn_mask ${formatShape(mt.shape)} does not broadcast to ${formatShape(target)}`);
    }
    return [meta([...lead, L, vs![vs!.length - 1]!], dtype)];
  },
  // the math path with other ops (a backend without an attention kernel): q k^T * scale, the mask, softmax, @ v. Each
  // step rounds to the dtype, and a row with every key masked gives NaN here (softmax of -inf), not the kernel's zeros.
  decompose: (call) => {
    const [q, k, v, mask] = call.inputs as [Tensor, Tensor, Tensor, Tensor | null];
    const a = call.attrs;
    const owned: Tensor[] = [];
    const keep = (t: Tensor) => (owned.push(t), t);
    try {
      let [k2, v2] = [k, v];
      if (a.enable_gqa && q.rank >= 3 && k.rank >= 3 && q.shape[q.rank - 3] !== k.shape[k.rank - 3]) {
        // repeat_interleave of the kv heads: [..., Hkv, S, D] -> [..., Hkv, g, S, D] -> [..., Hq, S, D]
        const g = q.shape[q.rank - 3]! / k.shape[k.rank - 3]!;
        const rep = (t: Tensor) => {
          const u = keep(t.unsqueeze(t.rank - 2));
          const shape = [...u.shape];
          shape[t.rank - 2] = g;
          const e = keep(u.expand(shape));
          return keep(e.reshape([...t.shape.slice(0, -3), t.shape[t.rank - 3]! * g, ...t.shape.slice(-2)]));
        };
        [k2, v2] = [rep(k), rep(v)];
      }
      const kt = keep(k2.transpose(-2, -1));
      const E = q.shape[q.rank - 1]!;
      let scores = keep(callOp1('mul', [keep(callOp1('matmul', [q, kt])), a.scale ?? 1 / Math.sqrt(E)]));
      const [L, S] = [q.shape[q.rank - 2]!, k.shape[k.rank - 2]!];
      let m = mask;
      if (a.is_causal) {
        m = keep(Tensor.fromArray(call.backend, Array.from({ length: L * S }, (_, i) => (i % S <= Math.floor(i / S) ? 1 : 0)), [L, S], 'bool', { device: q.device }));
      }
      if (m && m.dtype !== 'bool' && m.dtype !== scores.dtype) m = keep(callOp1('to', [m], { dtype: scores.dtype })); // no promotion past q's dtype
      if (m) scores = keep(m.dtype === 'bool' ? callOp1('where', [m, scores, -Infinity]) : callOp1('add', [scores, m]));
      const p = keep(callOp1('softmax', [scores], { dim: -1 }));
      return [callOp1('matmul', [p, v2])];
    } finally {
      for (const t of owned) t.dispose();
    }
  },
});

// ---------------------------------------------------------------------------------------------
// the decoder engine's attention (the Llama path's Ops methods as members of the group)

const intIn = ['i32', 'i64'] as const;

/** sinks: one logit per query head. */
function checkSinks(op: string, sinks: unknown, nQ: number): void {
  if (!sinks) return;
  const s = (sinks as TensorMeta).shape;
  if (s.length !== 1 || s[0] !== nQ) opError(op, `sinks ${formatShape(s)} must be [${nQ}] (one logit per query head)`);
}

defineOp({
  name: 'paged_decode_attention',
  group: 'attention',
  doc:
    'Decode attention over a paged KV cache (vLLM paged attention): query [B, nQ, head], k_cache / v_cache [num_blocks, block_size, nKv, head], ' +
    'block_tables [B, max_blocks] (int), seq_lens [B] (int); token t of sequence b sits in block block_tables[b, t / block_size] at t % block_size; ' +
    'GQA when nQ > nKv; sliding_window w > 0 keeps the last w tokens; sinks [nQ] (optional, gpt-oss): a per-head logit that joins every softmax denominator ' +
    'with no value (flash-attn s_aux; the Ops method has no sinks, so only a backend kernel runs them); v_head_dim (optional, default head): the values are ' +
    'the first v_head_dim dims of each v_cache row (MLA\'s absorbed decode: the latent rows are keys and values, the output keeps kv_lora_rank of them, as ' +
    'FlashMLA\'s head_dim_v). -> [B, nQ, v_head_dim].',
  inputs: [
    { name: 'query', dtypes: 'float' },
    { name: 'k_cache', dtypes: 'float' },
    { name: 'v_cache', dtypes: 'float' },
    { name: 'block_tables', dtypes: intIn },
    { name: 'seq_lens', dtypes: intIn },
    { name: 'sinks', optional: true, dtypes: 'float' },
  ],
  attrs: z.object({ scale: z.number(), sliding_window: z.number().int().min(0).default(0), v_head_dim: z.number().int().nullable().default(null) }).strict(),
  infer: ([q, kc, vc, bt, sl, sinks], a) => {
    const op = 'paged_decode_attention';
    const dtype = commonFloatDType(op, [['query', q!], ['k_cache', kc!], ['v_cache', vc!]]);
    const qs = (q as TensorMeta).shape;
    if (qs.length !== 3) opError(op, `query must be [B, nQ, head], got ${formatShape(qs)}`);
    const [B, nQ, head] = qs as [number, number, number];
    const ks = (kc as TensorMeta).shape;
    if (ks.length !== 4 || ks[3] !== head) opError(op, `k_cache must be [num_blocks, block_size, nKv, ${head}], got ${formatShape(ks)}`);
    const vs = (vc as TensorMeta).shape;
    if (vs.length !== 4 || vs.some((d, i) => d !== ks[i])) opError(op, `v_cache ${formatShape(vs)} must match k_cache ${formatShape(ks)}`);
    if (ks[2] === 0 || nQ % ks[2]! !== 0) opError(op, `${nQ} query heads are not a multiple of ${ks[2]} kv heads`);
    const bts = (bt as TensorMeta).shape;
    if (bts.length !== 2 || bts[0] !== B) opError(op, `block_tables ${formatShape(bts)} must be [${B}, max_blocks]`);
    const sls = (sl as TensorMeta).shape;
    if (sls.length !== 1 || sls[0] !== B) opError(op, `seq_lens ${formatShape(sls)} must be [${B}]`);
    checkSinks(op, sinks, nQ);
    const dv = a.v_head_dim ?? head;
    if (dv < 1 || dv > head) opError(op, `v_head_dim ${dv} must be in 1..${head} (the values are the first v_head_dim dims of each v_cache row of ${head})`);
    return [meta([B, nQ, dv], dtype)];
  },
  viaOps: (ops, call) => {
    const [q, kc, vc, bt, sl, sinks] = call.inputs as (Tensor | null)[];
    if (sinks) return undefined;
    const out = ops.pagedDecodeAttention(q!, kc!, vc!, bt!, sl!, call.attrs.scale, call.attrs.sliding_window);
    const dv = call.attrs.v_head_dim ?? out.shape[2]!;
    if (dv === out.shape[2]) return [out];
    // the Ops method has no value width: its whole-row result, narrowed
    const view = out.narrow(2, 0, dv);
    try {
      return [view.contiguous()];
    } finally {
      view.dispose();
      out.dispose();
    }
  },
});

defineOp({
  name: 'varlen_prefill_attention',
  group: 'attention',
  doc:
    'Variable-length prefill attention (flash_attn_varlen_func): q [Tq, nQ, head], k / v [Tk, nKv, head], cu_seqlens_q / cu_seqlens_k [B + 1] (int); ' +
    'causal masks align the ends of each q and k sequence (bottom-right, as flash-attn); sliding_window w > 0 hides keys more than w - 1 before the diagonal; ' +
    'sinks [nQ] (optional, gpt-oss): a per-head logit that joins every softmax denominator with no value (flash-attn s_aux; kernel only). -> [Tq, nQ, head].',
  inputs: [
    { name: 'q', dtypes: 'float' },
    { name: 'k', dtypes: 'float' },
    { name: 'v', dtypes: 'float' },
    { name: 'cu_seqlens_q', dtypes: intIn },
    { name: 'cu_seqlens_k', dtypes: intIn },
    { name: 'sinks', optional: true, dtypes: 'float' },
  ],
  attrs: z.object({ scale: z.number(), causal: z.boolean().default(false), sliding_window: z.number().int().min(0).default(0) }).strict(),
  infer: ([q, k, v, cq, ck, sinks]) => {
    const op = 'varlen_prefill_attention';
    const dtype = commonFloatDType(op, [['q', q!], ['k', k!], ['v', v!]]);
    const qs = (q as TensorMeta).shape;
    if (qs.length !== 3) opError(op, `q must be [Tq, nQ, head], got ${formatShape(qs)}`);
    const ks = (k as TensorMeta).shape;
    if (ks.length !== 3 || ks[2] !== qs[2]) opError(op, `k must be [Tk, nKv, ${qs[2]}], got ${formatShape(ks)}`);
    const vs = (v as TensorMeta).shape;
    if (vs.length !== 3 || vs.some((d, i) => d !== ks[i])) opError(op, `v ${formatShape(vs)} must match k ${formatShape(ks)}`);
    if (ks[1] === 0 || qs[1]! % ks[1]! !== 0) opError(op, `${qs[1]} query heads are not a multiple of ${ks[1]} kv heads`);
    const a = (cq as TensorMeta).shape;
    const b = (ck as TensorMeta).shape;
    if (a.length !== 1 || b.length !== 1 || a[0] !== b[0] || a[0]! < 1) opError(op, `cu_seqlens_q ${formatShape(a)} and cu_seqlens_k ${formatShape(b)} must both be [B + 1]`);
    checkSinks(op, sinks, qs[1]!);
    return [meta(qs, dtype)];
  },
  viaOps: (ops, call) => {
    const [q, k, v, cq, ck, sinks] = call.inputs as (Tensor | null)[];
    if (sinks) return undefined;
    return [ops.varlenPrefillAttention(q!, k!, v!, cq!, ck!, call.attrs.scale, call.attrs.causal, call.attrs.sliding_window)];
  },
});

export const attentionFunctions = {
  scaledDotProductAttention: (query: Tensor, key: Tensor, value: Tensor, opts: SdpaAttrs & { attn_mask?: Tensor | null } = {}): Tensor => {
    const { attn_mask = null, ...attrs } = opts;
    return callOp1(OP, [query, key, value, attn_mask], attrs);
  },
  pagedDecodeAttention: (
    query: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, seq_lens: Tensor,
    opts: { scale: number; sliding_window?: number; v_head_dim?: number | null; sinks?: Tensor | null },
  ): Tensor => {
    const { sinks = null, ...attrs } = opts;
    return callOp1('paged_decode_attention', [query, k_cache, v_cache, block_tables, seq_lens, sinks], attrs);
  },
  varlenPrefillAttention: (q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, opts: { scale: number; causal?: boolean; sliding_window?: number; sinks?: Tensor | null }): Tensor => {
    const { sinks = null, ...attrs } = opts;
    return callOp1('varlen_prefill_attention', [q, k, v, cu_seqlens_q, cu_seqlens_k, sinks], attrs);
  },
};
