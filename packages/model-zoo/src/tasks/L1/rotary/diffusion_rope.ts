import { DTYPE_INFO, F, Module, OpScope, Tensor, defineTask, hostArray, type ExecutionContext, type HostArray, type Rng } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { familiesOf } from '../../families.js';

/**
 * vllm-omni's diffusion RotaryEmbedding (the flash-attn / vLLM triton `apply_rotary_emb` it calls on CUDA):
 * forward(x [B, S, H, D], cos [S, R/2], sin [S, R/2]) rotates the first R <= D channels of every head, the rest pass
 * through. is_neox_style=false (FLUX) rotates interleaved pairs (x[2i], x[2i+1]); true rotates the halves
 * (x[i], x[i + R/2]). Math in float32, one rounding to x's dtype, as the kernel.
 */
export class DiffusionRoPE extends Module {
  readonly interleaved: boolean;
  constructor(readonly isNeoxStyle = false) {
    super();
    this.interleaved = !isNeoxStyle;
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
    if (x.shape.length !== 4) throw new RangeError(`DiffusionRoPE: x must be [B, S, H, D], got [${x.shape.join(', ')}]`);
    const [B, S, H, D] = x.shape as [number, number, number, number];
    if (cos.shape.length !== 2 || cos.shape[0] !== S || sin.shape.join() !== cos.shape.join()) {
      throw new RangeError(`DiffusionRoPE: cos and sin must both be [S=${S}, R/2], got [${cos.shape.join(', ')}] and [${sin.shape.join(', ')}]`);
    }
    const half = cos.shape[1]!;
    const R = 2 * half;
    if (R > D) throw new RangeError(`DiffusionRoPE: rotary dim ${R} exceeds head dim ${D}`);
    const s = new OpScope();
    try {
      const xr = R < D ? s.own(x.narrow(3, 0, R)) : x;
      const xf = s.op('to', [xr], { dtype: 'f32' });
      const c = s.own(s.op('to', [cos], { dtype: 'f32' }).view(S, 1, half));
      const sn = s.own(s.op('to', [sin], { dtype: 'f32' }).view(S, 1, half));
      let x1: Tensor;
      let x2: Tensor;
      if (this.interleaved) {
        const pairs = s.own(xf.view(B, S, H, half, 2));
        x1 = s.own(pairs.select(4, 0));
        x2 = s.own(pairs.select(4, 1));
      } else {
        x1 = s.own(xf.narrow(3, 0, half));
        x2 = s.own(xf.narrow(3, half, half));
      }
      const o1 = s.own(F.sub(s.own(F.mul(x1, c)), s.own(F.mul(x2, sn))));
      const o2 = s.own(F.add(s.own(F.mul(x2, c)), s.own(F.mul(x1, sn))));
      const rotated = this.interleaved ? s.own(s.own(F.stack([o1, o2], -1)).view(B, S, H, R)) : s.own(F.cat([o1, o2], -1));
      const out = s.op('to', [rotated], { dtype: x.dtype });
      if (R === D) return s.keep([out])[0];
      const rest = s.own(x.narrow(3, R, D - R));
      return s.keep([F.cat([out, rest], -1)])[0];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** Golden float64 rotary: x [B, S, H, D], cos / sin [S, R/2]; interleaved pairs or neox halves; channels >= R copied. */
export function diffusionRopeReference(x: HostArray, cos: HostArray, sin: HostArray, interleaved: boolean): HostArray {
  const [B, S, H, D] = x.shape as [number, number, number, number];
  const half = cos.shape[1]!;
  const out = hostArray(x.shape, x.data);
  for (let b = 0; b < B; b++)
    for (let t = 0; t < S; t++)
      for (let h = 0; h < H; h++) {
        const base = ((b * S + t) * H + h) * D;
        for (let i = 0; i < half; i++) {
          const [a, z] = interleaved ? [base + 2 * i, base + 2 * i + 1] : [base + i, base + i + half];
          const c = cos.data[t * half + i]!;
          const sn = sin.data[t * half + i]!;
          out.data[a] = x.data[a]! * c - x.data[z]! * sn;
          out.data[z] = x.data[z]! * c + x.data[a]! * sn;
        }
      }
  return out;
}

/** cos / sin [S, R2] of random angles (what FluxPosEmbed gives, not independent normals), float32. */
export function randomCosSin(ctx: ExecutionContext, rng: Rng, S: number, R2: number): [Tensor, Tensor] {
  const ang = rng.fillNormal(S * R2, 3);
  const dev = { device: ctx.device };
  return [Tensor.fromArray(ctx.backend, ang.map(Math.cos), [S, R2], 'f32', dev), Tensor.fromArray(ctx.backend, ang.map(Math.sin), [S, R2], 'f32', dev)];
}

const neox = (c: { init: readonly unknown[] }) => (c.init[0] as boolean | undefined) ?? false;
const ARCHS = ['flux', 'hunyuan_video'];

export const diffusionRopeTask = defineTask(
  {
    id: 'L1/diffusion_rope',
    level: 1,
    className: 'DiffusionRoPE',
    family: familiesOf(ARCHS),
    architectures: ARCHS,
    mirrors: 'vllm_omni.diffusion.layers.rope.RotaryEmbedding',
    description: 'Rotary embedding of diffusion transformers on [B, S, H, D] with per-token cos / sin [S, R/2]: interleaved pairs (FLUX) or neox halves; channels past R pass through.',
    init: [{ name: 'isNeoxStyle', type: 'bool', optional: true, default: false }],
    inputs: [
      { name: 'x', dtype: 'act', shape: ['B', 'S', 'H', 'D'] },
      { name: 'cos', dtype: 'f32', shape: ['S', 'R2'] },
      { name: 'sin', dtype: 'f32', shape: ['S', 'R2'] },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'S', 'H', 'D'] }],
    cases: {
      ci: [
        { name: 'interleaved-f32', dtype: 'f32', dims: { B: 2, S: 9, H: 3, D: 16, R2: 8 }, init: [] },
        { name: 'neox-partial-f32', dtype: 'f32', dims: { B: 1, S: 7, H: 2, D: 24, R2: 8 }, init: [true] },
        { name: 'interleaved-bf16', dtype: 'bf16', dims: { B: 1, S: 12, H: 4, D: 32, R2: 16 }, init: [false] },
      ],
      production: [
        // FLUX.1-dev at 1024 px: 512 text + 4096 image tokens, 24 heads of 128 (q or k of one block).
        { name: 'flux1-dev-1024px', dtype: 'bf16', dims: { B: 1, S: 4608, H: 24, D: 128, R2: 64 }, init: [] },
        // FLUX.1-dev at 512 px: 512 text + 1024 image tokens.
        { name: 'flux1-dev-512px', dtype: 'bf16', dims: { B: 1, S: 1536, H: 24, D: 128, R2: 64 }, init: [] },
      ],
    },
  },
  {
    baseline: DiffusionRoPE,
    makeInputs: (c, ctx, rng) => {
      const { B, S, H, D, R2 } = c.dims as Record<string, number>;
      return [randn(ctx, rng, [B!, S!, H!, D!], c.dtype), ...randomCosSin(ctx, rng, S!, R2!)];
    },
    reference: ([x, cos, sin], _p, c) => [diffusionRopeReference(x!, cos!, sin!, !neox(c))],
    work: (c) => {
      const { B, S, H, D, R2 } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: 2 * B! * S! * H! * D! * it + 2 * S! * R2! * 4, flops: 6 * B! * S! * H! * R2! };
    },
  },
);
