/**
 * The attention group: dense scaled_dot_product_attention with PyTorch's F.scaled_dot_product_attention semantics
 * (bool or additive attn_mask broadcast to [..., L, S], top-left causal, scale, enable_gqa), for inference.
 * (The Llama path's paged decode and varlen prefill stay on the Ops surface.)
 */
import { z } from 'zod';
import { DTYPE_INFO } from '../dtype.js';
import { formatShape } from '../shape.js';
import type { Tensor } from '../tensor.js';
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
});

export const attentionFunctions = {
  scaledDotProductAttention: (query: Tensor, key: Tensor, value: Tensor, opts: SdpaAttrs & { attn_mask?: Tensor | null } = {}): Tensor => {
    const { attn_mask = null, ...attrs } = opts;
    return callOp1(OP, [query, key, value, attn_mask], attrs);
  },
};
