import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { DenseAttention } from '../../../tasks/L1/attention/dense_attention.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { caseLens, initEncoderParameters, maskTensor } from '../cases.js';
import { BGE_M3, COLBERTV2, tinyEncoderConfig, type EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refAttention } from '../reference.js';

/**
 * HF XLMRobertaAttention / BertAttention as one module (the tsv's EncoderAttention): self.query / key / value
 * (L1/linear with bias), L1/dense_attention (SDPA) over the heads with the padding mask (a key of mask 0 is
 * never attended; pad query rows still see the row's valid keys, as HF's extended mask), then output.dense and
 * output.LayerNorm(out + hidden). Parameter paths are HF's (`self.query.weight`, `output.LayerNorm.bias`).
 * forward(hiddenStates [B, S, H], attentionMask [B, S] bool, true = token) -> [B, S, H].
 */
export class EncoderAttention extends Module {
  readonly query: Linear;
  readonly key: Linear;
  readonly value: Linear;
  readonly dense: Linear;
  readonly layerNorm: LayerNorm;
  readonly attn: DenseAttention;
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
    this.attn = this.createModule('attn', 'L1/dense_attention'); // no parameters: the checkpoint is unchanged
  }

  /** [B, S, H] -> [B, nH, S, d] contiguous (the layout every SDPA kernel takes). */
  private heads(x: Tensor, B: number, S: number): Tensor {
    const v = x.view(B, S, this.numHeads, this.headDim);
    const p = v.permute(0, 2, 1, 3);
    const c = F.contiguous(p);
    p.dispose();
    v.dispose();
    return c;
  }

  forward(hiddenStates: Tensor, attentionMask: Tensor): Tensor {
    const [B, S] = hiddenStates.shape as [number, number, number];
    const proj = (m: Linear) => {
      const y = m.forward(hiddenStates);
      const h = this.heads(y, B, S);
      y.dispose();
      return h;
    };
    const q = proj(this.query);
    const k = proj(this.key);
    const v = proj(this.value);
    const mask = attentionMask.view(B, 1, 1, S);
    const ctx = this.attn.forward(q, k, v, mask);
    for (const t of [q, k, v, mask]) t.dispose();
    const perm = ctx.permute(0, 2, 1, 3);
    const merged = perm.reshape(B, S, this.hiddenSize);
    perm.dispose();
    ctx.dispose();
    const o = this.dense.forward(merged);
    merged.dispose();
    const sum = F.add(o, hiddenStates);
    o.dispose();
    const y = this.layerNorm.forward(sum);
    sum.dispose();
    return y;
  }
}

const attnCase = (name: string, dtype: 'f32' | 'bf16', cfg: EncoderConfig, lens: number[]) => ({
  name, dtype, dims: { B: lens.length, S: Math.max(...lens), H: cfg.hiddenSize, NH: cfg.numAttentionHeads }, init: [cfg.hiddenSize, cfg.numAttentionHeads, cfg.layerNormEps], options: { lens },
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
    description: 'Bidirectional encoder self-attention over a padded batch: q/k/v projections, SDPA with the padding mask, output projection, residual and LayerNorm.',
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'numHeads', type: 'int' },
      { name: 'layerNormEps', type: 'float', optional: true, default: 1e-5 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'H'] },
      { name: 'attentionMask', dtype: 'bool', shape: ['B', 'S'], doc: 'true where a token is (keys with false are never attended)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'S', 'H'] }],
    imports: ['L1/linear', 'L1/layer_norm', 'L1/dense_attention'],
    cases: {
      ci: [
        attnCase('tiny-f32', 'f32', tiny, [7, 3, 5]),
        attnCase('tiny-bf16', 'bf16', tiny, [6, 2]),
        attnCase('tiny-one-seq-f32', 'f32', tinyEncoderConfig({ hiddenSize: 48, numAttentionHeads: 3 }), [9]),
      ],
      production: [
        attnCase('bge-m3-b64-u32-512', 'bf16', BGE_M3, prodLens(64, 32, 481)),
        attnCase('bge-m3-b1-8192', 'bf16', BGE_M3, [8192]),
        attnCase('colbertv2-b32-180', 'bf16', COLBERTV2, prodLens(32, 60, 121)),
      ],
    },
  },
  {
    baseline: EncoderAttention,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.S!, c.dims.H!], c.dtype), maskTensor(ctx, caseLens(c), 'bool')],
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x, mask], params, c) => {
      const [hiddenSize, numAttentionHeads, layerNormEps] = c.init as [number, number, number];
      const cfg = tinyEncoderConfig({ hiddenSize, numAttentionHeads, layerNormEps: layerNormEps ?? 1e-5 });
      const [B, S] = x!.shape as [number, number];
      return [hostArray(x!.shape, refAttention(x!.data, mask!.data, B, S, params, cfg))];
    },
    work: (c) => {
      const { B, S, H } = c.dims as { B: number; S: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([4 * H, H], it) + 10 * bytesOf([B * S, H], it), flops: 8 * B * S * H * H + 4 * B * S * S * H };
    },
  },
);
