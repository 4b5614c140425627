import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import type { Embedding } from '../../../layers/embedding.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import { caseLens, initEncoderParameters, packedDims, packedIds, positionsOf } from '../cases.js';
import { BGE_M3, COLBERTV2, tinyEncoderConfig, type EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { residualLayerNorm } from '../fusion.js';
import { refEmbeddings } from '../reference.js';

/**
 * HF BertEmbeddings on packed tokens, as vLLM's BertEmbedding runs it: word_embeddings (L1/embedding) +
 * token_type_embeddings + position_embeddings (nn.Embedding), then LayerNorm (L1/layer_norm); dropout is the identity at
 * inference (the last add and the LayerNorm are one add_layer_norm while the norm is ours). forward(inputIds [T],
 * positions [T], tokenTypeIds? [T]) -> [T, H]: `positions` restart at 0 for every
 * sequence (the runner's); token types default to 0 (HF's buffered zeros: row 0 broadcast, no gather).
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

  /** Where position 0 sits in the position table (BERT: row 0). */
  protected get positionOffset(): number {
    return 0;
  }

  forward(inputIds: Tensor, positions: Tensor, tokenTypeIds: Tensor | null = null): Tensor {
    const words = this.wordEmbeddings.forward(inputIds);
    const types = tokenTypeIds ? this.tokenTypeEmbeddings.forward(tokenTypeIds) : this.tokenTypeEmbeddings.weight.select(0, 0);
    const wt = F.add(words, types); // HF's order: inputs_embeds + token_type_embeddings, then + position_embeddings
    words.dispose();
    types.dispose();
    const rows = this.positionOffset ? F.add(positions, this.positionOffset) : positions;
    const p = this.positionEmbeddings.forward(rows);
    if (rows !== positions) rows.dispose();
    try {
      return residualLayerNorm(this.layerNorm, wt, p);
    } finally {
      wt.dispose();
      p.dispose();
    }
  }
}

/**
 * HF XLMRobertaEmbeddings: BertEmbeddings with RoBERTa's positions, which start at padding_idx + 1 (vLLM's
 * replace_roberta_positions adds padding_idx + 1 to the runner's positions; packed sequences hold no pads, so this is
 * HF's create_position_ids_from_input_ids). A BERT config (robertaPositions false) keeps BERT's positions, so the one
 * task class serves both encoders.
 */
export class XLMRobertaEmbeddings extends BertEmbeddings {
  // explicit, so the class declares its one constructor argument (the task contract reads .length)
  constructor(config: EncoderConfig) {
    super(config);
  }

  protected override get positionOffset(): number {
    return this.config.robertaPositions ? this.config.padTokenId + 1 : 0;
  }
}

const tiny = tinyEncoderConfig();
const TINY_BERT = tinyEncoderConfig({ modelType: 'bert', robertaPositions: false, padTokenId: 0, typeVocabSize: 2, layerNormEps: 1e-12 });
const embCase = (name: string, dtype: 'f32' | 'bf16', config: EncoderConfig, lens: number[], tokenTypes = false) => ({
  name, dtype, dims: packedDims(lens, { H: config.hiddenSize }), init: [config], options: { lens, tokenTypes },
});
const spread = (B: number, lo: number, span: number) => Array.from({ length: B }, (_, i) => lo + ((i * 97) % span));

export const encoderEmbeddingsTask = defineTask(
  {
    id: 'L2/encoder_embeddings',
    level: 2,
    className: 'XLMRobertaEmbeddings',
    family: [FAMILY],
    architectures: ['bge_m3', 'colbertv2'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaEmbeddings',
    description: 'Encoder embeddings on packed tokens: word + token type + position (restarting per sequence; RoBERTa from padding_idx + 1), LayerNorm.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['T'], doc: 'the sequences\' tokens back to back, no padding' },
      { name: 'positions', dtype: 'i64', shape: ['T'], doc: '0..n-1 within each sequence (vLLM\'s positions)' },
      { name: 'tokenTypeIds', dtype: 'i64', shape: ['T'], optional: true, doc: 'default 0' },
    ],
    outputs: [{ name: 'embeddings', dtype: 'act', shape: ['T', 'H'] }],
    imports: ['L1/embedding', 'L1/layer_norm'],
    cases: {
      ci: [
        embCase('tiny-xlmr-f32', 'f32', tiny, [7, 3, 5]),
        embCase('tiny-xlmr-bf16', 'bf16', tiny, [4, 6]),
        embCase('tiny-xlmr-len1-f32', 'f32', tiny, [1, 9, 1]),
        embCase('tiny-bert-types-f32', 'f32', TINY_BERT, [6, 2], true),
      ],
      production: [
        embCase('bge-m3-64-docs-u32-512', 'bf16', BGE_M3, spread(64, 32, 481)),
        embCase('bge-m3-8192', 'bf16', BGE_M3, [8192]),
        embCase('colbertv2-32-docs-180', 'bf16', COLBERTV2, Array.from({ length: 32 }, (_, i) => 60 + ((i * 37) % 121))),
      ],
    },
  },
  {
    baseline: XLMRobertaEmbeddings,
    makeInputs: (c, ctx, rng) => {
      const cfg = c.init[0] as EncoderConfig;
      const lens = caseLens(c);
      const ids = packedIds(rng, lens, cfg);
      const types = (c.options as { tokenTypes?: boolean }).tokenTypes ? ids.map(() => rng.int(0, cfg.typeVocabSize)) : null;
      return [fromInts(ctx, ids, [ids.length], 'i64'), fromInts(ctx, positionsOf(lens), [ids.length], 'i64'), types ? fromInts(ctx, types, [ids.length], 'i64') : null];
    },
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([ids, positions, types], params, c) => {
      const cfg = c.init[0] as EncoderConfig;
      const offset = cfg.robertaPositions ? cfg.padTokenId + 1 : 0;
      const rows = Array.from(positions!.data, (p) => p + offset);
      return [hostArray([ids!.data.length, cfg.hiddenSize], refEmbeddings(ids!.data, rows, params, cfg, '', types?.data))];
    },
    work: (c) => {
      const { T, H } = c.dims as { T: number; H: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: 4 * bytesOf([T, H], it) + bytesOf([2 * T], 8), flops: 10 * T * H };
    },
  },
);
