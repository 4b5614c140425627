import { F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import type { ReLU } from '../../../layers/activation.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { L2Norm } from '../../../tasks/L1/norm/l2_norm.js';
import { initEncoderParameters } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refBgeM3Heads, refModel } from '../reference.js';
import { TINY_XLMR, bgeM3Production, configOf, encoderCase } from '../L3/encoder-cases.js';
import { modelInputs, modelWork, type XLMRobertaModel } from '../L3/xlm_roberta_model.js';

/** The three BGE-M3 outputs of a padded batch. */
export interface BgeM3Outputs {
  /** normalize(h[:, 0]) [B, H]: the dense (CLS) embedding. */
  readonly dense: Tensor;
  /** relu(sparse_linear(h)) [B, S], zero at pads: per-token lexical weights. */
  readonly sparse: Tensor;
  /** normalize(colbert_linear(h[:, 1:]) * mask[:, 1:]) [B, S - 1, C]: ColBERT multi-vectors (zero rows at pads). */
  readonly colbert: Tensor;
}

/**
 * vLLM's BgeM3EmbeddingModel (FlagEmbedding's BGEM3 heads) over XLMRobertaModel: `model` (L3/xlm_roberta_model; its
 * tensors carry no prefix in BAAI/bge-m3's model.safetensors, weights.ts strips it), `sparse_linear` Linear(H, 1) and
 * `colbert_linear` Linear(H, H) (bge-m3 ships them as sparse_linear.pt / colbert_linear.pt). forward(inputIds [B, S],
 * attentionMask [B, S]) -> [dense, sparse, colbert]; `hidden` gives last_hidden_state for the runner's other poolings.
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

  /** last_hidden_state [B, S, H]. */
  hidden(inputIds: Tensor, attentionMask: Tensor): Tensor {
    return this.model.forward(inputIds, attentionMask);
  }

  /** The three heads on last_hidden_state (see BgeM3Outputs). */
  heads(h: Tensor, attentionMask: Tensor): BgeM3Outputs {
    const [B, S, H] = h.shape as [number, number, number];
    const maskF = F.to(attentionMask, h.dtype);
    const cls = h.select(1, 0);
    const dense = this.norm.forward(cls);
    cls.dispose();
    const sw = this.sparseLinear.forward(h);
    const swFlat = sw.view(B, S);
    const relu = this.relu.forward(swFlat);
    const sparse = F.mul(relu, maskF);
    for (const t of [relu, swFlat, sw]) t.dispose();
    const rest = h.narrow(1, 1, S - 1);
    const restC = F.contiguous(rest);
    rest.dispose();
    const cv = this.colbertLinear.forward(restC);
    restC.dispose();
    const m = maskF.narrow(1, 1, S - 1);
    const mu = m.unsqueeze(2);
    const masked = F.mul(cv, mu);
    for (const t of [mu, m, cv]) t.dispose();
    const colbert = this.norm.forward(masked);
    masked.dispose();
    maskF.dispose();
    void H;
    return { dense, sparse, colbert };
  }

  forward(inputIds: Tensor, attentionMask: Tensor): Tensor[] {
    const h = this.hidden(inputIds, attentionMask);
    try {
      const o = this.heads(h, attentionMask);
      return [o.dense, o.sparse, o.colbert];
    } finally {
      h.dispose();
    }
  }
}

export const bgeM3Task = defineTask(
  {
    id: 'L4/bge_m3',
    level: 4,
    className: 'BgeM3EmbeddingModel',
    family: [FAMILY],
    architectures: ['bge_m3'],
    mirrors: 'vllm.model_executor.models.roberta.BgeM3EmbeddingModel',
    description: 'BGE-M3: XLM-RoBERTa encoder over a padded batch, then the dense (normalised CLS), sparse (relu lexical weights) and ColBERT (normalised multi-vector) heads.',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed encoder config (EncoderConfig)' },
      { name: 'colbertDim', type: 'int', optional: true, doc: 'colbert_linear output size (default hidden_size)' },
    ],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['B', 'S'] },
      { name: 'attentionMask', dtype: 'i64', shape: ['B', 'S'], doc: '1 = token, 0 = pad' },
    ],
    outputs: [
      { name: 'dense', dtype: 'act', shape: ['B', 'H'] },
      { name: 'sparse', dtype: 'act', shape: ['B', 'S'] },
      { name: 'colbert', dtype: 'act', shape: ['B', 'S1', 'H'], doc: 'S1 = S - 1 (the CLS token has no vector)' },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L3/xlm_roberta_model', 'L1/linear', 'L1/relu', 'L1/l2_norm'],
    cases: {
      ci: [
        { ...encoderCase('tiny-bge-f32', 'f32', TINY_XLMR, [7, 3, 5]), dims: { B: 3, S: 7, S1: 6, H: TINY_XLMR.hiddenSize } },
        { ...encoderCase('tiny-bge-bf16', 'bf16', TINY_XLMR, [4, 6]), dims: { B: 2, S: 6, S1: 5, H: TINY_XLMR.hiddenSize } },
      ],
      production: bgeM3Production().map((c) => ({ ...c, dims: { ...c.dims, S1: c.dims.S - 1 } })),
    },
  },
  {
    baseline: BgeM3EmbeddingModel,
    makeInputs: modelInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([ids, mask], params, c) => {
      const [B, S] = ids!.shape as [number, number];
      const cfg = configOf(c);
      const H = cfg.hiddenSize;
      const inner = new Map([...params].filter(([k]) => k.startsWith('model.')).map(([k, v]) => [k.slice('model.'.length), v]));
      const h = refModel(ids!.data, mask!.data, B, S, inner, cfg);
      const o = refBgeM3Heads(h, mask!.data, B, S, H, params);
      return [hostArray([B, H], o.dense), hostArray([B, S], o.sparse), hostArray([B, S - 1, H], o.colbert)];
    },
    work: (c) => {
      const w = modelWork(c);
      const { B, S, H } = c.dims as { B: number; S: number; H: number };
      return { bytes: w.bytes, flops: w.flops + 2 * B * S * H * (H + 1) };
    },
  },
);
