/**
 * The encoder runner (growth.md §3): a batch of variable-length token-id sequences -> forwards -> pooling per request
 * (CLS, mean, BGE-M3's dense / sparse / multi-vector heads, ColBERT's token vectors).
 *
 * Packed encoders (BGE-M3, ColBERTv2: vLLM / TEI run them so) get the production path: requests packed back to back
 * in arrival order under a token budget (max_num_batched_tokens; no padding, no sorting), one forward on [T] tokens
 * with per-sequence positions and cu_seqlens (attention through flash_attn_varlen), pooling per sequence from the
 * offsets. Padded encoders (diffusers' T5 / CLIP text encoders, whose production call pads) keep padded batches:
 * sorted by length so a batch pads little, each within the budget of B x longest tokens.
 */
import { F, Tensor, UserError, type ExecutionContext, type Module } from '@fastkernels/core';

/** An encoder run on packed tokens (BgeM3EmbeddingModel, ColBERTModel). */
export interface PackedEncoderModel extends Module {
  readonly hiddenSize: number;
  /** last_hidden_state [T, H] of ids [T] (i64), positions [T] (i64, 0.. per sequence), cu_seqlens [B + 1] (i32). */
  packedHidden(inputIds: Tensor, positions: Tensor, cuSeqlens: Tensor): Tensor;
  /** The model's dense embedding [B, H], normalised (BGE-M3: each sequence's CLS row). */
  dense?(hidden: Tensor, cuSeqlens: Tensor): Tensor;
  /** Per-token lexical weights [T] (BGE-M3's sparse head). */
  sparse?(hidden: Tensor): Tensor;
  /** Per-token ColBERT vectors [T, C] of which each sequence's first (CLS) row is not one (BGE-M3). */
  colbert?(hidden: Tensor): Tensor;
  /** Per-token vectors [T, D], zero rows for dropped tokens (ColBERT: pad and skiplist punctuation). */
  vectors?(hidden: Tensor, inputIds: Tensor): Tensor;
}

/** An encoder run on padded batches (T5EncoderModel, CLIPTextModel). */
export interface PaddedEncoderModel extends Module {
  readonly hiddenSize: number;
  /** last_hidden_state [B, S, H] of padded ids [B, S] (i64) and mask [B, S] (i64, 1 = token). */
  hidden(inputIds: Tensor, attentionMask: Tensor): Tensor;
}

export type EncoderModel = PackedEncoderModel | PaddedEncoderModel;

export function isPackedEncoder(m: Module): m is PackedEncoderModel {
  return typeof (m as Partial<PackedEncoderModel>).packedHidden === 'function';
}

export function isEncoderModel(m: Module): m is EncoderModel {
  return isPackedEncoder(m) || typeof (m as Partial<PaddedEncoderModel>).hidden === 'function';
}

/**
 * cls / mean: the CLS row or the mean of last_hidden_state over the sequence, L2-normalised; dense: the model's dense
 * head (BGE-M3: normalised CLS); sparse: per-token lexical weights; multi-vector: the ColBERT vectors.
 */
export type Pooling = 'cls' | 'mean' | 'dense' | 'sparse' | 'multi-vector';
export const POOLINGS: readonly Pooling[] = ['cls', 'mean', 'dense', 'sparse', 'multi-vector'];

export interface EmbedResult {
  /** One vector (cls, mean or dense pooling). */
  embedding?: number[];
  /** token id -> weight, the max over a token's occurrences, zero weights and `skipTokenIds` left out (FlagEmbedding). */
  sparse?: Record<string, number>;
  /** One vector per token: BGE-M3's after the first, ColBERT's kept tokens (multi-vector pooling). */
  multiVector?: number[][];
  /** Tokens the request had. */
  tokens: number;
}

export interface EncoderRunnerOptions {
  /** The filler of padded batches (padded encoders only). */
  readonly padTokenId: number;
  /** Tokens per forward (default 16384): packed, the sum of the lengths; padded, B x longest. vLLM's max_num_batched_tokens. */
  readonly maxNumBatchedTokens?: number;
  /** Sequences per forward (default 256, vLLM's max_num_seqs). */
  readonly maxNumSeqs?: number;
  /** The longest sequence the model takes (its positions). */
  readonly maxLength: number;
  /** Token ids sparse pooling leaves out (special tokens: cls, eos, pad, unk). */
  readonly skipTokenIds?: readonly number[];
}

export interface EncoderStats {
  batches: number;
  sequences: number;
  tokens: number;
  /** Tokens the forwards ran, padding included (= tokens on the packed path). */
  paddedTokens: number;
}

export class EncoderRunner {
  readonly stats: EncoderStats = { batches: 0, sequences: 0, tokens: 0, paddedTokens: 0 };
  readonly packed: boolean;
  constructor(
    readonly model: EncoderModel,
    readonly ctx: ExecutionContext,
    readonly options: EncoderRunnerOptions,
  ) {
    this.packed = isPackedEncoder(model);
  }

  /**
   * Group sequence indices into forwards. Packed: in arrival order, each batch's total within the token budget (a
   * sequence longer than the budget runs alone). Padded: longest first, B x longest within the budget.
   */
  plan(lengths: readonly number[]): number[][] {
    const maxTokens = this.options.maxNumBatchedTokens ?? 16384;
    const maxSeqs = this.options.maxNumSeqs ?? 256;
    const order = lengths.map((_, i) => i);
    if (!this.packed) order.sort((a, b) => lengths[b]! - lengths[a]! || a - b);
    const batches: number[][] = [];
    let cur: number[] = [];
    let tokens = 0;
    for (const i of order) {
      const n = lengths[i]!;
      // padded: sorted descending, so the batch's first sequence is its longest
      const next = this.packed ? tokens + n : (cur.length + 1) * (cur.length ? lengths[cur[0]!]! : n);
      if (cur.length && (cur.length + 1 > maxSeqs || next > maxTokens)) {
        batches.push(cur);
        cur = [];
        tokens = 0;
      }
      cur.push(i);
      tokens += n;
    }
    if (cur.length) batches.push(cur);
    return batches;
  }

  /** Embed every sequence with every pooling asked for; results in the input order. */
  embed(sequences: readonly (readonly number[])[], poolings: readonly Pooling[]): EmbedResult[] {
    for (const p of poolings) {
      if (!this.has(p)) throw new UserError(`this model has no ${p} output`, { fix: `use pooling ${POOLINGS.filter((q) => this.has(q)).join(', ')}` });
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

  private has(p: Pooling): boolean {
    if (p === 'cls' || p === 'mean') return true;
    if (!isPackedEncoder(this.model)) return false;
    const m = this.model;
    return p === 'dense' ? !!m.dense : p === 'sparse' ? !!m.sparse : !!(m.colbert || m.vectors);
  }

  private runBatch(seqs: readonly (readonly number[])[], poolings: readonly Pooling[]): EmbedResult[] {
    const owned: Tensor[] = [];
    const dev = { device: this.ctx.device };
    const tensor = (v: readonly number[], shape: number[], dtype: 'i64' | 'i32' | 'f32') => {
      const t = Tensor.fromArray(this.ctx.backend, v, shape, dtype, dev);
      owned.push(t);
      return t;
    };
    const B = seqs.length;
    const tokens = seqs.reduce((a, s) => a + s.length, 0);
    try {
      const results: EmbedResult[] = seqs.map((s) => ({ tokens: s.length }));
      const setEmbedding = (t: Tensor) => {
        const H = t.shape[1]!;
        const v = t.toFloat64Array();
        results.forEach((r, b) => (r.embedding = Array.from(v.subarray(b * H, (b + 1) * H))));
      };
      let ran: number;
      if (isPackedEncoder(this.model)) {
        const m = this.model;
        const cu = [0];
        for (const s of seqs) cu.push(cu[cu.length - 1]! + s.length);
        const idsT = tensor(seqs.flat(), [tokens], 'i64');
        const cuT = tensor(cu, [B + 1], 'i32');
        const h = m.packedHidden(idsT, tensor(seqs.flatMap((s) => s.map((_, j) => j)), [tokens], 'i64'), cuT);
        owned.push(h);
        ran = tokens;
        if (poolings.includes('cls') || poolings.includes('mean')) {
          const pooled = poolings.includes('cls') ? this.packedCls(h, cuT, owned) : this.packedMean(h, seqs, tensor, owned);
          const n = F.normalize(pooled, { dim: -1 });
          owned.push(n);
          setEmbedding(n);
        }
        if (poolings.includes('dense')) {
          const d = m.dense!(h, cuT);
          owned.push(d);
          setEmbedding(d);
        }
        if (poolings.includes('sparse')) this.readSparse(m.sparse!(h), seqs, cu, results, owned);
        if (poolings.includes('multi-vector')) this.readVectors(m, h, idsT, seqs, cu, results, owned);
      } else {
        const S = Math.max(...seqs.map((s) => s.length));
        const ids: number[] = [];
        const mask: number[] = [];
        for (const s of seqs) for (let j = 0; j < S; j++) (ids.push(j < s.length ? s[j]! : this.options.padTokenId), mask.push(j < s.length ? 1 : 0));
        const maskT = tensor(mask, [B, S], 'i64');
        const h = this.model.hidden(tensor(ids, [B, S], 'i64'), maskT);
        owned.push(h);
        ran = B * S;
        const pooled = poolings.includes('cls') ? h.select(1, 0) : this.paddedMean(h, maskT, owned);
        owned.push(pooled);
        const n = F.normalize(pooled, { dim: -1 });
        owned.push(n);
        setEmbedding(n);
      }
      this.stats.batches++;
      this.stats.sequences += B;
      this.stats.tokens += tokens;
      this.stats.paddedTokens += ran;
      return results;
    } finally {
      for (const t of owned) t.dispose();
    }
  }

  /** Each sequence's first row [B, H] (vLLM's CLSPool: the rows at cu_seqlens[:-1]). */
  private packedCls(h: Tensor, cu: Tensor, owned: Tensor[]): Tensor {
    const starts = cu.narrow(0, 0, cu.shape[0]! - 1);
    const cls = F.indexSelect(h, 0, starts);
    owned.push(starts, cls);
    return cls;
  }

  /** The per-sequence mean [B, H] in f32: each token's row added into its sequence's (scatter_add), / length. */
  private packedMean(h: Tensor, seqs: readonly (readonly number[])[], tensor: (v: readonly number[], s: number[], d: 'i64' | 'i32' | 'f32') => Tensor, owned: Tensor[]): Tensor {
    const [T, H] = h.shape as [number, number];
    const seg = tensor(seqs.flatMap((s, b) => s.map(() => b)), [T, 1], 'i64');
    const index = seg.expand(T, H);
    const hf = F.to(h, 'f32');
    const zeros = Tensor.zeros(this.ctx.backend, [seqs.length, H], 'f32', { device: this.ctx.device });
    const sum = F.scatterAdd(zeros, 0, index, hf);
    const mean = F.div(sum, tensor(seqs.map((s) => s.length), [seqs.length, 1], 'f32'));
    owned.push(index, hf, zeros, sum, mean);
    return mean;
  }

  /** sum(h * mask) / count over the sequence dim of a padded batch: [B, H]. */
  private paddedMean(h: Tensor, mask: Tensor, owned: Tensor[]): Tensor {
    const m = F.to(mask, h.dtype);
    const mu = m.unsqueeze(2);
    const prod = F.mul(h, mu);
    const sum = F.sum(prod, { dim: 1 });
    const count = F.sum(m, { dim: 1, keepdim: true });
    owned.push(m, mu, prod, sum, count);
    return F.div(sum, count);
  }

  /** FlagEmbedding's lexical weights: per sequence, token id -> its largest positive weight, special ids left out. */
  private readSparse(w: Tensor, seqs: readonly (readonly number[])[], cu: readonly number[], results: EmbedResult[], owned: Tensor[]): void {
    owned.push(w);
    const v = w.toFloat64Array();
    const skip = new Set(this.options.skipTokenIds ?? []);
    results.forEach((r, b) => {
      const d: Record<string, number> = {};
      seqs[b]!.forEach((id, j) => {
        const x = v[cu[b]! + j]!;
        if (x > 0 && !skip.has(id) && x > (d[id] ?? 0)) d[id] = x;
      });
      r.sparse = d;
    });
  }

  /**
   * Multi-vector pooling: BGE-M3's ColBERT rows after each sequence's first (vLLM's BOS filter, FlagEmbedding's
   * h[:, 1:]), or ColBERT's kept tokens (ColBERT.doc(keep_dims=False): dropped tokens are zero rows).
   */
  private readVectors(m: PackedEncoderModel, h: Tensor, idsT: Tensor, seqs: readonly (readonly number[])[], cu: readonly number[], results: EmbedResult[], owned: Tensor[]): void {
    const bge = !!m.colbert;
    const t = bge ? m.colbert!(h) : m.vectors!(h, idsT);
    owned.push(t);
    const D = t.shape[1]!;
    const x = t.toFloat64Array();
    results.forEach((r, b) => {
      const rows: number[][] = [];
      for (let j = bge ? 1 : 0; j < seqs[b]!.length; j++) {
        const row = x.subarray((cu[b]! + j) * D, (cu[b]! + j + 1) * D);
        if (bge || row.some((e) => e !== 0)) rows.push(Array.from(row));
      }
      r.multiVector = rows;
    });
  }
}
