/**
 * How a recurrent layer runs one engine step over its state pools (docs/recurrent-state.md), the part GLA, Qwen3-Next's
 * gated DeltaNet and Kimi's KDA share: the step packs its tokens as [1, T, ...], the prefills first, then one token per
 * decoding sequence. The prefills go through one varlen call (cu_seqlens), the decodes as Dn rows of one token; each
 * call reads and updates its sequences' pool rows in place through the step's state indices (prefills first, then
 * decodes; -1 rows are padding). Every intermediate goes to the caller's `t` (disposed when its forward ends).
 */
import { F, type Tensor } from '@fastkernels/core';
import type { AttentionMetadata } from '../../engine/forward-context.js';
import type { layerStateCache } from '../../engine/forward-context.js';
import type { CausalConv1d } from '../../tasks/L1/recurrent/causal_conv1d.js';
import type { DeltaRuleModule } from '../../tasks/L1/recurrent/delta-rule-common.js';

export type LayerStatePool = NonNullable<ReturnType<typeof layerStateCache>>;
type Track = (x: Tensor) => Tensor;

/** One step's split: P prefills of Tp tokens in all, then Dn decodes, with each part's state indices (null if empty). */
export interface PooledStep {
  readonly metadata: AttentionMetadata;
  readonly numPrefills: number;
  readonly numPrefillTokens: number;
  readonly numDecodes: number;
  readonly prefillIndices: Tensor | null;
  readonly decodeIndices: Tensor | null;
}

/** The step's split for a layer whose input `packed` is [1, T, ...]; throws (naming the layer) when it is not the step. */
export function pooledStep(pool: LayerStatePool, packed: Tensor, layer: string, t: Track): PooledStep {
  const { metadata: md, stateIndices } = pool;
  const [P, Tp, Dn] = [md.numPrefills, md.numPrefillTokens, md.numDecodes];
  if (packed.shape[0] !== 1 || Tp + Dn !== packed.shape[1]) throw new Error(`${layer}: the engine packs a step as [1, ${Tp + Dn}, ...], got ${JSON.stringify(packed.shape)}`);
  return {
    metadata: md,
    numPrefills: P,
    numPrefillTokens: Tp,
    numDecodes: Dn,
    prefillIndices: P ? t(stateIndices.narrow(0, 0, P)) : null,
    decodeIndices: Dn ? t(stateIndices.narrow(0, P, Dn)) : null,
  };
}

/**
 * A short causal conv (silu) over its state pool: y [1, T, C] -> [1, T, C]. The prefills as one varlen call over a
 * [1, C, Tp] (transposed) view, the decodes as Dn rows [Dn, C, 1].
 */
export function pooledShortConv(conv: CausalConv1d, y: Tensor, weight: Tensor, convPool: Tensor, s: PooledStep, t: Track): Tensor {
  const C = y.shape[2]!;
  const { numPrefillTokens: Tp, numDecodes: Dn } = s;
  const parts: Tensor[] = [];
  if (s.numPrefills) {
    const [yp] = conv.forward(t(t(y.narrow(1, 0, Tp)).transpose(1, 2)), weight, convPool, s.metadata.cuSeqlensQ, s.prefillIndices) as [Tensor];
    parts.push(t(t(t(yp).transpose(1, 2)).contiguous()));
  }
  if (Dn) {
    const [yd] = conv.forward(t(t(y.narrow(1, Tp, Dn)).reshape([Dn, C, 1])), weight, convPool, null, s.decodeIndices) as [Tensor];
    parts.push(t(t(yd).view([1, Dn, C])));
  }
  return parts.length === 1 ? parts[0]! : t(F.cat(parts, 1));
}

/** The recurrence's two kernels over the pool: each returns its output o (the pool is updated in place). */
export interface PooledKernels {
  /** xs: the inputs' prefill tokens [1, Tp, ...]; o [1, Tp, H, V]. */
  prefill(xs: Tensor[], cuSeqlens: Tensor | null, indices: Tensor): Tensor;
  /** xs: the inputs' decode tokens as rows [Dn, 1, ...]; o [Dn, 1, H, V]. */
  decode(xs: Tensor[], indices: Tensor): Tensor;
}

/** The recurrence over the pool: inputs [1, T, H, ...] (q, k, v, gates) -> o [1, T, H, V], prefills then decodes. */
export function pooledRecurrence(inputs: readonly Tensor[], kernels: PooledKernels, s: PooledStep, t: Track): Tensor {
  const { numPrefillTokens: Tp, numDecodes: Dn } = s;
  const parts: Tensor[] = [];
  if (s.numPrefills) parts.push(t(kernels.prefill(inputs.map((x) => t(x.narrow(1, 0, Tp))), s.metadata.cuSeqlensQ, s.prefillIndices!)));
  if (Dn) {
    const o = t(kernels.decode(inputs.map((x) => t(t(x.narrow(1, Tp, Dn)).reshape([Dn, 1, ...x.shape.slice(2)]))), s.decodeIndices!));
    parts.push(t(o.view([1, Dn, ...o.shape.slice(2)])));
  }
  return parts.length === 1 ? parts[0]! : t(F.cat(parts, 1));
}

/** A delta rule's kernels (gated delta rule or KDA; inputs q, k, v, g, beta): chunked prefills, recurrent decodes. */
export function deltaRuleKernels(chunk: DeltaRuleModule, recurrent: DeltaRuleModule, recurrentPool: Tensor): PooledKernels {
  return {
    prefill: ([q, k, v, g, beta], cuSeqlens, indices) => chunk.forward(q!, k!, v!, g!, beta!, recurrentPool, cuSeqlens, indices)[0]!,
    decode: ([q, k, v, g, beta], indices) => recurrent.forward(q!, k!, v!, g!, beta!, recurrentPool, null, indices)[0]!,
  };
}

/** Whole-pool views, the layer's state outputs on the engine (the caller owns them). */
export function poolViews(pools: readonly Tensor[]): Tensor[] {
  return pools.map((p) => p.narrow(0, 0, p.shape[0]!));
}
