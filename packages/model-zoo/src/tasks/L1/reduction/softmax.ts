import { DTYPE_INFO, Module, defineTask, hostArray, normalizeDim, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { familiesOf } from '../../families.js';

const SOFTMAX_ARCHITECTURES = ['llama', 'qwen2', 'mistral', 'mixtral', 'flux', 'hunyuan_video', 'openfold3', 'rtdetrv2', 'swinv2', 'ttt_e2e', 'yolov10'];

/**
 * torch.nn.Softmax(dim) as the logits processor / sampler (probabilities over the vocabulary) and eager
 * attention (probabilities over keys) use it: accumulated in float32 or wider, result in x's dtype.
 */
export class Softmax extends Module {
  constructor(readonly dim = -1) {
    super();
    if (!Number.isInteger(dim)) throw new RangeError(`Softmax: dim must be an integer, got ${dim}`);
  }

  forward(x: Tensor): Tensor {
    return this.ctx.backend.ops.softmax(x, this.dim);
  }
}

/** Golden float64 softmax over one dim of a contiguous host array (max-subtracted). */
export function softmaxReference(x: HostArray, dim: number): HostArray {
  const rank = x.shape.length;
  const d = normalizeDim(dim, rank);
  const size = x.shape[d]!;
  const inner = x.shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const outer = x.shape.slice(0, d).reduce((a, b) => a * b, 1);
  const out = hostArray(x.shape);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const base = o * size * inner + i;
      let max = -Infinity;
      for (let k = 0; k < size; k++) max = Math.max(max, x.data[base + k * inner]!);
      let sum = 0;
      for (let k = 0; k < size; k++) {
        const e = Math.exp(x.data[base + k * inner]! - max);
        out.data[base + k * inner] = e;
        sum += e;
      }
      for (let k = 0; k < size; k++) out.data[base + k * inner]! /= sum;
    }
  }
  return out;
}

const llama = (name: string, B: number, V: number) => ({ name: `llama3-8b-${name}`, dtype: 'bf16' as const, dims: { B, V }, init: [-1] });

export const softmaxTask = defineTask(
  {
    id: 'L1/softmax',
    level: 1,
    className: 'Softmax',
    // every family whose models use it (the TSV's shared(5 categories)), not only the LLMs'
    family: familiesOf(SOFTMAX_ARCHITECTURES),
    architectures: [...SOFTMAX_ARCHITECTURES],
    mirrors: 'torch.nn.Softmax',
    description: 'Softmax over one dim (the vocabulary for sampling probabilities, the keys for eager attention), accumulated in float32 or wider.',
    init: [{ name: 'dim', type: 'int', optional: true, default: -1 }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['B', 'V'], doc: 'logits rows (or attention scores, batch*heads*queries rows)' }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['B', 'V'] }],
    cases: {
      ci: [
        { name: 'small', dtype: 'f32', dims: { B: 5, V: 257 }, init: [-1] },
        { name: 'small-dim0', dtype: 'f32', dims: { B: 33, V: 6 }, init: [0] },
        { name: 'small-bf16', dtype: 'bf16', dims: { B: 4, V: 500 }, init: [-1], options: { scale: 8 } },
      ],
      production: [
        llama('logits-decode-1', 1, 128256),
        llama('logits-decode-32', 32, 128256),
        llama('logits-decode-256', 256, 128256),
        // eager attention probabilities: 32 sequences x 32 heads decoding against 4096 keys.
        llama('attn-scores-decode', 1024, 4096),
      ],
    },
  },
  {
    baseline: Softmax,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.V!], c.dtype, (c.options.scale as number | undefined) ?? 3)],
    reference: ([x], _params, c) => [softmaxReference(x!, (c.init[0] as number | undefined) ?? -1)],
    work: (c) => {
      const { B, V } = c.dims as { B: number; V: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      // read and write [B, V]; per element: max compare, subtract, exp, sum add, divide.
      return { bytes: 2 * bytesOf([B, V], it), flops: 5 * B * V };
    },
  },
);
