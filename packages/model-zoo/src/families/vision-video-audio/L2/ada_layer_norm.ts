import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { SiLU } from '../../../layers/activation.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { FLUX1_DEV } from '../flux-config.js';
import { layerNorm, linear, param, silu } from '../host-math.js';
import { normModulate } from './modulate.js';

/**
 * diffusers' AdaLayerNormZero (adaLN-Zero of DiT; FLUX's norm1 / norm1_context): emb = linear(silu(temb)) [B, 6D]
 * chunked into shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp; x -> LayerNorm(x, no affine, eps
 * 1e-6) * (1 + scale_msa) + shift_msa. forward(x [B, S, D], emb [B, D]) -> [x, gate_msa, shift_mlp, scale_mlp,
 * gate_mlp] (the four [B, D] rows contiguous). Only the layer_norm form without class labels (FLUX's) is built. The norm
 * and the modulation are one layer_norm_modulate while `norm` is our LayerNorm (modulate.ts: normModulate).
 */
export class AdaLayerNormZero extends Module {
  readonly silu: SiLU;
  readonly linear: Linear;
  readonly norm: LayerNorm;
  constructor(
    readonly embeddingDim: number,
    numEmbeddings: number | null = null,
    normType = 'layer_norm',
    bias = true,
  ) {
    super();
    if (numEmbeddings !== null) throw new RangeError('AdaLayerNormZero: num_embeddings (class-label conditioning) is not supported; FLUX passes emb');
    if (normType !== 'layer_norm') throw new RangeError(`AdaLayerNormZero: norm_type '${normType}' is not supported (layer_norm)`);
    this.silu = this.registerModule('silu', createLayer('SiLU'));
    this.linear = this.createModule('linear', 'L1/linear', embeddingDim, 6 * embeddingDim, bias);
    this.norm = this.registerModule('norm', createLayer('LayerNorm', embeddingDim, 1e-6, false));
  }

  forward(x: Tensor, emb: Tensor): Tensor[] {
    return adaForward(this, x, emb, 6);
  }
}

/**
 * diffusers' AdaLayerNormZeroSingle (FLUX's single-stream blocks): linear(silu(temb)) [B, 3D] -> shift, scale, gate;
 * forward(x, emb) -> [LayerNorm(x) * (1 + scale) + shift, gate]. Built with `new` by FluxSingleTransformerBlock (the
 * task's second class); its children resolve through the registry.
 */
export class AdaLayerNormZeroSingle extends Module {
  readonly silu: SiLU;
  readonly linear: Linear;
  readonly norm: LayerNorm;
  constructor(
    readonly embeddingDim: number,
    normType = 'layer_norm',
    bias = true,
  ) {
    super();
    if (normType !== 'layer_norm') throw new RangeError(`AdaLayerNormZeroSingle: norm_type '${normType}' is not supported (layer_norm)`);
    this.silu = this.registerModule('silu', createLayer('SiLU'));
    this.linear = this.createModule('linear', 'L1/linear', embeddingDim, 3 * embeddingDim, bias);
    this.norm = this.registerModule('norm', createLayer('LayerNorm', embeddingDim, 1e-6, false));
  }

  forward(x: Tensor, emb: Tensor): Tensor[] {
    return adaForward(this, x, emb, 3);
  }
}

function adaForward(m: { silu: SiLU; linear: Linear; norm: LayerNorm }, x: Tensor, emb: Tensor, n: 3 | 6): Tensor[] {
  const a = m.silu.forward(emb);
  const e = m.linear.forward(a);
  a.dispose();
  const parts = F.chunk(e, n, 1);
  const y = normModulate(m.norm, x, parts[1]!, parts[0]!);
  const rest = parts.slice(2).map((p) => F.contiguous(p));
  for (const p of parts) p.dispose();
  e.dispose();
  return [y, ...rest];
}

/** Golden float64 AdaLayerNormZero(Single): x [B, S, D], emb [B, D] -> [x', ...the remaining chunks]. */
export function adaLayerNormZeroReference(x: HostArray, emb: HostArray, params: ReadonlyMap<string, HostArray>, n: 3 | 6): HostArray[] {
  const [B, S, D] = x.shape as [number, number, number];
  const e = linear(emb.data.map(silu), B, param(params, 'linear.weight'), params.get('linear.bias') ?? null);
  const chunk = (i: number) => Float64Array.from({ length: B * D }, (_, t) => e[Math.floor(t / D) * n * D + i * D + (t % D)]!);
  const [shift, scale] = [chunk(0), chunk(1)];
  const h = layerNorm(x.data, B * S, D, 1e-6);
  const y = h.map((v, t) => {
    const b = Math.floor(t / (S * D));
    const j = t % D;
    return v * (1 + scale[b * D + j]!) + shift[b * D + j]!;
  });
  return [hostArray(x.shape, y), ...Array.from({ length: n - 2 }, (_, i) => hostArray([B, D], chunk(i + 2)))];
}

const adaCase = (name: string, dtype: 'f32' | 'bf16', B: number, S: number, D: number) => ({ name, dtype, dims: { B, S, D }, init: [D] });

export const adaLayerNormTask = defineTask(
  {
    id: 'L2/ada_layer_norm',
    level: 2,
    className: 'AdaLayerNormZero',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video'],
    mirrors: 'diffusers.models.normalization.AdaLayerNormZero',
    description: 'adaLN-Zero: linear(silu(temb)) -> 6 modulation rows; LayerNorm (no affine) * (1 + scale) + shift, and the gates / MLP modulation returned. AdaLayerNormZeroSingle (3 rows) lives in the same file.',
    init: [
      { name: 'embeddingDim', type: 'int' },
      { name: 'numEmbeddings', type: 'int', optional: true, doc: 'class-label conditioning: not supported (null)' },
      { name: 'normType', type: 'enum', choices: ['layer_norm'], optional: true, default: 'layer_norm' },
      { name: 'bias', type: 'bool', optional: true, default: true },
    ],
    inputs: [
      { name: 'x', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'emb', dtype: 'act', shape: ['B', 'D'], doc: 'the conditioning (temb)' },
    ],
    outputs: [
      { name: 'x', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'gate_msa', dtype: 'act', shape: ['B', 'D'] },
      { name: 'shift_mlp', dtype: 'act', shape: ['B', 'D'] },
      { name: 'scale_mlp', dtype: 'act', shape: ['B', 'D'] },
      { name: 'gate_mlp', dtype: 'act', shape: ['B', 'D'] },
    ],
    imports: ['L1/linear', 'L1/layer_norm'],
    cases: {
      ci: [adaCase('tiny-f32', 'f32', 2, 5, 32), adaCase('tiny-bf16', 'bf16', 1, 7, 48)],
      production: [
        // FLUX.1-dev norm1 over the 4096 image tokens (1024 px) and norm1_context over the 512 text tokens.
        adaCase('flux1-dev-img-1024px', 'bf16', 1, 4096, FLUX1_DEV.innerDim),
        adaCase('flux1-dev-txt-512', 'bf16', 1, 512, FLUX1_DEV.innerDim),
        adaCase('flux1-dev-img-512px', 'bf16', 1, 1024, FLUX1_DEV.innerDim),
      ],
    },
  },
  {
    baseline: AdaLayerNormZero,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.S!, c.dims.D!], c.dtype), randn(ctx, rng, [c.dims.B!, c.dims.D!], c.dtype)],
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x, emb], params) => adaLayerNormZeroReference(x!, emb!, params, 6),
    work: (c) => {
      const { B, S, D } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([6 * D!, D!], it) + 2 * bytesOf([B!, S!, D!], it), flops: 12 * B! * D! * D! + 8 * B! * S! * D! };
    },
  },
);
