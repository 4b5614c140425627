import { F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import type { ReLU } from '../../../layers/activation.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { L2Norm } from '../../../tasks/L1/norm/l2_norm.js';
import { initEncoderParameters } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refBgeM3Heads, refModel } from '../reference.js';
import { TINY_XLMR, bgeM3Production, configOf, encoderCase } from '../L3/encoder-cases.js';
import { PACKED_MODEL_INPUTS, modelInputs, modelWork, type XLMRobertaModel } from '../L3/xlm_roberta_model.js';

/** The three BGE-M3 outputs of a packed batch. */
export interface BgeM3Outputs {
  /** normalize(h[cu_seqlens[b]]) [B, H]: each sequence's CLS row, the dense embedding. */
  readonly dense: Tensor;
  /** relu(sparse_linear(h)) [T]: per-token lexical weights. */
  readonly sparse: Tensor;
  /** normalize(colbert_linear(h)) [T, C]: ColBERT vectors of every token; a sequence's first (CLS) row is not one of its vectors. */
  readonly colbert: Tensor;
}

/**
 * vLLM's BgeM3EmbeddingModel (FlagEmbedding's BGEM3 heads) over XLMRobertaModel on packed tokens: `model`
 * (L3/xlm_roberta_model; its tensors carry no prefix in BAAI/bge-m3's model.safetensors, weights.ts strips it),
 * `sparse_linear` Linear(H, 1) and `colbert_linear` Linear(H, H) (bge-m3 ships them as sparse_linear.pt /
 * colbert_linear.pt). forward(inputIds [T], positions [T], cuSeqlens [B + 1]) -> [dense, sparse, colbert]; `packedHidden`
 * gives last_hidden_state for the runner's other poolings. As vLLM's poolers, the heads run on every token and the
 * caller drops the rows FlagEmbedding leaves out (the CLS row of the ColBERT vectors; special tokens of the sparse ones).
 */
export class BgeM3EmbeddingModel extends Module {
  readonly model: XLMRobertaModel;
  readonly sparseLinear: Linear;
  readonly colbertLinear: Linear;
  readonly relu: ReLU;
  readonly norm: L2Norm;
  constructor(
    readonly config: EncoderConfig,
    readonly colbertDim = config.hiddenSize,
  ) {
    super();
    this.model = this.createModule('model', 'L3/xlm_roberta_model', config);
    this.sparseLinear = this.createModule('sparse_linear', 'L1/linear', config.hiddenSize, 1, true);
    this.colbertLinear = this.createModule('colbert_linear', 'L1/linear', config.hiddenSize, colbertDim, true);
    this.relu = this.createModule('sparse_activation', 'L1/relu');
    this.norm = this.createModule('normalize', 'L1/l2_norm');
  }

  get hiddenSize(): number {
    return this.config.hiddenSize;
  }

  /** last_hidden_state [T, H]. */
  packedHidden(inputIds: Tensor, positions: Tensor, cuSeqlens: Tensor): Tensor {
    return this.model.forward(inputIds, positions, cuSeqlens);
  }

  /** The dense head: each sequence's CLS row (at cu_seqlens[:-1]), normalised [B, H]. */
  dense(h: Tensor, cuSeqlens: Tensor): Tensor {
    const starts = cuSeqlens.narrow(0, 0, cuSeqlens.shape[0]! - 1);
    const cls = F.indexSelect(h, 0, starts);
    starts.dispose();
    const dense = this.norm.forward(cls);
    cls.dispose();
    return dense;
  }

  /** The sparse head: relu(sparse_linear(h)) [T]. */
  sparse(h: Tensor): Tensor {
    const sw = this.sparseLinear.forward(h);
    const flat = sw.view(h.shape[0]!);
    sw.dispose();
    const w = this.relu.forward(flat);
    flat.dispose();
    return w;
  }

  /** The ColBERT head: normalize(colbert_linear(h)) [T, C]. */
  colbert(h: Tensor): Tensor {
    const cv = this.colbertLinear.forward(h);
    const v = this.norm.forward(cv);
    cv.dispose();
    return v;
  }

  /** The three heads on last_hidden_state [T, H] (see BgeM3Outputs). */
  heads(h: Tensor, cuSeqlens: Tensor): BgeM3Outputs {
    return { dense: this.dense(h, cuSeqlens), sparse: this.sparse(h), colbert: this.colbert(h) };
  }

  forward(inputIds: Tensor, positions: Tensor, cuSeqlens: Tensor): Tensor[] {
    const h = this.packedHidden(inputIds, positions, cuSeqlens);
    try {
      const o = this.heads(h, cuSeqlens);
      return [o.dense, o.sparse, o.colbert];
    } finally {
      h.dispose();
    }
  }
}

const bgeCase = (c: ReturnType<typeof encoderCase>) => ({ ...c, dims: { ...c.dims, C: c.dims.H! } });

export const bgeM3Task = defineTask(
  {
    id: 'L4/bge_m3',
    level: 4,
    className: 'BgeM3EmbeddingModel',
    family: [FAMILY],
    architectures: ['bge_m3'],
    mirrors: 'vllm.model_executor.models.roberta.BgeM3EmbeddingModel',
    description: 'BGE-M3: XLM-RoBERTa encoder on packed sequences, then the dense (normalised CLS per sequence), sparse (relu lexical weight per token) and ColBERT (normalised vector per token) heads.',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' },
      { name: 'colbertDim', type: 'int', optional: true, doc: 'colbert_linear output size (default hidden_size)' },
    ],
    inputs: PACKED_MODEL_INPUTS,
    outputs: [
      { name: 'dense', dtype: 'act', shape: ['B', 'H'] },
      { name: 'sparse', dtype: 'act', shape: ['T'] },
      { name: 'colbert', dtype: 'act', shape: ['T', 'C'], doc: 'every token; the CLS rows (cu_seqlens[:-1]) are not ColBERT vectors' },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L3/xlm_roberta_model', 'L1/linear', 'L1/relu', 'L1/l2_norm'],
    cases: {
      ci: [
        bgeCase(encoderCase('tiny-bge-f32', 'f32', TINY_XLMR, [7, 3, 5])),
        bgeCase(encoderCase('tiny-bge-bf16', 'bf16', TINY_XLMR, [4, 6])),
        bgeCase(encoderCase('tiny-bge-len1-max-f32', 'f32', TINY_XLMR, [1, 38])),
      ],
      production: bgeM3Production().map(bgeCase),
    },
  },
  {
    baseline: BgeM3EmbeddingModel,
    makeInputs: modelInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([ids, , cu], params, c) => {
      const cfg = configOf(c);
      const { T, B, H } = c.dims as { T: number; B: number; H: number };
      const inner = new Map([...params].filter(([k]) => k.startsWith('model.')).map(([k, v]) => [k.slice('model.'.length), v]));
      const o = refBgeM3Heads(refModel(ids!.data, cu!.data, inner, cfg), cu!.data, H, params);
      return [hostArray([B, H], o.dense), hostArray([T], o.sparse), hostArray([T, H], o.colbert)];
    },
    work: (c) => {
      const w = modelWork(c);
      const { T, H } = c.dims as { T: number; H: number };
      return { bytes: w.bytes, flops: w.flops + 2 * T * H * (H + 1) };
    },
  },
);
