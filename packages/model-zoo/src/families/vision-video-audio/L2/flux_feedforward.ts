import { DTYPE_INFO, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { GELU } from '../../../layers/activation.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { FLUX1_DEV } from '../flux-config.js';
import { geluTanh, linear, param } from '../host-math.js';
import { geluProjection } from './gelu-projection.js';

/**
 * diffusers' / vllm-omni's FeedForward(dim, dim_out, mult=4, activation_fn='gelu-approximate'): net.0.proj (Linear dim
 * -> inner, then GELU tanh), net.2 (Linear inner -> dim_out); net.1 is the dropout slot (no parameters).
 * forward(hiddenStates [..., dim]) -> [..., dim_out]. net.0 and its GELU are one linear with the gelu_tanh epilogue while
 * both are ours (gelu-projection.ts).
 */
export class FeedForward extends Module {
  readonly proj: Linear;
  readonly act: GELU;
  readonly out: Linear;
  constructor(
    readonly dim: number,
    dimOut: number | null = null,
    mult = 4,
    activationFn = 'gelu-approximate',
    innerDim: number | null = null,
    bias = true,
  ) {
    super();
    if (activationFn !== 'gelu-approximate') throw new RangeError(`FeedForward: activation_fn '${activationFn}' is not supported (gelu-approximate, as vllm-omni)`);
    const inner = innerDim ?? Math.trunc(dim * mult);
    this.proj = this.createModule('net.0.proj', 'L1/linear', dim, inner, bias);
    this.act = this.registerModule('act_fn', createLayer('GELU', 'tanh'));
    this.out = this.createModule('net.2', 'L1/linear', inner, dimOut ?? dim, bias);
  }

  forward(hiddenStates: Tensor): Tensor {
    const a = geluProjection(this.proj, this.act, hiddenStates);
    const y = this.out.forward(a);
    a.dispose();
    return y;
  }
}

/** Golden float64 FeedForward over rows of x [..., dim]. */
export function feedForwardReference(x: HostArray, params: ReadonlyMap<string, HostArray>): HostArray {
  const w1 = param(params, 'net.0.proj.weight');
  const w2 = param(params, 'net.2.weight');
  const rows = x.data.length / w1.shape[1]!;
  const h = linear(x.data, rows, w1, params.get('net.0.proj.bias') ?? null).map(geluTanh);
  return hostArray([...x.shape.slice(0, -1), w2.shape[0]!], linear(h, rows, w2, params.get('net.2.bias') ?? null));
}

const ffCase = (name: string, dtype: 'f32' | 'bf16', B: number, S: number, D: number) => ({ name, dtype, dims: { B, S, D }, init: [D, D] });

export const fluxFeedforwardTask = defineTask(
  {
    id: 'L2/flux_feedforward',
    level: 2,
    className: 'FeedForward',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video'],
    mirrors: 'vllm_omni.diffusion.models.flux.flux_transformer.FeedForward',
    description: 'The FLUX double-stream MLP: Linear(D, 4D), GELU (tanh), Linear(4D, D).',
    init: [
      { name: 'dim', type: 'int' },
      { name: 'dimOut', type: 'int', optional: true },
      { name: 'mult', type: 'float', optional: true, default: 4 },
      { name: 'activationFn', type: 'enum', choices: ['gelu-approximate'], optional: true, default: 'gelu-approximate' },
      { name: 'innerDim', type: 'int', optional: true },
      { name: 'bias', type: 'bool', optional: true, default: true },
    ],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'S', 'D'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 2e-2 } },
    imports: ['L1/linear', 'L1/gelu'],
    cases: {
      ci: [ffCase('tiny-f32', 'f32', 2, 5, 32), ffCase('tiny-bf16', 'bf16', 1, 7, 48)],
      production: [
        // ff on the 4096 image tokens (1024 px), ff_context on the 512 text tokens, and 512 px's 1024 image tokens.
        ffCase('flux1-dev-img-1024px', 'bf16', 1, 4096, FLUX1_DEV.innerDim),
        ffCase('flux1-dev-txt-512', 'bf16', 1, 512, FLUX1_DEV.innerDim),
        ffCase('flux1-dev-img-512px', 'bf16', 1, 1024, FLUX1_DEV.innerDim),
      ],
    },
  },
  {
    baseline: FeedForward,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.S!, c.dims.D!], c.dtype)],
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x], params) => [feedForwardReference(x!, params)],
    work: (c) => {
      const { B, S, D } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([8 * D!, D!], it) + 2 * bytesOf([B!, S!, D!], it) + 2 * bytesOf([B!, S!, 4 * D!], it), flops: 16 * B! * S! * D! * D! };
    },
  },
);
