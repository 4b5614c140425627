import { F, Module, OpScope, Tensor, defineTask, hostArray, type ExecutionContext, type HostArray } from '@fastkernels/core';
import { familiesOf } from '../../families.js';

/**
 * diffusers' FluxPosEmbed(theta, axes_dim): position ids [S, n_axes] (text ids 0, image ids (0, row, col)) -> the
 * real rotary tables (cos, sin) [S, sum(axes_dim)], float32. Axis i contributes get_1d_rotary_pos_embed(axes_dim[i],
 * ids[:, i], theta, use_real=True, repeat_interleave_real=True): angle p * theta^(-2k / d) for k < d / 2, each column
 * repeated twice (the interleaved pair layout FLUX's attention rotates). diffusers forms the angles in float64; here
 * they are float32 products of the exact positions and float64-rounded frequencies (|error| <= |angle| * 2^-24).
 */
export class FluxPosEmbed extends Module {
  readonly axesDim: number[];
  constructor(
    readonly theta: number,
    axesDim: readonly number[],
  ) {
    super();
    if (axesDim.length === 0 || axesDim.some((d) => !Number.isInteger(d) || d <= 0 || d % 2 !== 0)) {
      throw new RangeError(`FluxPosEmbed: axes_dim must be positive even ints, got [${axesDim.join(', ')}]`);
    }
    this.axesDim = [...axesDim];
  }

  /** theta^(-2k / d) for k < d / 2, in float64 (get_1d_rotary_pos_embed's freqs). */
  static frequencies(theta: number, dim: number): number[] {
    return Array.from({ length: dim / 2 }, (_, k) => 1 / theta ** ((2 * k) / dim));
  }

  forward(ids: Tensor): Tensor[] {
    if (ids.shape.length !== 2 || ids.shape[1] !== this.axesDim.length) {
      throw new RangeError(`FluxPosEmbed: ids must be [S, ${this.axesDim.length}] (one column per axis), got [${ids.shape.join(', ')}]`);
    }
    const S = ids.shape[0]!;
    const s = new OpScope();
    try {
      const pos = s.op('to', [ids], { dtype: 'f32' });
      const cosParts: Tensor[] = [];
      const sinParts: Tensor[] = [];
      this.axesDim.forEach((d, i) => {
        const p = s.own(pos.narrow(1, i, 1));
        const omega = s.own(Tensor.fromArray(ids.backend, FluxPosEmbed.frequencies(this.theta, d), [1, d / 2], 'f32', { device: ids.device }));
        const ang = s.op('mul', [p, omega]);
        // repeat_interleave(2) of the columns: stack a column with itself, then merge the pair dim
        const pair = (t: Tensor) => s.own(s.own(F.stack([t, t], -1)).view(S, d));
        cosParts.push(pair(s.op('cos', [ang])));
        sinParts.push(pair(s.op('sin', [ang])));
      });
      return [...s.keep([F.cat(cosParts, -1), F.cat(sinParts, -1)])];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** Golden float64 FluxPosEmbed: ids [S, A] -> cos, sin [S, sum(axesDim)] (each angle's column repeated twice). */
export function fluxPosEmbedReference(ids: HostArray, theta: number, axesDim: readonly number[]): [HostArray, HostArray] {
  const [S, A] = ids.shape as [number, number];
  const Dt = axesDim.reduce((a, b) => a + b, 0);
  const cos = hostArray([S, Dt]);
  const sin = hostArray([S, Dt]);
  for (let t = 0; t < S; t++) {
    let off = 0;
    axesDim.forEach((d, i) => {
      for (let k = 0; k < d / 2; k++) {
        const a = ids.data[t * A + i]! * theta ** ((-2 * k) / d);
        for (const j of [off + 2 * k, off + 2 * k + 1]) {
          cos.data[t * Dt + j] = Math.cos(a);
          sin.data[t * Dt + j] = Math.sin(a);
        }
      }
      off += d;
    });
  }
  return [cos, sin];
}

/**
 * FluxPipeline's position ids: `txt` zero rows, then one (0, row, col) row per 2x2 latent patch of an h x w packed
 * grid (prepare_latent_image_ids), as floats of `dtype`.
 */
export function fluxIds(ctx: ExecutionContext, txt: number, h: number, w: number, dtype: Tensor['dtype']): Tensor {
  const v: number[] = new Array(txt * 3).fill(0);
  for (let r = 0; r < h; r++) for (let c = 0; c < w; c++) v.push(0, r, c);
  return Tensor.fromArray(ctx.backend, v, [txt + h * w, 3], dtype, { device: ctx.device });
}

type Opts = { txt: number; h: number; w: number };
const ARCHS = ['flux'];
const FLUX_AXES = [16, 56, 56];

export const fluxPosEmbedTask = defineTask(
  {
    id: 'L1/flux_pos_embed',
    level: 1,
    className: 'FluxPosEmbed',
    family: familiesOf(ARCHS),
    architectures: ARCHS,
    mirrors: 'diffusers.models.embeddings.FluxPosEmbed',
    description: "FLUX's 3-axis rotary tables: position ids [S, 3] -> (cos, sin) [S, sum(axes_dim)] float32, columns repeated in interleaved pairs.",
    init: [
      { name: 'theta', type: 'int', doc: '10000 for FLUX' },
      { name: 'axesDim', type: 'object', doc: 'rotary dims per axis, [16, 56, 56] for FLUX' },
    ],
    inputs: [{ name: 'ids', dtype: 'act', shape: ['S', 'A'], doc: 'text ids (0, 0, 0) then image ids (0, row, col)' }],
    outputs: [
      { name: 'cos', dtype: 'f32', shape: ['S', 'Dr'] },
      { name: 'sin', dtype: 'f32', shape: ['S', 'Dr'] },
    ],
    cases: {
      ci: [
        { name: 'tiny-f32', dtype: 'f32', dims: { S: 4 + 12, A: 3, Dr: 16 }, init: [10000, [4, 6, 6]], options: { txt: 4, h: 3, w: 4 } },
        { name: 'flux-axes-bf16', dtype: 'bf16', dims: { S: 8 + 36, A: 3, Dr: 128 }, init: [10000, FLUX_AXES], options: { txt: 8, h: 6, w: 6 } },
      ],
      production: [
        // FLUX.1-dev at 1024 px: 512 text tokens + a 64 x 64 grid of packed latents.
        { name: 'flux1-dev-1024px', dtype: 'bf16', dims: { S: 4608, A: 3, Dr: 128 }, init: [10000, FLUX_AXES], options: { txt: 512, h: 64, w: 64 } },
        // 512 px: 512 text tokens + 32 x 32 latents.
        { name: 'flux1-dev-512px', dtype: 'bf16', dims: { S: 1536, A: 3, Dr: 128 }, init: [10000, FLUX_AXES], options: { txt: 512, h: 32, w: 32 } },
      ],
    },
  },
  {
    baseline: FluxPosEmbed,
    makeInputs: (c, ctx) => {
      const o = c.options as Opts;
      return [fluxIds(ctx, o.txt, o.h, o.w, c.dtype)];
    },
    reference: ([ids], _p, c) => fluxPosEmbedReference(ids!, c.init[0] as number, c.init[1] as number[]),
    work: (c) => {
      const { S, A, Dr } = c.dims as Record<string, number>;
      return { bytes: S! * A! * 2 + 2 * S! * Dr! * 4, flops: 12 * S! * Dr! };
    },
  },
);
