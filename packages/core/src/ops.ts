import type { DType } from './dtype.js';
import type { Tensor } from './tensor.js';

/**
 * The op surface modules call. Every backend implements all of it; ops return new
 * tensors on the inputs' backend unless their name ends in an underscore (in place).
 * Inputs may be non-contiguous; outputs are contiguous.
 * Accumulation is at least float32 (the CPU reference accumulates in float64).
 */
export interface Ops {
  // --- elementwise and data movement -------------------------------------------------------
  /** dst[i] = value for every element of the (possibly strided) view. */
  fill(dst: Tensor, value: number): void;
  /** Strided copy with dtype conversion; shapes must match. */
  copy(dst: Tensor, src: Tensor): void;
  /** a + b with broadcasting of size-1 dims; result in a's dtype. */
  add(a: Tensor, b: Tensor): Tensor;
  /** a * b with broadcasting of size-1 dims; result in a's dtype. */
  mul(a: Tensor, b: Tensor): Tensor;
  /** Batched matrix product: a [..., M, K] x b [..., K, N] -> [..., M, N] (batch dims broadcast). */
  matmul(a: Tensor, b: Tensor, options?: { outDType?: DType }): Tensor;

  // --- L1 decoder-LLM spine -----------------------------------------------------------------
  /** y = x / sqrt(mean(x^2) + eps) * weight over the last dim. */
  rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor;
  /** residual' = x + residual; y = rmsNorm(residual'); returns [y, residual'] (vLLM fused_add_rms_norm). */
  fusedAddRmsNorm(x: Tensor, residual: Tensor, weight: Tensor, eps: number): [Tensor, Tensor];
  /** x [..., 2d] -> silu(x[..., :d]) * x[..., d:]. */
  siluAndMul(x: Tensor): Tensor;
  /** x [..., 2d] -> gelu(x[..., :d]) * x[..., d:], exact erf or tanh approximation. */
  geluAndMul(x: Tensor, approximate: 'none' | 'tanh'): Tensor;
  /**
   * Rotary embedding as vLLM's RotaryEmbedding.forward_native: positions [T] (int), query [T, nq*head],
   * key [T, nk*head] or null, cosSinCache [maxPos, rotaryDim] (cos | sin halves). Returns new [query, key].
   */
  rotaryEmbedding(positions: Tensor, query: Tensor, key: Tensor | null, cosSinCache: Tensor, headSize: number, isNeoxStyle: boolean): [Tensor, Tensor | null];
  /** weight [V, H] gathered at ids [...] -> [..., H]. */
  embedding(ids: Tensor, weight: Tensor): Tensor;
  /**
   * A vocabulary shard's gather (vLLM's VocabParallelEmbedding at tp_size > 1, before its all-reduce): weight
   * [Vlocal, H] holds the rows [start, start + Vlocal) of the full table; ids [...] in that range get
   * weight[id - start], every other id a zero row (never an error: those ids belong to another rank's shard).
   */
  embeddingMasked(ids: Tensor, weight: Tensor, start: number): Tensor;
  /** y = x W^T + b: x [..., K], weight [N, K], bias [N] or null -> [..., N]. */
  linear(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor;
  /**
   * Optional fusion: exactly siluAndMul(linear(x, weight, bias)) for weight [2d, K] (a gated MLP's merged gate | up
   * projection) -> [..., d]. A backend may return null to decline (then the caller runs the two ops); it never
   * changes the result.
   */
  linearSiluAndMul?(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor | null;
  /**
   * Optional fusion: a pre-norm projection, exactly
   * `const [h, r] = residual ? fusedAddRmsNorm(x, residual, normWeight, eps) : [rmsNorm(x, normWeight, eps), null]`
   * then `linear(h, weight, bias)`, or with act 'silu' `linearSiluAndMul`'s result: returns [y, r] (r, the new residual
   * x + residual, is null without a residual). A backend may return null to decline (nothing was computed; the caller
   * runs the ops); it never changes the result.
   */
  rmsNormLinear?(
    x: Tensor, residual: Tensor | null, normWeight: Tensor, eps: number, weight: Tensor, bias: Tensor | null, act: 'silu' | null,
  ): [Tensor, Tensor | null] | null;
  /** Softmax over one dim, accumulated in float32 or wider; result in x's dtype. */
  softmax(x: Tensor, dim: number): Tensor;
  /**
   * Paged KV-cache write (vLLM reshape_and_cache_flash): key/value [T, nKv, head] into
   * kCache/vCache [numBlocks, blockSize, nKv, head] at slotMapping [T] (slot = block * blockSize + offset; -1 skips).
   * A latent cache (MLA: one tensor whose rows are keys and values) is one tensor given as both caches with one tensor
   * as key and value: each row is written once (one cache with two different sources is an error).
   */
  storeKvcache_(key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): void;
  /**
   * Optional: exactly `const [q, k] = rotaryEmbedding(positions, query, key, cosSinCache, headSize, isNeoxStyle)` followed by
   * `storeKvcache_(k viewed as [T, nKv, headSize], value, kCache, vCache, slotMapping)`, in one step (the CUDA backend: one
   * launch instead of two). Returns [q, k] as rotaryEmbedding would. A backend may return null to decline (a switch is
   * off, a layout it does not fuse): nothing was written, and the caller runs the two ops itself.
   */
  rotaryStoreKvcache?(
    positions: Tensor, query: Tensor, key: Tensor, value: Tensor, cosSinCache: Tensor, headSize: number, isNeoxStyle: boolean,
    kCache: Tensor, vCache: Tensor, slotMapping: Tensor,
  ): [Tensor, Tensor] | null;
  /**
   * Decode attention over a paged cache: query [B, nQ, head]; caches as above; blockTables [B, maxBlocks] (i32);
   * seqLens [B] (i32). GQA when nQ > nKv. slidingWindow 0 = none. Returns [B, nQ, head].
   */
  pagedDecodeAttention(query: Tensor, kCache: Tensor, vCache: Tensor, blockTables: Tensor, seqLens: Tensor, scale: number, slidingWindow: number): Tensor;
  /**
   * Variable-length prefill attention (flash_attn_varlen_func): q [Tq, nQ, head], k/v [Tk, nKv, head],
   * cuSeqlensQ/K [B+1] (i32). Causal masks align the ends of q and k (bottom-right). Returns [Tq, nQ, head].
   */
  varlenPrefillAttention(q: Tensor, k: Tensor, v: Tensor, cuSeqlensQ: Tensor, cuSeqlensK: Tensor, scale: number, causal: boolean, slidingWindow: number): Tensor;
  /**
   * Sample one token per row of logits [B, V] (f32). temperature [B] (0 = greedy), topK [B] (i32, <=0 = off),
   * topP [B] (f32, 1 = off), seeds [B] (i64). Returns ids [B] (i64). Every backend runs these exact steps,
   * so all draw the same tokens (float32 implementations may differ only at exact near-ties). Per row b:
   *  1. T == 0: argmax of the logits (NaN ignored; ties -> lowest index). Done.
   *  2. s_i = logits[b, i] / T.
   *  3. top-k, 0 < k < V: keep i iff s_i >= the k-th largest s (ties at the threshold all kept).
   *  4. top-p, p < 1: q = softmax(s) over the kept set; order kept tokens by q descending (ties: lower index
   *     first); keep the shortest prefix whose running sum reaches >= p (at least one token).
   *  5. pi = softmax(s) over the final kept set, max-subtracted.
   *  6. Exponential race: E_i = -ln(counterUniform(seed_b, 0, i)) (row 0 whatever b: a request draws the same tokens in any batch slot); return argmax over kept i of pi_i / E_i
   *     (ties -> lowest index). A row whose kept logits are all -inf or NaN falls back to step 1.
   * `hint`: optional host knowledge of the batch (see SampleHint); it may only choose how a backend runs these
   * steps, never which tokens come out. Without it every backend behaves as before.
   */
  sample(logits: Tensor, temperature: Tensor, topK: Tensor, topP: Tensor, seeds: Tensor, hint?: SampleHint): Tensor;
  /**
   * Optional: the name of the launch path `sample` takes for a [B, V] call with this hint (backends with more than one;
   * absent = one path). A CUDA-graph decode captures the sampler once per distinct path of its batch size and replays
   * the variant the step's hint picks, so the per-call choice survives graph capture.
   */
  samplePath?(B: number, V: number, hint?: SampleHint): string;
}

/**
 * Host knowledge about a sample call that the device tensors only reveal after a sync (vLLM's SamplingMetadata
 * all_greedy / all_random): the caller built the temperature tensor from host numbers, so it knows how many rows
 * draw. Backends may use it to pick a launch strategy (the CUDA sampler: one CTA per row vs split rows); the
 * tokens never depend on it. A wrong hint may cost speed, not correctness. Backends that need no hint ignore it.
 */
export interface SampleHint {
  /** rows whose temperature > 0 (they draw); the rest are greedy */
  readonly sampledRows?: number;
}
