import { F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { L2Norm } from '../../../tasks/L1/norm/l2_norm.js';
import { initEncoderParameters } from '../cases.js';
import type { EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { ColBERTv2TokenMask } from '../L2/colbertv2_ops.js';
import { refLinear, refModel, refNormalizeRows } from '../reference.js';
import type { BertModel } from '../L3/bert.js';
import { TINY_BERT, colbertProduction, configOf, encoderCase } from '../L3/encoder-cases.js';
import { PACKED_MODEL_INPUTS, modelInputs, modelWork } from '../L3/xlm_roberta_model.js';

/**
 * ColBERTv2 (colbert-ir/colbertv2.0, HF_ColBERT) on packed tokens: `bert` (L3/bert_model, no pooler), `linear`
 * Linear(H, dim, bias=False) (the checkpoint's names as they are), then per token: zero the tokens ColBERTv2TokenMask
 * drops (the pad token, and the skiplist's punctuation for documents), L2-normalise (L1/l2_norm).
 * forward(inputIds [T], positions [T], cuSeqlens [B + 1]) -> token vectors [T, dim] (zero rows where dropped), as
 * ColBERT.doc(keep_dims=True) / ColBERT.query without the padding.
 */
export class ColBERTModel extends Module {
  readonly bert: BertModel;
  readonly linear: Linear;
  readonly norm: L2Norm;
  readonly tokenMask: ColBERTv2TokenMask;
  constructor(
    readonly config: EncoderConfig,
    readonly dim = 128,
    readonly skiplist: readonly number[] = [],
  ) {
    super();
    this.bert = this.createModule('bert', 'L3/bert_model', config);
    this.linear = this.createModule('linear', 'L1/linear', config.hiddenSize, dim, false);
    this.norm = this.createModule('normalize', 'L1/l2_norm');
    this.tokenMask = this.registerModule('token_mask', new ColBERTv2TokenMask(skiplist, config.padTokenId));
  }

  get hiddenSize(): number {
    return this.config.hiddenSize;
  }

  /** last_hidden_state [T, H]. */
  packedHidden(inputIds: Tensor, positions: Tensor, cuSeqlens: Tensor): Tensor {
    return this.bert.forward(inputIds, positions, cuSeqlens);
  }

  /** The token vectors [T, dim] of last_hidden_state (the runner's multi-vector pooling). */
  vectors(h: Tensor, inputIds: Tensor): Tensor {
    const p = this.linear.forward(h);
    const keep = this.tokenMask.forward(inputIds);
    const k2 = keep.unsqueeze(1);
    const masked = F.where(k2, p, 0);
    for (const t of [k2, keep, p]) t.dispose();
    const v = this.norm.forward(masked);
    masked.dispose();
    return v;
  }

  forward(inputIds: Tensor, positions: Tensor, cuSeqlens: Tensor): Tensor {
    const h = this.packedHidden(inputIds, positions, cuSeqlens);
    try {
      return this.vectors(h, inputIds);
    } finally {
      h.dispose();
    }
  }
}

const SKIP = [5, 6, 7];
const withD = (c: ReturnType<typeof encoderCase>, dim: number, skip: number[]) => ({ ...c, dims: { ...c.dims, D: dim }, init: [c.init[0], dim, skip] });

export const colbertv2Task = defineTask(
  {
    id: 'L4/colbertv2',
    level: 4,
    className: 'ColBERTModel',
    family: [FAMILY],
    architectures: ['colbertv2'],
    mirrors: 'vllm.model_executor.models.colbert.ColBERTModel',
    description: 'ColBERTv2: BERT on packed sequences, a linear projection to the ColBERT dim, the token mask (pad, punctuation skiplist), per-token L2 normalisation.',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed encoder config (model_type bert)' },
      { name: 'dim', type: 'int', optional: true, default: 128 },
      { name: 'skiplist', type: 'object', optional: true, doc: 'token ids masked out of document vectors (punctuation)' },
    ],
    inputs: PACKED_MODEL_INPUTS,
    outputs: [{ name: 'vectors', dtype: 'act', shape: ['T', 'D'] }],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L3/bert_model', 'L1/linear', 'L1/l2_norm', 'L2/colbertv2_ops'],
    cases: {
      ci: [
        withD(encoderCase('tiny-colbert-f32', 'f32', TINY_BERT, [7, 3, 5]), 16, SKIP),
        withD(encoderCase('tiny-colbert-bf16', 'bf16', TINY_BERT, [4, 6]), 16, []),
        withD(encoderCase('tiny-colbert-len1-f32', 'f32', TINY_BERT, [1, 12, 1]), 16, SKIP),
      ],
      production: colbertProduction().map((c) => withD(c, 128, [])),
    },
  },
  {
    baseline: ColBERTModel,
    makeInputs: modelInputs,
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([ids, , cu], params, c) => {
      const cfg = configOf(c);
      const T = ids!.data.length;
      const dim = c.init[1] as number;
      const skip = new Set(c.init[2] as number[]);
      const bert = new Map([...params].filter(([k]) => k.startsWith('bert.')).map(([k, v]) => [k.slice(5), v]));
      const p = refLinear(refModel(ids!.data, cu!.data, bert, cfg), T, params.get('linear.weight')!, null);
      for (let t = 0; t < T; t++) if (skip.has(ids!.data[t]!) || ids!.data[t] === cfg.padTokenId) p.fill(0, t * dim, (t + 1) * dim);
      return [hostArray([T, dim], refNormalizeRows(p, dim))];
    },
    work: (c) => {
      const w = modelWork(c);
      const { T, H } = c.dims as { T: number; H: number };
      return { bytes: w.bytes, flops: w.flops + 2 * T * H * (c.dims.D ?? 128) };
    },
  },
);
