import { F, Module, OpScope, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { initNormal, randn } from '../../../common/inputs.js';
import { familiesOf } from '../../families.js';

/**
 * ConvNeXt-V2's Global Response Normalization (HF ConvNextV2GRN, timm GlobalResponseNorm with channels_last) over
 * channels-last maps [N, H, W, C]: Gx = ||x||_2 over H, W per (n, c); Nx = Gx / (mean_c Gx + 1e-6);
 * out = weight * (x * Nx) + bias + x, weight and bias [1, 1, 1, C] (HF's shapes and names).
 */
export class GRN extends Module {
  readonly weight: Tensor;
  readonly bias: Tensor;
  constructor(
    readonly dim: number,
    readonly eps = 1e-6,
  ) {
    super();
    this.weight = this.parameter('weight', [1, 1, 1, dim]);
    this.bias = this.parameter('bias', [1, 1, 1, dim]);
  }

  forward(x: Tensor): Tensor {
    // the norms and the ratio in float32 (float64 for f64), the output rounded once (torch reduces 16-bit in f32 too)
    const s = new OpScope();
    try {
      const wide = x.dtype === 'f64' ? 'f64' : 'f32';
      const xf = x.dtype === wide ? x : s.op('to', [x], { dtype: wide });
      const gx = s.op('sqrt', [s.op('sum', [s.op('square', [xf])], { dim: [1, 2], keepdim: true })]);
      const nx = s.op('div', [gx, s.op('add', [s.op('mean', [gx], { dim: -1, keepdim: true }), this.eps])]);
      // weight * (x * Nx) + bias + x in one pass
      return F.elementwiseChain([x, nx, this.weight, this.bias], {
        steps: [
          { op: 'mul', args: [{ input: 0 }, { input: 1 }] },
          { op: 'mul', args: [{ input: 2 }, { step: 0 }] },
          { op: 'add', args: [{ step: 1 }, { input: 3 }] },
          { op: 'add', args: [{ step: 2 }, { input: 0 }] },
          { op: 'to', args: [{ step: 3 }], attrs: { dtype: x.dtype } },
        ],
      });
    } finally {
      s.keep([]);
    }
  }
}

/** Golden float64 GRN over [N, H, W, C] with weight / bias of C values. */
export function grnReference(x: HostArray, weight: HostArray, bias: HostArray, eps = 1e-6): HostArray {
  const [N, H, W, C] = x.shape as [number, number, number, number];
  const out = hostArray(x.shape);
  const g = new Float64Array(C);
  for (let n = 0; n < N; n++) {
    const base = n * H * W * C;
    g.fill(0);
    for (let p = 0; p < H * W; p++) for (let c = 0; c < C; c++) g[c]! += x.data[base + p * C + c]! ** 2;
    let mean = 0;
    for (let c = 0; c < C; c++) mean += (g[c] = Math.sqrt(g[c]!));
    mean /= C;
    for (let p = 0; p < H * W; p++) {
      for (let c = 0; c < C; c++) {
        const i = base + p * C + c;
        out.data[i] = weight.data[c]! * (x.data[i]! * (g[c]! / (mean + eps))) + bias.data[c]! + x.data[i]!;
      }
    }
  }
  return out;
}

const grn = (name: string, dtype: 'f32' | 'bf16', N: number, H: number, W: number, C: number) => ({ name, dtype, dims: { N, H, W, C }, init: [C] });

export const grnTask = defineTask(
  {
    id: 'L1/grn',
    level: 1,
    className: 'GRN',
    family: familiesOf(['convnextv2']),
    architectures: ['convnextv2'],
    mirrors: 'transformers.models.convnextv2.modeling_convnextv2.ConvNextV2GRN',
    description: "ConvNeXt-V2's Global Response Normalization on channels-last maps: per-channel L2 norm over H, W, divided by its channel mean, scaled, shifted and added back to the input.",
    init: [
      { name: 'dim', type: 'int', doc: 'channels C (4x the block width in ConvNeXt-V2)' },
      { name: 'eps', type: 'float', optional: true, default: 1e-6 },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'H', 'W', 'C'], optional: false, doc: 'channels-last activations (after pwconv1 + GELU)' }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'H', 'W', 'C'], optional: false }],
    tolerance: {},
    cases: {
      ci: [grn('small', 'f32', 2, 5, 6, 24), grn('small-bf16', 'bf16', 1, 7, 7, 64), grn('one-pixel', 'f32', 3, 1, 1, 16)],
      // ConvNeXt-V2-base at 384 x 384: GRN(4 x width) at each stage's resolution (96, 48, 24, 12), batch 32 and 1
      production: [
        grn('convnextv2-base-s0-bs32', 'bf16', 32, 96, 96, 512),
        grn('convnextv2-base-s1-bs32', 'bf16', 32, 48, 48, 1024),
        grn('convnextv2-base-s2-bs32', 'bf16', 32, 24, 24, 2048),
        grn('convnextv2-base-s3-bs32', 'bf16', 32, 12, 12, 4096),
        grn('convnextv2-base-s2-bs1', 'bf16', 1, 24, 24, 2048),
      ],
    },
  },
  {
    baseline: GRN,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.H!, c.dims.W!, c.dims.C!], c.dtype)],
    // HF initialises GRN at zero (the identity); trained weights are not, so the test draws them around 0
    initParameters: (m, _c, rng) => initNormal(m, rng, 0.5),
    reference: ([x], P) => [grnReference(x!, P.get('weight')!, P.get('bias')!)],
    work: (c) => {
      const { N, H, W, C } = c.dims as Record<string, number>;
      const it = c.dtype === 'f32' ? 4 : 2;
      // read x twice (norms, output), write once; ~7 flops an element
      return { bytes: it * 3 * N! * H! * W! * C!, flops: 7 * N! * H! * W! * C! };
    },
  },
);
