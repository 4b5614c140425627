import { DTYPE_INFO, F, Module, OpScope, Tensor, defineTask, hostArray, type HostArray, type TaskCase } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import type { Embedding } from '../../../layers/embedding.js';
import { createLayer } from '../../../layers/registry.js';
import type { DenseAttention } from '../../../tasks/L1/attention/dense_attention.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { attention, linear, param } from '../host-math.js';
import { T5_XXL, tinyT5Config, type T5Config } from '../t5-config.js';

/**
 * HF's T5 relative position bucket (_relative_position_bucket): bidirectional halves the buckets by sign; offsets below
 * num_buckets / 4 (half of a side) get their own bucket, larger ones share log-spaced buckets up to max_distance.
 */
export function relativePositionBucket(relativePosition: number, bidirectional: boolean, numBuckets: number, maxDistance: number): number {
  let buckets = 0;
  let n = numBuckets;
  let rp = relativePosition;
  if (bidirectional) {
    n = Math.floor(n / 2);
    if (rp > 0) buckets += n;
    rp = Math.abs(rp);
  } else {
    rp = -Math.min(rp, 0);
  }
  const maxExact = Math.floor(n / 2);
  if (rp < maxExact) return buckets + rp;
  // torch computes the log in float32 and truncates toward zero with .to(long)
  const large = maxExact + Math.trunc(Math.fround(Math.fround(Math.log(Math.fround(rp / maxExact)) / Math.log(maxDistance / maxExact)) * (n - maxExact)));
  return buckets + Math.min(large, n - 1);
}

/** The bucket of every (query i, key j) pair of an encoder of length S: [S, S] row-major, relative position j - i. */
export function bucketMatrix(S: number, numBuckets: number, maxDistance: number): number[] {
  const out: number[] = new Array(S * S);
  for (let i = 0; i < S; i++) for (let j = 0; j < S; j++) out[i * S + j] = relativePositionBucket(j - i, true, numBuckets, maxDistance);
  return out;
}

/**
 * HF's T5Attention as the encoder runs it (vllm-omni's T5SelfAttention): q, k, v, o without bias, no 1/sqrt(d) scale,
 * scores plus the position bias. The layer that has_relative_attention_bias (the first) computes the bias
 * relative_attention_bias(bucket(j - i)) [1, H, S, S] and adds the padding mask (-inf at pad keys) -> [B, H, S, S];
 * later layers get that tensor back as positionBias (HF passes it down the stack). SDPA (L1/dense_attention, scale 1)
 * with the bias as its additive mask. forward(hiddenStates [B, S, D], mask [B, S] bool | null, positionBias | null) ->
 * [out [B, S, D], positionBias].
 */
export class T5SelfAttention extends Module {
  readonly q: Linear;
  readonly k: Linear;
  readonly v: Linear;
  readonly o: Linear;
  readonly relativeAttentionBias: Embedding | null;
  readonly attn: DenseAttention;
  readonly innerDim: number;
  constructor(
    readonly config: T5Config,
    readonly hasRelativeAttentionBias = false,
  ) {
    super();
    const c = config;
    this.innerDim = c.numHeads * c.dKv;
    this.q = this.createModule('q', 'L1/linear', c.dModel, this.innerDim, false);
    this.k = this.createModule('k', 'L1/linear', c.dModel, this.innerDim, false);
    this.v = this.createModule('v', 'L1/linear', c.dModel, this.innerDim, false);
    this.o = this.createModule('o', 'L1/linear', this.innerDim, c.dModel, false);
    this.relativeAttentionBias = hasRelativeAttentionBias ? this.registerModule('relative_attention_bias', createLayer('Embedding', c.relativeAttentionNumBuckets, c.numHeads)) : null;
    this.attn = this.createModule('attn', 'L1/dense_attention', false, 1);
  }

  /** [1, H, S, S] relative bias (zeros without the table), plus -inf at masked keys -> [B, H, S, S]. */
  computeBias(B: number, S: number, mask: Tensor | null, dtype: Tensor['dtype'], ref: Tensor): Tensor {
    const s = new OpScope();
    const H = this.config.numHeads;
    let bias: Tensor;
    if (this.relativeAttentionBias) {
      const buckets = s.own(Tensor.fromArray(ref.backend, bucketMatrix(S, this.config.relativeAttentionNumBuckets, this.config.relativeAttentionMaxDistance), [S, S], 'i64', { device: ref.device }));
      const values = s.own(this.relativeAttentionBias.forward(buckets));
      bias = s.own(s.op('contiguous', [s.own(values.permute(2, 0, 1))]).view(1, H, S, S));
    } else {
      bias = s.own(Tensor.zeros(ref.backend, [1, H, S, S], dtype, { device: ref.device }));
    }
    if (mask) bias = s.op('add', [bias, s.op('where', [s.own(mask.view(B, 1, 1, S)), 0, -Infinity])]);
    return s.keep([s.op('to', [bias], { dtype })])[0];
  }

  forward(hiddenStates: Tensor, mask: Tensor | null = null, positionBias: Tensor | null = null): Tensor[] {
    const s = new OpScope();
    try {
      const [B, S] = hiddenStates.shape as [number, number];
      const bias = positionBias ?? this.computeBias(B, S, mask, hiddenStates.dtype, hiddenStates);
      const heads = (m: Linear) => s.op('contiguous', [s.own(s.own(s.own(m.forward(hiddenStates)).view(B, S, this.config.numHeads, this.config.dKv)).permute(0, 2, 1, 3))]);
      const ctx = s.own(this.attn.forward(heads(this.q), heads(this.k), heads(this.v), bias));
      const merged = s.own(s.op('contiguous', [s.own(ctx.permute(0, 2, 1, 3))]).view(B, S, this.innerDim));
      const out = this.o.forward(merged);
      s.keep([]);
      return [out, bias];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** Golden float64 T5 self-attention of x [B, S, D] with a 0/1 mask [B, S] (or null); returns [out, bias [Bb, H, S, S]]. */
export function t5AttentionReference(x: HostArray, mask: HostArray | null, params: ReadonlyMap<string, HostArray>, c: T5Config, hasBias: boolean): HostArray[] {
  const [B, S] = x.shape as [number, number];
  const H = c.numHeads;
  const q = linear(x.data, B * S, param(params, 'q.weight'));
  const k = linear(x.data, B * S, param(params, 'k.weight'));
  const v = linear(x.data, B * S, param(params, 'v.weight'));
  const table = hasBias ? param(params, 'relative_attention_bias.weight') : null;
  const rel = (h: number, i: number, j: number) => (table ? table.data[relativePositionBucket(j - i, true, c.relativeAttentionNumBuckets, c.relativeAttentionMaxDistance) * H + h]! : 0);
  const bias = (b: number, h: number, i: number, j: number) => rel(h, i, j) + (mask && !mask.data[b * S + j] ? -Infinity : 0);
  const o = attention(q, k, v, { B, L: S, S, H, E: c.dKv }, 1, bias);
  const Bb = mask ? B : 1;
  const pb = hostArray([Bb, H, S, S]);
  for (let b = 0; b < Bb; b++) for (let h = 0; h < H; h++) for (let i = 0; i < S; i++) for (let j = 0; j < S; j++) pb.data[((b * H + h) * S + i) * S + j] = bias(b, h, i, j);
  return [hostArray([B, S, c.dModel], linear(o, B * S, param(params, 'o.weight'))), pb];
}

/** Key lengths of a case: options.lens (a padded batch) or none (no mask). */
export const caseLens = (c: Pick<TaskCase, 'options'>): number[] | null => (c.options as { lens?: number[] }).lens ?? null;

export function boolMask(ctx: Parameters<typeof fromInts>[0], lens: readonly number[], S: number, dtype: 'bool' | 'i64' = 'bool'): Tensor {
  return fromInts(ctx, lens.flatMap((n) => Array.from({ length: S }, (_, j) => (j < n ? 1 : 0))), [lens.length, S], dtype);
}

const t5Case = (name: string, dtype: 'f32' | 'bf16', cfg: T5Config, B: number, S: number, lens: number[] | null) => ({
  name, dtype, dims: { B, S, D: cfg.dModel, H: cfg.numHeads, Bb: lens ? B : 1 }, init: [cfg, true], options: lens ? { lens } : {},
});
const TINY = tinyT5Config();

export const t5AttentionTask = defineTask(
  {
    id: 'L2/t5_attention',
    level: 2,
    className: 'T5SelfAttention',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video'],
    mirrors: 'transformers.models.t5.modeling_t5.T5Attention',
    description: 'T5 encoder self-attention: q/k/v/o without bias, unscaled scores plus the bucketed relative position bias (and the padding mask), returned for the next layers.',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed T5 config (T5Config)' },
      { name: 'hasRelativeAttentionBias', type: 'bool', optional: true, default: false },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'mask', dtype: 'bool', shape: ['B', 'S'], optional: true, doc: 'true where a token is' },
      { name: 'positionBias', dtype: 'act', shape: ['Bb', 'H', 'S', 'S'], optional: true, doc: 'the first layer computes it' },
    ],
    outputs: [
      { name: 'out', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'positionBias', dtype: 'act', shape: ['Bb', 'H', 'S', 'S'] },
    ],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/linear', 'L1/dense_attention', 'L1/embedding'],
    cases: {
      ci: [t5Case('tiny-padded-f32', 'f32', TINY, 3, 20, [20, 7, 13]), t5Case('tiny-nomask-f32', 'f32', TINY, 1, 9, null), t5Case('tiny-padded-bf16', 'bf16', TINY, 2, 12, [12, 5])],
      // FLUX.1-dev's T5-XXL: prompts padded to 512 tokens (the pipeline passes no mask)
      production: [t5Case('t5-xxl-512', 'bf16', T5_XXL, 1, 512, null), t5Case('t5-xxl-b4-512-padded', 'bf16', T5_XXL, 4, 512, [512, 77, 200, 31])],
    },
  },
  {
    baseline: T5SelfAttention,
    makeInputs: (c, ctx, rng) => {
      const { B, S, D } = c.dims as Record<string, number>;
      const lens = caseLens(c);
      return [randn(ctx, rng, [B!, S!, D!], c.dtype), lens ? boolMask(ctx, lens, S!) : null, null];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x, mask], params, c) => t5AttentionReference(x!, mask ?? null, params, c.init[0] as T5Config, (c.init[1] as boolean | undefined) ?? false),
    work: (c) => {
      const { B, S, D, H } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      const cfg = c.init[0] as T5Config;
      const I = cfg.numHeads * cfg.dKv;
      return { bytes: bytesOf([4 * I, D!], it) + 6 * bytesOf([B!, S!, D!], it) + bytesOf([B!, H!, S!, S!], it), flops: 8 * B! * S! * D! * I + 4 * B! * S! * S! * I };
    },
  },
);
