import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { encoderAttentionTask } from './L2/encoder_attention.js';
import { encoderEmbeddingsTask } from './L2/encoder_embeddings.js';
import { encoderMlpTask } from './L2/encoder_mlp.js';
import { xlmRobertaEncoderTask } from './L3/xlm_roberta_encoder.js';
import { xlmRobertaLayerTask } from './L3/xlm_roberta_layer.js';
import { xlmRobertaModelTask } from './L3/xlm_roberta_model.js';
import { bgeM3Task } from './L4/bge_m3.js';
import { colbertv2OpsTask } from './L2/colbertv2_ops.js';
import { bertEncoderTask, bertLayerTask, bertModelTask } from './L3/bert.js';
import { colbertv2Task } from './L4/colbertv2.js';

export { FAMILY as RECSYS_SPECIALIZED };
export * from './config.js';
export { BertEmbeddings, XLMRobertaEmbeddings, encoderEmbeddingsTask } from './L2/encoder_embeddings.js';
export { EncoderAttention, encoderAttentionTask } from './L2/encoder_attention.js';
export { EncoderIntermediate, EncoderOutput, encoderMlpTask } from './L2/encoder_mlp.js';
export { XLMRobertaLayer, xlmRobertaLayerTask } from './L3/xlm_roberta_layer.js';
export { XLMRobertaEncoder, xlmRobertaEncoderTask } from './L3/xlm_roberta_encoder.js';
export { XLMRobertaModel, xlmRobertaModelTask } from './L3/xlm_roberta_model.js';
export { BgeM3EmbeddingModel, bgeM3Task, type BgeM3Outputs } from './L4/bge_m3.js';
export { ColBERTv2MaxSim, ColBERTv2TokenMask, colbertv2OpsTask, maxSimReference } from './L2/colbertv2_ops.js';
export { BertEncoder, BertLayer, BertModel, bertEncoderTask, bertLayerTask, bertModelTask } from './L3/bert.js';
export { ColBERTModel, colbertv2Task } from './L4/colbertv2.js';
export { bgeM3Architecture, colbertArchitecture } from './model.js';
export { bgeM3WeightRules, colbertWeightRules } from './weights.js';

/** The family's own tasks (L2-L4); its L1 tasks (embedding, layer_norm, gelu, linear, relu, l2_norm) are shared. */
export const recsysSpecializedTasks: readonly TaskDefinition[] = [
  encoderEmbeddingsTask,
  encoderAttentionTask,
  encoderMlpTask,
  colbertv2OpsTask,
  xlmRobertaLayerTask,
  xlmRobertaEncoderTask,
  xlmRobertaModelTask,
  bertLayerTask,
  bertEncoderTask,
  bertModelTask,
  bgeM3Task,
  colbertv2Task,
];

export const recsysSpecializedProvider: TaskProvider = { family: FAMILY, tasks: () => recsysSpecializedTasks };
