import { DTYPE_INFO, F, Module, OpScope, Tensor, defineTask, hostArray, type ExecutionContext, type HostArray } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { DenseAttention } from '../../../tasks/L1/attention/dense_attention.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { CLIP_L, tinyClipConfig, type ClipTextConfig } from '../clip-config.js';
import { FAMILY } from '../family.js';
import { attention, linear, param } from '../host-math.js';

/**
 * The text tower's attention mask [B, 1, S, S] bool: causal (query i sees keys 0..i) and, with a 0/1 attentionMask
 * [B, S], only real keys (HF's causal mask plus the expanded padding mask). The causal part is a host constant of S.
 */
export function clipCausalMask(ctx: Pick<ExecutionContext, 'backend' | 'device'>, B: number, S: number, attentionMask: Tensor | null): Tensor {
  const tri = Array.from({ length: S * S }, (_, t) => (t % S <= Math.floor(t / S) ? 1 : 0));
  const causal = Tensor.fromArray(ctx.backend, tri, [1, 1, S, S], 'bool', { device: ctx.device });
  if (!attentionMask) return causal;
  const s = new OpScope();
  s.own(causal);
  const keys = s.own(s.op('ne', [attentionMask, 0]).view(B, 1, 1, S));
  return s.keep([F.logicalAnd(causal, keys)])[0];
}

/**
 * HF's CLIPAttention (vllm-omni's CLIPAttention): q_proj / k_proj / v_proj / out_proj with bias, SDPA at
 * head_dim^-0.5 (L1/dense_attention) under a bool mask [B, 1, S, S] (the text tower's causal + padding mask, or null:
 * bidirectional). forward(hiddenStates [B, S, H], attentionMask | null) -> [B, S, H].
 */
export class CLIPAttention extends Module {
  readonly qProj: Linear;
  readonly kProj: Linear;
  readonly vProj: Linear;
  readonly outProj: Linear;
  readonly attn: DenseAttention;
  constructor(readonly config: ClipTextConfig) {
    super();
    const H = config.hiddenSize;
    this.qProj = this.createModule('q_proj', 'L1/linear', H, H, true);
    this.kProj = this.createModule('k_proj', 'L1/linear', H, H, true);
    this.vProj = this.createModule('v_proj', 'L1/linear', H, H, true);
    this.outProj = this.createModule('out_proj', 'L1/linear', H, H, true);
    this.attn = this.createModule('attn', 'L1/dense_attention');
  }

  forward(hiddenStates: Tensor, attentionMask: Tensor | null = null): Tensor {
    const s = new OpScope();
    try {
      const [B, S, H] = hiddenStates.shape as [number, number, number];
      const { numAttentionHeads: nh, headDim: d } = this.config;
      const heads = (m: Linear) => s.op('contiguous', [s.own(s.own(s.own(m.forward(hiddenStates)).view(B, S, nh, d)).permute(0, 2, 1, 3))]);
      const ctx = s.own(this.attn.forward(heads(this.qProj), heads(this.kProj), heads(this.vProj), attentionMask));
      const merged = s.own(s.op('contiguous', [s.own(ctx.permute(0, 2, 1, 3))]).view(B, S, H));
      return s.keep([this.outProj.forward(merged)])[0];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** Golden float64 CLIPAttention; `lens` the valid lengths for the causal + padding mask, or null (causal only). */
export function clipAttentionReference(x: HostArray, params: ReadonlyMap<string, HostArray>, c: ClipTextConfig, lens: readonly number[] | null, causal = true): HostArray {
  const [B, S, H] = x.shape as [number, number, number];
  const p = (n: string) => [param(params, `${n}.weight`), param(params, `${n}.bias`)] as const;
  const [q, k, v] = ['q_proj', 'k_proj', 'v_proj'].map((n) => linear(x.data, B * S, ...p(n)));
  const bias = (b: number, _h: number, i: number, j: number) => ((causal && j > i) || (lens && j >= lens[b]!) ? -Infinity : 0);
  const o = attention(q!, k!, v!, { B, L: S, S, H: c.numAttentionHeads, E: c.headDim }, 1 / Math.sqrt(c.headDim), bias);
  return hostArray(x.shape, linear(o, B * S, ...p('out_proj')));
}

export const clipLens = (c: { options: Record<string, unknown> }): number[] | null => (c.options as { lens?: number[] }).lens ?? null;

export function clipMaskInput(ctx: ExecutionContext, B: number, S: number, lens: readonly number[] | null): Tensor {
  if (!lens) return clipCausalMask(ctx, B, S, null);
  const m = Tensor.fromArray(ctx.backend, lens.flatMap((n) => Array.from({ length: S }, (_, j) => (j < n ? 1 : 0))), [B, S], 'i64', { device: ctx.device });
  const out = clipCausalMask(ctx, B, S, m);
  m.dispose();
  return out;
}

const attnCase = (name: string, dtype: 'f32' | 'bf16', cfg: ClipTextConfig, B: number, S: number, lens: number[] | null) => ({
  name, dtype, dims: { B, S, H: cfg.hiddenSize, Bm: lens ? B : 1 }, init: [cfg], options: lens ? { lens } : {},
});

export const clipAttentionTask = defineTask(
  {
    id: 'L2/clip_attention',
    level: 2,
    className: 'CLIPAttention',
    family: [FAMILY],
    architectures: ['flux'],
    mirrors: 'transformers.models.clip.modeling_clip.CLIPAttention',
    description: 'CLIP text self-attention: biased q/k/v/out projections, SDPA at head_dim^-0.5 under the causal (+ padding) mask.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed CLIP text config (ClipTextConfig)' }],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'H'] },
      { name: 'attentionMask', dtype: 'bool', shape: ['Bm', 1, 'S', 'S'], optional: true, doc: 'true = attend (causal, pads hidden)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'S', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/linear', 'L1/dense_attention'],
    cases: {
      ci: [attnCase('tiny-padded-f32', 'f32', tinyClipConfig(), 3, 9, [9, 4, 6]), attnCase('tiny-causal-bf16', 'bf16', tinyClipConfig(), 2, 7, null)],
      // FLUX.1-dev pads prompts to CLIP's 77 tokens and passes no padding mask (causal only)
      production: [attnCase('clip-l-77', 'bf16', CLIP_L, 1, 77, null), attnCase('clip-l-b8-77', 'bf16', CLIP_L, 8, 77, null)],
    },
  },
  {
    baseline: CLIPAttention,
    makeInputs: (c, ctx, rng) => {
      const { B, S, H } = c.dims as Record<string, number>;
      return [randn(ctx, rng, [B!, S!, H!], c.dtype), clipMaskInput(ctx, B!, S!, clipLens(c))];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x], params, c) => [clipAttentionReference(x!, params, c.init[0] as ClipTextConfig, clipLens(c))],
    work: (c) => {
      const { B, S, H } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([4 * H!, H!], it) + 6 * bytesOf([B!, S!, H!], it), flops: 8 * B! * S! * H! * H! + 4 * B! * S! * S! * H! };
    },
  },
);
