import { DTYPE_INFO, F, Module, OpScope, defineTask, deviceArange, hostArray, type HostArray, type Tensor, type TaskCase } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { runsOwnForward } from '../../../common/fusion.js';
import { DenseAttention } from '../../../tasks/L1/attention/dense_attention.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { DiffusionRoPE, randomCosSin } from '../../../tasks/L1/rotary/diffusion_rope.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { FLUX1_DEV } from '../flux-config.js';
import { attention, catRows, linear, param, rmsNorm, ropeInterleaved, rowsOf } from '../host-math.js';

/**
 * vllm-omni's FluxAttention (diffusers' Attention + FluxAttnProcessor2_0): to_qkv (QKVParallelLinear; the checkpoint's
 * to_q / to_k / to_v stacked at load), per-head RMSNorm of q and k (norm_q / norm_k, eps 1e-6 in FLUX); with
 * added_kv_proj_dim the text stream gets add_kv_proj (add_q/k/v_proj) and norm_added_q / k, and is prepended to the
 * image tokens (joint attention over [text, image]); interleaved rotary (L1/diffusion_rope) on q and k with per-token
 * cos / sin [N, head_dim / 2]; non-causal SDPA (L1/dense_attention); then to_out.0 on the image part and to_add_out on
 * the text part. forward(hiddenStates [B, S, D], encoderHiddenStates [B, St, D] | null, cos, sin) -> [image, text]
 * (joint) or the attention output [B, S, inner] (pre_only: FLUX's single-stream blocks, which own the projection).
 */
export class FluxAttention extends Module {
  readonly headDim: number;
  readonly innerDim: number;
  readonly heads: number;
  readonly outDim: number;
  readonly toQkv: Linear;
  readonly normQ: RMSNorm;
  readonly normK: RMSNorm;
  readonly toOut: Linear | null;
  readonly addKvProj: Linear | null;
  readonly normAddedQ: RMSNorm | null;
  readonly normAddedK: RMSNorm | null;
  readonly toAddOut: Linear | null;
  readonly rope: DiffusionRoPE;
  readonly attn: DenseAttention;
  constructor(
    readonly queryDim: number,
    heads = 8,
    dimHead = 64,
    dropout = 0,
    bias = false,
    readonly addedKvProjDim: number | null = null,
    addedProjBias = true,
    outBias = true,
    eps = 1e-5,
    outDim: number | null = null,
    readonly contextPreOnly: boolean | null = null,
    readonly preOnly = false,
  ) {
    super();
    if (dropout !== 0) throw new RangeError('FluxAttention: inference only (dropout 0)');
    this.headDim = dimHead;
    this.innerDim = outDim ?? dimHead * heads;
    this.outDim = outDim ?? queryDim;
    this.heads = outDim !== null ? outDim / dimHead : heads;
    if (!Number.isInteger(this.heads)) throw new RangeError(`FluxAttention: out_dim ${outDim} is not a multiple of dim_head ${dimHead}`);
    this.toQkv = this.createModule('to_qkv', 'L1/linear', queryDim, 3 * this.innerDim, bias);
    this.normQ = this.createModule('norm_q', 'L1/rms_norm', dimHead, eps);
    this.normK = this.createModule('norm_k', 'L1/rms_norm', dimHead, eps);
    this.toOut = preOnly ? null : this.createModule<Linear>('to_out.0', 'L1/linear', this.innerDim, this.outDim, outBias);
    if (addedKvProjDim !== null) {
      this.normAddedQ = this.createModule<RMSNorm>('norm_added_q', 'L1/rms_norm', dimHead, eps);
      this.normAddedK = this.createModule<RMSNorm>('norm_added_k', 'L1/rms_norm', dimHead, eps);
      this.addKvProj = this.createModule<Linear>('add_kv_proj', 'L1/linear', addedKvProjDim, 3 * this.innerDim, addedProjBias);
      this.toAddOut = this.createModule<Linear>('to_add_out', 'L1/linear', this.innerDim, queryDim, outBias);
    } else {
      this.normAddedQ = this.normAddedK = this.addKvProj = this.toAddOut = null;
    }
    this.rope = this.createModule('rope', 'L1/diffusion_rope', false);
    this.attn = this.createModule('attn', 'L1/dense_attention');
  }

  /**
   * q, k, v [B, S, H, d] of a fused projection: q and k RMS-normed per head, the norms reading [B, S, H, d] views of the
   * projection in place (their output is contiguous); v stays a view of the projection while the attention is ours
   * (the joint cat or the SDPA reads it in place; a candidate gets it contiguous).
   */
  private project(s: OpScope, x: Tensor, proj: Linear, nq: RMSNorm, nk: RMSNorm): Tensor[] {
    const [B, S] = x.shape as [number, number];
    const qkv = s.own(proj.forward(x));
    const heads = (i: number) => s.own(s.own(qkv.narrow(2, i * this.innerDim, this.innerDim)).view(B, S, this.heads, this.headDim));
    const v = this.readsStrided() ? heads(2) : s.op('contiguous', [heads(2)]);
    return [s.own(nq.forward(heads(0)) as Tensor), s.own(nk.forward(heads(1)) as Tensor), v];
  }

  /**
   * q and k [B, N, H, d] rotated by cos / sin [N, R/2]. While the rope is ours, both in one launch of the backend's
   * rotary kernel (vLLM's rotary_embedding: f32 math with the f32 cos / sin, one rounding, as DiffusionRoPE; FLUX's
   * interleaved pairs are its GPT-J style) over the tokens' positions 0..N-1 of each batch entry, instead of
   * DiffusionRoPE's ~10 elementwise ops a tensor; else the rope module's forward on each.
   */
  private rotate(s: OpScope, q: Tensor, k: Tensor, cos: Tensor, sin: Tensor): [Tensor, Tensor] {
    const [B, N] = q.shape as [number, number];
    const ops = q.backend.ops;
    if (!runsOwnForward(this.rope, DiffusionRoPE) || cos.dtype !== 'f32' || sin.dtype !== 'f32' || cos.shape[0] !== N || !q.isContiguous() || !k.isContiguous()) {
      return [s.own(this.rope.forward(q, cos, sin)), s.own(this.rope.forward(k, cos, sin))];
    }
    const cache = s.own(F.cat([cos, sin], 1));
    const arange = s.own(deviceArange(q.backend, N, q.device));
    const positions = B === 1 ? arange : s.own(s.own(arange.unsqueeze(0)).expand(B, N));
    const [qr, kr] = ops.rotaryEmbedding(positions, q, k, cache, this.headDim, !this.rope.interleaved);
    return [s.own(qr), s.own(kr!)];
  }

  /** Whether SDPA gets q / k / v as strided views (our DenseAttention: the kernels read them in place; FA3's own layout is [B, S, H, d]). */
  private readsStrided(): boolean {
    return runsOwnForward(this.attn, DenseAttention);
  }

  forward(hiddenStates: Tensor, encoderHiddenStates: Tensor | null = null, cos: Tensor | null = null, sin: Tensor | null = null): Tensor | Tensor[] {
    const s = new OpScope();
    try {
      const [B, S] = hiddenStates.shape as [number, number];
      let [q, k, v] = this.project(s, hiddenStates, this.toQkv, this.normQ, this.normK) as [Tensor, Tensor, Tensor];
      const joint = this.addKvProj !== null;
      if (joint && !encoderHiddenStates) throw new RangeError('FluxAttention: this joint attention (added_kv_proj_dim) needs encoderHiddenStates');
      const St = joint ? encoderHiddenStates!.shape[1]! : 0;
      if (joint) {
        const [eq, ek, ev] = this.project(s, encoderHiddenStates!, this.addKvProj!, this.normAddedQ!, this.normAddedK!) as [Tensor, Tensor, Tensor];
        q = s.own(F.cat([eq, q], 1));
        k = s.own(F.cat([ek, k], 1));
        v = s.own(F.cat([ev, v], 1));
      }
      if (cos && sin) [q, k] = this.rotate(s, q, k, cos, sin);
      const N = S + St;
      // [B, N, H, d] -> [B, H, N, d]: a view where SDPA reads strided operands in place, else a copy
      const heads = (t: Tensor) => (this.readsStrided() ? s.own(t.permute(0, 2, 1, 3)) : s.op('contiguous', [s.own(t.permute(0, 2, 1, 3))]));
      const ctx = s.own(this.attn.forward(heads(q), heads(k), heads(v)));
      const merged = s.op('contiguous', [s.own(ctx.permute(0, 2, 1, 3))]).view(B, N, this.innerDim);
      s.own(merged);
      if (!joint) return s.keep([this.toOut ? this.toOut.forward(merged) : F.contiguous(merged)])[0];
      const txt = s.op('contiguous', [s.own(merged.narrow(1, 0, St))]);
      const img = s.op('contiguous', [s.own(merged.narrow(1, St, S))]);
      const imgOut = this.toOut ? this.toOut.forward(img) : F.contiguous(img);
      return [...s.keep([imgOut, this.toAddOut!.forward(txt)])];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** Golden float64 FluxAttention; `enc` null for the single-stream (pre-only) form. */
export function fluxAttentionReference(
  h: HostArray,
  enc: HostArray | null,
  cos: HostArray | null,
  sin: HostArray | null,
  params: ReadonlyMap<string, HostArray>,
  heads: number,
  headDim: number,
  eps: number,
  preOnly: boolean,
): HostArray[] {
  const [B, S] = h.shape as [number, number];
  const inner = heads * headDim;
  const qkvOf = (x: HostArray, rows: number, proj: string, nq: string, nk: string) => {
    const y = linear(x.data, rows, param(params, `${proj}.weight`), params.get(`${proj}.bias`) ?? null);
    const col = (i: number) => Float64Array.from({ length: rows * inner }, (_, t) => y[Math.floor(t / inner) * 3 * inner + i * inner + (t % inner)]!);
    return [rmsNorm(col(0), rows * heads, headDim, param(params, `${nq}.weight`), eps), rmsNorm(col(1), rows * heads, headDim, param(params, `${nk}.weight`), eps), col(2)];
  };
  let [q, k, v] = qkvOf(h, B * S, 'to_qkv', 'norm_q', 'norm_k') as [Float64Array, Float64Array, Float64Array];
  const St = enc ? enc.shape[1]! : 0;
  if (enc) {
    const [eq, ek, ev] = qkvOf(enc, B * St, 'add_kv_proj', 'norm_added_q', 'norm_added_k') as [Float64Array, Float64Array, Float64Array];
    q = catRows(eq, St, q, S, B, inner);
    k = catRows(ek, St, k, S, B, inner);
    v = catRows(ev, St, v, S, B, inner);
  }
  const N = S + St;
  if (cos && sin) {
    ropeInterleaved(q, B, N, heads, headDim, cos.data, sin.data);
    ropeInterleaved(k, B, N, heads, headDim, cos.data, sin.data);
  }
  const o = attention(q, k, v, { B, L: N, S: N, H: heads, E: headDim }, 1 / Math.sqrt(headDim));
  if (!enc) {
    if (preOnly) return [hostArray([B, N, inner], o)];
    const w = param(params, 'to_out.0.weight');
    return [hostArray([B, N, w.shape[0]!], linear(o, B * N, w, params.get('to_out.0.bias') ?? null))];
  }
  const img = rowsOf(o, B, N, inner, St, S);
  const txt = rowsOf(o, B, N, inner, 0, St);
  const wo = param(params, 'to_out.0.weight');
  const wa = param(params, 'to_add_out.weight');
  return [
    hostArray([B, S, wo.shape[0]!], linear(img, B * S, wo, params.get('to_out.0.bias') ?? null)),
    hostArray([B, St, wa.shape[0]!], linear(txt, B * St, wa, params.get('to_add_out.bias') ?? null)),
  ];
}

/** A joint case (FluxTransformerBlock's attention) or a single-stream one (pre_only, no text input). */
function attnCase(name: string, dtype: 'f32' | 'bf16', B: number, S: number, St: number, D: number, H: number, joint: boolean): TaskCase {
  const E = D / H;
  const init = joint ? [D, H, E, 0, true, D, true, true, 1e-6, D, false, false] : [D, H, E, 0, true, null, true, true, 1e-6, D, null, true];
  return { name, dtype, dims: { B, S, St, D, N: joint ? S + St : S, R2: E / 2 }, init, options: { joint }, count: 1 };
}
const joint = (c: TaskCase) => (c.options as { joint: boolean }).joint;
const Dp = FLUX1_DEV.innerDim;
const Hp = FLUX1_DEV.numAttentionHeads;

export const fluxAttentionTask = defineTask(
  {
    id: 'L2/flux_attention',
    level: 2,
    className: 'FluxAttention',
    family: [FAMILY],
    architectures: ['flux'],
    mirrors: 'vllm_omni.diffusion.models.flux.flux_transformer.FluxAttention',
    description: 'FLUX joint text-image attention: fused QKV, per-head QK RMSNorm, text tokens prepended, interleaved RoPE, SDPA, separate image / text output projections; or the single-stream pre-only form.',
    init: [
      { name: 'queryDim', type: 'int' },
      { name: 'heads', type: 'int', optional: true, default: 8 },
      { name: 'dimHead', type: 'int', optional: true, default: 64 },
      { name: 'dropout', type: 'float', optional: true, default: 0 },
      { name: 'bias', type: 'bool', optional: true, default: false },
      { name: 'addedKvProjDim', type: 'int', optional: true, doc: 'text-stream width: set for the joint (double-stream) form' },
      { name: 'addedProjBias', type: 'bool', optional: true, default: true },
      { name: 'outBias', type: 'bool', optional: true, default: true },
      { name: 'eps', type: 'float', optional: true, default: 1e-5 },
      { name: 'outDim', type: 'int', optional: true },
      { name: 'contextPreOnly', type: 'bool', optional: true },
      { name: 'preOnly', type: 'bool', optional: true, default: false },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'], doc: 'image tokens (joint) or the whole [text, image] stream (single)' },
      { name: 'encoderHiddenStates', dtype: 'act', shape: ['B', 'St', 'D'], optional: true, doc: 'text tokens (joint form only)' },
      { name: 'cos', dtype: 'f32', shape: ['N', 'R2'], optional: true, doc: 'rotary cos per token of [text, image], N = St + S (joint) or S' },
      { name: 'sin', dtype: 'f32', shape: ['N', 'R2'], optional: true },
    ],
    outputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'encoderHiddenStates', dtype: 'act', shape: ['B', 'St', 'D'], optional: true, doc: 'joint form only' },
    ],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/linear', 'L1/rms_norm', 'L1/diffusion_rope', 'L1/dense_attention'],
    cases: {
      ci: [
        attnCase('joint-f32', 'f32', 2, 6, 3, 32, 2, true),
        attnCase('single-f32', 'f32', 1, 9, 0, 32, 2, false),
        attnCase('joint-bf16', 'bf16', 1, 8, 4, 64, 4, true),
      ],
      production: [
        // FLUX.1-dev double-stream attention at 1024 px: 4096 image + 512 text tokens, 24 heads of 128.
        attnCase('flux1-dev-joint-1024px', 'bf16', 1, 4096, 512, Dp, Hp, true),
        // single-stream at 1024 px: 4608 tokens.
        attnCase('flux1-dev-single-1024px', 'bf16', 1, 4608, 0, Dp, Hp, false),
        // 512 px: 1024 image + 512 text tokens.
        attnCase('flux1-dev-joint-512px', 'bf16', 1, 1024, 512, Dp, Hp, true),
      ],
    },
  },
  {
    baseline: FluxAttention,
    makeInputs: (c, ctx, rng) => {
      const { B, S, St, D, N, R2 } = c.dims as Record<string, number>;
      const h = randn(ctx, rng, [B!, S!, D!], c.dtype);
      const e = joint(c) ? randn(ctx, rng, [B!, St!, D!], c.dtype) : null;
      return [h, e, ...randomCosSin(ctx, rng, N!, R2!)];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([h, e, cos, sin], params, c) => {
      const [D, H] = c.init as [number, number];
      return fluxAttentionReference(h!, e ?? null, cos ?? null, sin ?? null, params, H, D / H, 1e-6, !joint(c));
    },
    work: (c) => {
      const { B, S, St, D, N } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      const T = B! * N!;
      const projW = (joint(c) ? 8 : 3) * D! * D!;
      return { bytes: bytesOf([projW], it) + 6 * bytesOf([T, D!], it), flops: 2 * T * 3 * D! * D! + (joint(c) ? 2 * B! * (S! + St!) * D! * D! : 0) + 4 * B! * N! * N! * D! };
    },
  },
);
