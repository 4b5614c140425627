import { DTYPE_INFO, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { FlashAttnVarlen } from '../../../tasks/L1/attention/flash_attn_varlen.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { caseLens, cuSeqlensTensor, initEncoderParameters, packedDims } from '../cases.js';
import { BGE_M3, COLBERTV2, tinyEncoderConfig, type EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { residualLayerNorm } from '../fusion.js';
import { refAttention } from '../reference.js';

/**
 * HF XLMRobertaAttention / BertAttention as one module (the tsv's EncoderAttention), on packed tokens as vLLM's
 * BertAttention runs it: self.query / key / value (L1/linear with bias), L1/flash_attn_varlen over the heads
 * (bidirectional, each sequence attending only to itself through cu_seqlens: no padding, no mask), then output.dense
 * and output.LayerNorm(out + hidden) (one add_layer_norm while the LayerNorm is ours: fusion.ts). Parameter paths are
 * HF's (`self.query.weight`, `output.LayerNorm.bias`).
 * forward(hiddenStates [T, H], cuSeqlens [B + 1] i32) -> [T, H].
 */
export class EncoderAttention extends Module {
  readonly query: Linear;
  readonly key: Linear;
  readonly value: Linear;
  readonly dense: Linear;
  readonly layerNorm: LayerNorm;
  readonly attn: FlashAttnVarlen;
  readonly headDim: number;
  constructor(
    readonly hiddenSize: number,
    readonly numHeads: number,
    readonly layerNormEps = 1e-5,
  ) {
    super();
    if (hiddenSize % numHeads !== 0) throw new RangeError(`EncoderAttention: hidden size ${hiddenSize} is not a multiple of ${numHeads} heads`);
    this.headDim = hiddenSize / numHeads;
    this.query = this.createModule('self.query', 'L1/linear', hiddenSize, hiddenSize, true);
    this.key = this.createModule('self.key', 'L1/linear', hiddenSize, hiddenSize, true);
    this.value = this.createModule('self.value', 'L1/linear', hiddenSize, hiddenSize, true);
    this.dense = this.createModule('output.dense', 'L1/linear', hiddenSize, hiddenSize, true);
    this.layerNorm = this.registerModule('output.LayerNorm', createLayer('LayerNorm', hiddenSize, layerNormEps));
    // softmax scale 1 / sqrt(d), non-causal; no parameters: the checkpoint is unchanged
    this.attn = this.createModule('attn', 'L1/flash_attn_varlen', null, false);
  }

  forward(hiddenStates: Tensor, cuSeqlens: Tensor): Tensor {
    const T = hiddenStates.shape[0]!;
    // [T, H] -> [T, nH, d]: a view, the layout flash_attn_varlen_func takes
    const proj = (m: Linear) => {
      const y = m.forward(hiddenStates);
      const h = y.view(T, this.numHeads, this.headDim);
      y.dispose();
      return h;
    };
    const q = proj(this.query);
    const k = proj(this.key);
    const v = proj(this.value);
    const ctx = this.attn.forward(q, k, v, cuSeqlens, cuSeqlens);
    for (const t of [q, k, v]) t.dispose();
    const merged = ctx.view(T, this.hiddenSize);
    ctx.dispose();
    const o = this.dense.forward(merged);
    merged.dispose();
    try {
      return residualLayerNorm(this.layerNorm, o, hiddenStates);
    } finally {
      o.dispose();
    }
  }
}

const attnCase = (name: string, dtype: 'f32' | 'bf16', cfg: EncoderConfig, lens: number[]) => ({
  name, dtype, dims: packedDims(lens, { H: cfg.hiddenSize, NH: cfg.numAttentionHeads }), init: [cfg.hiddenSize, cfg.numAttentionHeads, cfg.layerNormEps], options: { lens },
});
const tiny = tinyEncoderConfig();
const prodLens = (B: number, lo: number, span: number) => Array.from({ length: B }, (_, i) => lo + ((i * 97) % span));

export const encoderAttentionTask = defineTask(
  {
    id: 'L2/encoder_attention',
    level: 2,
    className: 'EncoderAttention',
    family: [FAMILY],
    architectures: ['bge_m3', 'colbertv2'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaAttention',
    description: 'Bidirectional encoder self-attention on packed sequences (cu_seqlens, no padding): q/k/v projections, varlen attention, output projection, residual and LayerNorm.',
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'numHeads', type: 'int' },
      { name: 'layerNormEps', type: 'float', optional: true, default: 1e-5 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'the sequences\' tokens back to back' },
      { name: 'cuSeqlens', dtype: 'i32', shape: ['B1'], doc: 'offsets of the sequences [B + 1] (0, then running lengths)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    imports: ['L1/linear', 'L1/layer_norm', 'L1/flash_attn_varlen'],
    cases: {
      ci: [
        attnCase('tiny-f32', 'f32', tiny, [7, 3, 5]),
        attnCase('tiny-bf16', 'bf16', tiny, [6, 2]),
        attnCase('tiny-len1-f32', 'f32', tiny, [1, 8, 1, 4]),
        attnCase('tiny-one-seq-f32', 'f32', tinyEncoderConfig({ hiddenSize: 48, numAttentionHeads: 3 }), [9]),
      ],
      production: [
        attnCase('bge-m3-64-docs-u32-512', 'bf16', BGE_M3, prodLens(64, 32, 481)),
        attnCase('bge-m3-8192', 'bf16', BGE_M3, [8192]),
        attnCase('colbertv2-32-docs-180', 'bf16', COLBERTV2, prodLens(32, 60, 121)),
      ],
    },
  },
  {
    baseline: EncoderAttention,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype), cuSeqlensTensor(ctx, caseLens(c))],
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x, cu], params, c) => {
      const [hiddenSize, numAttentionHeads, layerNormEps] = c.init as [number, number, number];
      const cfg = tinyEncoderConfig({ hiddenSize, numAttentionHeads, layerNormEps: layerNormEps ?? 1e-5 });
      return [hostArray(x!.shape, refAttention(x!.data, cu!.data, params, cfg))];
    },
    work: (c) => {
      const { T, H } = c.dims as { T: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      const pairs = caseLens(c).reduce((a, n) => a + n * n, 0);
      return { bytes: bytesOf([4 * H, H], it) + 10 * bytesOf([T, H], it), flops: 8 * T * H * H + 4 * pairs * H };
    },
  },
);
