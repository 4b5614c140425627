import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import type { Embedding } from '../../../layers/embedding.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import { caseLens, initEncoderParameters, paddedIds } from '../cases.js';
import { BGE_M3, COLBERTV2, tinyEncoderConfig, type EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refEmbeddings } from '../reference.js';

/**
 * HF BertEmbeddings: word_embeddings (L1/embedding) + position_embeddings + token_type_embeddings (nn.Embedding), then
 * LayerNorm (L1/layer_norm); dropout is the identity at inference. forward(inputIds [B, S], tokenTypeIds? [B, S])
 * -> [B, S, H]; token types default to 0 (HF's buffered zeros). Positions are 0..S-1 per row.
 */
export class BertEmbeddings extends Module {
  readonly wordEmbeddings: VocabParallelEmbedding;
  readonly positionEmbeddings: Embedding;
  readonly tokenTypeEmbeddings: Embedding;
  readonly layerNorm: LayerNorm;
  constructor(readonly config: EncoderConfig) {
    super();
    const H = config.hiddenSize;
    this.wordEmbeddings = this.createModule('word_embeddings', 'L1/embedding', config.vocabSize, H);
    this.positionEmbeddings = this.registerModule('position_embeddings', createLayer('Embedding', config.maxPositionEmbeddings, H));
    this.tokenTypeEmbeddings = this.registerModule('token_type_embeddings', createLayer('Embedding', config.typeVocabSize, H));
    this.layerNorm = this.registerModule('LayerNorm', createLayer('LayerNorm', H, config.layerNormEps));
  }

  /** Position ids [B, S] (i64) of a padded batch. */
  protected positionIds(inputIds: Tensor): Tensor {
    const [B, S] = inputIds.shape as [number, number];
    const row = fromInts(this.ctx, Array.from({ length: S }, (_, s) => s), [1, S], 'i64');
    const pos = F.contiguous(row.expand(B, S));
    row.dispose();
    return pos;
  }

  forward(inputIds: Tensor, tokenTypeIds: Tensor | null = null): Tensor {
    const [B, S] = inputIds.shape as [number, number];
    const flat = inputIds.reshape(B * S);
    const words = this.wordEmbeddings.forward(flat);
    flat.dispose();
    const pos = this.positionIds(inputIds);
    const posFlat = pos.reshape(B * S);
    const p = this.positionEmbeddings.forward(posFlat);
    posFlat.dispose();
    pos.dispose();
    const types = tokenTypeIds ? tokenTypeIds.reshape(B * S) : fromInts(this.ctx, new Array<number>(B * S).fill(0), [B * S], 'i64');
    const t = this.tokenTypeEmbeddings.forward(types);
    types.dispose();
    const wp = F.add(words, p);
    words.dispose();
    p.dispose();
    const sum = F.add(wp, t);
    wp.dispose();
    t.dispose();
    const y = this.layerNorm.forward(sum);
    sum.dispose();
    const out = y.reshape(B, S, this.config.hiddenSize);
    y.dispose();
    return out;
  }
}

/**
 * HF XLMRobertaEmbeddings: BertEmbeddings with RoBERTa's positions: padding_idx + 1 + the running count of non-pad
 * tokens, padding_idx at pads (create_position_ids_from_input_ids), computed on the device from the ids. A BERT
 * config (robertaPositions false) keeps BERT's positions, so the one task class serves both encoders.
 */
export class XLMRobertaEmbeddings extends BertEmbeddings {
  // explicit, so the class declares its one constructor argument (the task contract reads .length)
  constructor(config: EncoderConfig) {
    super(config);
  }

  protected override positionIds(inputIds: Tensor): Tensor {
    if (!this.config.robertaPositions) return super.positionIds(inputIds);
    const pad = this.config.padTokenId;
    const notPad = F.ne(inputIds, pad);
    const m = F.to(notPad, 'i64');
    notPad.dispose();
    const count = F.cumsum(m, { dim: 1 });
    const masked = F.mul(count, m);
    count.dispose();
    m.dispose();
    const pos = F.add(masked, pad);
    masked.dispose();
    return pos;
  }
}

const tiny = tinyEncoderConfig();
const embCase = (name: string, dtype: 'f32' | 'bf16', config: EncoderConfig, lens: number[]) => ({
  name, dtype, dims: { B: lens.length, S: Math.max(...lens), H: config.hiddenSize }, init: [config], options: { lens },
});

export const encoderEmbeddingsTask = defineTask(
  {
    id: 'L2/encoder_embeddings',
    level: 2,
    className: 'XLMRobertaEmbeddings',
    family: [FAMILY],
    architectures: ['bge_m3', 'colbertv2'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaEmbeddings',
    description: 'Encoder embeddings: word + position (RoBERTa: from padding_idx + 1 over non-pad tokens; BERT: 0..S-1) + token type, LayerNorm.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['B', 'S'], doc: 'padded with pad_token_id' },
      { name: 'tokenTypeIds', dtype: 'i64', shape: ['B', 'S'], optional: true },
    ],
    outputs: [{ name: 'embeddings', dtype: 'act', shape: ['B', 'S', 'H'] }],
    imports: ['L1/embedding', 'L1/layer_norm'],
    cases: {
      ci: [
        embCase('tiny-xlmr-f32', 'f32', tiny, [7, 3, 5]),
        embCase('tiny-xlmr-bf16', 'bf16', tiny, [4, 6]),
        embCase('tiny-bert-f32', 'f32', tinyEncoderConfig({ modelType: 'bert', robertaPositions: false, padTokenId: 0, typeVocabSize: 2, layerNormEps: 1e-12 }), [6, 2]),
      ],
      production: [
        embCase('bge-m3-b64-512', 'bf16', BGE_M3, Array.from({ length: 64 }, (_, i) => 32 + ((i * 97) % 481))),
        embCase('bge-m3-b1-8192', 'bf16', BGE_M3, [8192]),
        embCase('colbertv2-b32-180', 'bf16', COLBERTV2, Array.from({ length: 32 }, (_, i) => 60 + ((i * 37) % 121))),
      ],
    },
  },
  {
    baseline: XLMRobertaEmbeddings,
    makeInputs: (c, ctx, rng) => {
      const cfg = c.init[0] as EncoderConfig;
      const { ids, S } = paddedIds(rng, caseLens(c), cfg);
      return [fromInts(ctx, ids, [caseLens(c).length, S], 'i64'), null];
    },
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([ids], params, c) => {
      const cfg = c.init[0] as EncoderConfig;
      const [B, S] = ids!.shape as [number, number];
      return [hostArray([B, S, cfg.hiddenSize], refEmbeddings(ids!.data, B, S, params, cfg))];
    },
    work: (c) => {
      const { B, S, H } = c.dims as { B: number; S: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: 4 * bytesOf([B * S, H], it) + bytesOf([B * S], 8), flops: 10 * B * S * H };
    },
  },
);
