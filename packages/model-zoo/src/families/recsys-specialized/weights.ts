/**
 * BGE-M3's checkpoint names: BAAI/bge-m3's model.safetensors is a bare XLMRobertaModel (`embeddings.*`, `encoder.*`,
 * `pooler.*`), so the tree's `model.` prefix is dropped; the heads are `sparse_linear.*` / `colbert_linear.*` (shipped
 * as .pt files: convert them into a safetensors file in the folder). The pooler and HF's position_ids buffer are unused.
 */
import type { WeightRules } from '../../weights/weight-plan.js';
import type { EncoderConfig } from './config.js';

export function bgeM3WeightRules(config: EncoderConfig): WeightRules {
  return {
    label: `the ${config.modelType} (BGE-M3) config`,
    renames: [{ from: /^model\./, to: '' }],
    ignore: [/^pooler\./, /(^|\.)position_ids$/, /(^|\.)token_type_ids$/],
    norms: /LayerNorm\.weight$/,
    initStd: config.initializerRange,
    missingFix: (name) =>
      /^(sparse|colbert)_linear\./.test(name)
        ? 'BAAI/bge-m3 ships its heads as sparse_linear.pt and colbert_linear.pt: save them as safetensors in the model folder (tensor names sparse_linear.weight, sparse_linear.bias, colbert_linear.weight, colbert_linear.bias)'
        : undefined,
  };
}

/** colbert-ir/colbertv2.0 (HF_ColBERT): `bert.*` and `linear.weight` as the tree names them; no pooler is stored. */
export function colbertWeightRules(config: EncoderConfig): WeightRules {
  return {
    label: `the ${config.modelType} (ColBERTv2) config`,
    ignore: [/^bert\.pooler\./, /(^|\.)position_ids$/, /(^|\.)token_type_ids$/],
    norms: /LayerNorm\.weight$/,
    initStd: config.initializerRange,
  };
}
