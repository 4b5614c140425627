/**
 * The encoder runner (growth.md §3): a batch of variable-length token-id sequences -> padded batches under a token
 * budget (sequences sorted by length so a batch pads little) -> one forward each -> pooling per request (CLS, mean,
 * BGE-M3's dense / sparse / multi-vector heads). The padded form is what runs on every backend today (SDPA with a
 * padding mask); a packed varlen path (cu_seqlens, no padding) is the GPU follow-up (issue 35).
 */
import { F, Tensor, UserError, type ExecutionContext, type Module } from '@fastkernels/core';

/** What the runner needs of an encoder model (BgeM3EmbeddingModel is one). */
export interface EncoderModel extends Module {
  readonly hiddenSize: number;
  /** last_hidden_state [B, S, H] of padded ids [B, S] (i64) and mask [B, S] (i64, 1 = token). */
  hidden(inputIds: Tensor, attentionMask: Tensor): Tensor;
  /** The model's own embedding heads, when it has them (BGE-M3): colbert [B, S - 1, C] has no CLS row. */
  heads?(hidden: Tensor, attentionMask: Tensor): { dense: Tensor; sparse: Tensor; colbert: Tensor };
  /** Per-token vectors [B, S, D], zero rows for dropped tokens (ColBERT: pads and skiplist punctuation). */
  vectors?(hidden: Tensor, inputIds: Tensor, attentionMask: Tensor): Tensor;
}

export function isEncoderModel(m: Module): m is EncoderModel {
  return typeof (m as Partial<EncoderModel>).hidden === 'function';
}

/**
 * cls / mean: the CLS row or the masked mean of last_hidden_state, L2-normalised; dense: the model's dense head
 * (BGE-M3: normalised CLS); sparse: per-token lexical weights; multi-vector: the ColBERT vectors (one per token after CLS).
 */
export type Pooling = 'cls' | 'mean' | 'dense' | 'sparse' | 'multi-vector';
export const POOLINGS: readonly Pooling[] = ['cls', 'mean', 'dense', 'sparse', 'multi-vector'];

export interface EmbedResult {
  /** One vector (cls, mean or dense pooling). */
  embedding?: number[];
  /** token id -> weight, the max over a token's occurrences, zero weights and `skipTokenIds` left out (FlagEmbedding). */
  sparse?: Record<string, number>;
  /** One vector per token after the first (multi-vector pooling). */
  multiVector?: number[][];
  /** Tokens the request had. */
  tokens: number;
}

export interface EncoderRunnerOptions {
  readonly padTokenId: number;
  /** Padded tokens (B x longest) per forward (default 16384). */
  readonly maxBatchTokens?: number;
  /** Sequences per forward (default 64). */
  readonly maxBatchSize?: number;
  /** The longest sequence the model takes (its positions). */
  readonly maxLength: number;
  /** Token ids sparse pooling leaves out (special tokens: cls, eos, pad, unk). */
  readonly skipTokenIds?: readonly number[];
}

export interface EncoderStats {
  batches: number;
  sequences: number;
  tokens: number;
  paddedTokens: number;
}

export class EncoderRunner {
  readonly stats: EncoderStats = { batches: 0, sequences: 0, tokens: 0, paddedTokens: 0 };
  constructor(
    readonly model: EncoderModel,
    readonly ctx: ExecutionContext,
    readonly options: EncoderRunnerOptions,
  ) {}

  /** Group sequence indices into batches: longest first, each within the token budget and the batch size. */
  plan(lengths: readonly number[]): number[][] {
    const maxTokens = this.options.maxBatchTokens ?? 16384;
    const maxSeqs = this.options.maxBatchSize ?? 64;
    const order = lengths.map((_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
    const batches: number[][] = [];
    let cur: number[] = [];
    for (const i of order) {
      // sorted descending: the batch's first sequence is its longest
      const longest = cur.length ? lengths[cur[0]!]! : lengths[i]!;
      if (cur.length && (cur.length + 1 > maxSeqs || (cur.length + 1) * longest > maxTokens)) {
        batches.push(cur);
        cur = [];
      }
      cur.push(i);
    }
    if (cur.length) batches.push(cur);
    return batches;
  }

  /** Embed every sequence with every pooling asked for; results in the input order. */
  embed(sequences: readonly (readonly number[])[], poolings: readonly Pooling[]): EmbedResult[] {
    for (const p of poolings) {
      const has = p === 'cls' || p === 'mean' || (p === 'multi-vector' ? !!(this.model.heads || this.model.vectors) : !!this.model.heads);
      if (!has) throw new UserError(`this model has no ${p} output`, { fix: this.model.vectors ? 'use pooling multi-vector, cls or mean' : 'use pooling cls or mean' });
    }
    sequences.forEach((s, i) => {
      if (s.length === 0) throw new UserError(`input ${i} is empty: an embedding needs at least one token`);
      if (s.length > this.options.maxLength) throw new UserError(`input ${i} has ${s.length} tokens; the model takes at most ${this.options.maxLength}`);
    });
    const results: EmbedResult[] = new Array(sequences.length);
    for (const batch of this.plan(sequences.map((s) => s.length))) {
      const seqs = batch.map((i) => sequences[i]!);
      const out = this.runBatch(seqs, poolings);
      batch.forEach((i, k) => (results[i] = out[k]!));
    }
    return results;
  }

  private runBatch(seqs: readonly (readonly number[])[], poolings: readonly Pooling[]): EmbedResult[] {
    const B = seqs.length;
    const S = Math.max(...seqs.map((s) => s.length));
    const ids: number[] = [];
    const mask: number[] = [];
    for (const s of seqs) for (let j = 0; j < S; j++) (ids.push(j < s.length ? s[j]! : this.options.padTokenId), mask.push(j < s.length ? 1 : 0));
    const dev = { device: this.ctx.device };
    const idsT = Tensor.fromArray(this.ctx.backend, ids, [B, S], 'i64', dev);
    const maskT = Tensor.fromArray(this.ctx.backend, mask, [B, S], 'i64', dev);
    const owned: Tensor[] = [idsT, maskT];
    try {
      const h = this.model.hidden(idsT, maskT);
      owned.push(h);
      const H = h.shape[2]!;
      const results: EmbedResult[] = seqs.map((s) => ({ tokens: s.length }));
      if (poolings.includes('cls') || poolings.includes('mean')) {
        const pooled = poolings.includes('cls') ? h.select(1, 0) : this.maskedMean(h, maskT, owned);
        owned.push(pooled);
        const n = F.normalize(pooled, { dim: -1 });
        owned.push(n);
        const v = n.toFloat64Array();
        results.forEach((r, b) => (r.embedding = Array.from(v.subarray(b * H, (b + 1) * H))));
      }
      if (this.model.heads && poolings.some((p) => p === 'dense' || p === 'sparse' || p === 'multi-vector')) {
        const o = this.model.heads(h, maskT);
        owned.push(o.dense, o.sparse, o.colbert);
        if (poolings.includes('dense')) {
          const v = o.dense.toFloat64Array();
          results.forEach((r, b) => (r.embedding = Array.from(v.subarray(b * H, (b + 1) * H))));
        }
        if (poolings.includes('sparse')) {
          const w = o.sparse.toFloat64Array();
          const skip = new Set(this.options.skipTokenIds ?? []);
          results.forEach((r, b) => {
            const d: Record<string, number> = {};
            seqs[b]!.forEach((id, j) => {
              const x = w[b * S + j]!;
              if (x > 0 && !skip.has(id) && x > (d[id] ?? 0)) d[id] = x;
            });
            r.sparse = d;
          });
        }
        if (poolings.includes('multi-vector')) {
          const C = o.colbert.shape[2]!;
          const v = o.colbert.toFloat64Array();
          results.forEach((r, b) => {
            const n = seqs[b]!.length - 1;
            r.multiVector = Array.from({ length: n }, (_, j) => Array.from(v.subarray((b * (S - 1) + j) * C, (b * (S - 1) + j + 1) * C)));
          });
        }
      }
      if (!this.model.heads && this.model.vectors && poolings.includes('multi-vector')) {
        const v = this.model.vectors(h, idsT, maskT);
        owned.push(v);
        const D = v.shape[2]!;
        const x = v.toFloat64Array();
        results.forEach((r, b) => {
          // the kept tokens' vectors (ColBERT.doc(keep_dims=False)): dropped tokens are zero rows
          const rows: number[][] = [];
          for (let j = 0; j < seqs[b]!.length; j++) {
            const row = x.subarray((b * S + j) * D, (b * S + j + 1) * D);
            if (row.some((e) => e !== 0)) rows.push(Array.from(row));
          }
          r.multiVector = rows;
        });
      }
      this.stats.batches++;
      this.stats.sequences += B;
      this.stats.tokens += seqs.reduce((a, s) => a + s.length, 0);
      this.stats.paddedTokens += B * S;
      return results;
    } finally {
      for (const t of owned) t.dispose();
    }
  }

  /** sum(h * mask) / count over the sequence dim: [B, H]. */
  private maskedMean(h: Tensor, mask: Tensor, owned: Tensor[]): Tensor {
    const m = F.to(mask, h.dtype);
    const mu = m.unsqueeze(2);
    const prod = F.mul(h, mu);
    const sum = F.sum(prod, { dim: 1 });
    const count = F.sum(m, { dim: 1, keepdim: true });
    owned.push(m, mu, prod, sum, count);
    return F.div(sum, count);
  }
}
