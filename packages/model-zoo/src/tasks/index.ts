/**
 * The family-agnostic L1 tasks, one folder per op kind (norm, activation, reduction, embedding, linear, rotary,
 * kvcache, attention, sampling). Every family composes them through the module registry by id (`L1/rms_norm`); they
 * are registered once, here, whichever families use them.
 */
import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { geluTask } from './L1/activation/gelu.js';
import { geluAndMulTask } from './L1/activation/gelu_and_mul.js';
import { logSigmoidTask } from './L1/activation/log_sigmoid.js';
import { reluTask } from './L1/activation/relu.js';
import { sigmoidTask } from './L1/activation/sigmoid.js';
import { siluTask } from './L1/activation/silu.js';
import { conv2dTask } from './L1/conv/conv2d.js';
import { maxPool2dTask } from './L1/conv/max_pool2d.js';
import { globalAvgPool2dTask } from './L1/conv/global_avg_pool2d.js';
import { grnTask } from './L1/norm/grn.js';
import { layerNorm2dTask } from './L1/norm/layer_norm2d.js';
import { interpolateTask } from './L1/layout/interpolate.js';
import { tensorOpsTask } from './L1/layout/tensor_ops.js';
import { batchNorm2dTask } from './L1/norm/batch_norm2d.js';
import { siluAndMulTask } from './L1/activation/silu_and_mul.js';
import { quickgeluTask } from './L1/activation/quickgelu.js';
import { t5LayerNormTask } from './L1/norm/t5_layer_norm.js';
import { diffusionRopeTask } from './L1/rotary/diffusion_rope.js';
import { fluxPosEmbedTask } from './L1/rotary/flux_pos_embed.js';
import { denseAttentionTask } from './L1/attention/dense_attention.js';
import { flashAttnVarlenTask } from './L1/attention/flash_attn_varlen.js';
import { flashAttnDecodeTask } from './L1/attention/flash_attn_decode.js';
import { flashAttnPrefillTask } from './L1/attention/flash_attn_prefill.js';
import { flashinferDecodeTask } from './L1/attention/flashinfer_decode.js';
import { flashinferPrefillTask } from './L1/attention/flashinfer_prefill.js';
import { storeKvcacheHndTask } from './L1/kvcache/store_kvcache_hnd.js';
import { fp8LinearTask } from './L1/quant/fp8_linear.js';
import { perTokenGroupQuantFp8Task } from './L1/quant/per_token_group_quant_fp8.js';
import { siluMulQuantFp8Task } from './L1/quant/silu_mul_quant_fp8.js';
import { pagedDecodeAttentionTask } from './L1/attention/paged_decode_attention.js';
import { varlenPrefillAttentionTask } from './L1/attention/varlen_prefill_attention.js';
import { embeddingTask } from './L1/embedding/embedding.js';
import { storeKvcacheTask } from './L1/kvcache/store_kvcache.js';
import { linearTask } from './L1/linear/linear.js';
import { groupNormTask } from './L1/norm/group_norm.js';
import { l2NormTask } from './L1/norm/l2_norm.js';
import { layerNormTask } from './L1/norm/layer_norm.js';
import { rmsNormTask } from './L1/norm/rms_norm.js';
import { gemmaRmsNormTask } from './L1/norm/gemma_rms_norm.js';
import { rmsNormGatedTask } from './L1/norm/rms_norm_gated.js';
import { chunkGlaTask } from './L1/recurrent/chunk_gla.js';
import { causalConv1dTask } from './L1/recurrent/causal_conv1d.js';
import { chunkGatedDeltaRuleTask } from './L1/recurrent/chunk_gated_delta_rule.js';
import { fusedRecurrentGatedDeltaRuleTask } from './L1/recurrent/fused_recurrent_gated_delta_rule.js';
import { chunkKdaTask } from './L1/recurrent/chunk_kda.js';
import { fusedRecurrentKdaTask } from './L1/recurrent/fused_recurrent_kda.js';
import { fusedRecurrentGlaTask } from './L1/recurrent/fused_recurrent_gla.js';
import { glaRecurrenceTask } from './L1/recurrent/gla_recurrence.js';
import { gateLinearTask } from './L1/moe/gate_linear.js';
import { groupedTopkTask } from './L1/moe/grouped_topk.js';
import { moeAlignTask } from './L1/moe/moe_align.js';
import { moeGroupedGemmTask } from './L1/moe/moe_grouped_gemm.js';
import { moeSumTask } from './L1/moe/moe_sum.js';
import { topkSoftmaxTask } from './L1/moe/topk_softmax.js';
import { softmaxTask } from './L1/reduction/softmax.js';
import { rotaryEmbTask } from './L1/rotary/rotary_emb.js';
import { yarnRotaryEmbTask } from './L1/rotary/yarn_rotary_emb.js';
import { samplerTask } from './L1/sampling/sampler.js';
import { allreduceTask } from './L1/collective/allreduce.js';
import { parallelLinearTasks } from './L2/linear/parallel_linear.js';
import { DENSE_MOE_LLM } from './families.js';

export { FAMILIES, DENSE_MOE_LLM, familiesOf } from './families.js';
export { defineL1OpTask, isOpTask, checkCaseAgainstOp, opMetas, type L1OpTaskInit, type OpTaskBinding, type OpTaskDefinition, type OpTensorArg } from './define-op-task.js';
export { geluTask, geluReference } from './L1/activation/gelu.js';
export { groupNormTask, groupNormReference } from './L1/norm/group_norm.js';
export { layerNormTask, layerNormReference } from './L1/norm/layer_norm.js';
export { L2Norm, l2NormTask, l2NormReference } from './L1/norm/l2_norm.js';
export { reluTask, reluReference } from './L1/activation/relu.js';
export { sigmoidTask, sigmoidReference, sigmoid64 } from './L1/activation/sigmoid.js';
export { siluTask, siluReference } from './L1/activation/silu.js';
export { conv2dTask, conv2dReference, conv2dCase, convOut } from './L1/conv/conv2d.js';
export { maxPool2dTask, maxPool2dReference } from './L1/conv/max_pool2d.js';
export { GlobalAvgPool2d, globalAvgPool2dTask, globalAvgPool2dReference } from './L1/conv/global_avg_pool2d.js';
export { GRN, grnTask, grnReference } from './L1/norm/grn.js';
export { LayerNorm2d, layerNorm2dTask, layerNorm2dReference } from './L1/norm/layer_norm2d.js';
export { Interpolate, interpolateTask, interpolateReference } from './L1/layout/interpolate.js';
export { Cat, Exp, OneHot, Pad, tensorOpsTask, padReference } from './L1/layout/tensor_ops.js';
export { batchNorm2dTask, batchNorm2dReference, initBatchNormParameters } from './L1/norm/batch_norm2d.js';
export { LogSigmoid, logSigmoidTask, logSigmoidReference } from './L1/activation/log_sigmoid.js';
export { RMSNormGated, rmsNormGatedTask, rmsNormGatedReference } from './L1/norm/rms_norm_gated.js';
export { ChunkGLA, chunkGlaTask } from './L1/recurrent/chunk_gla.js';
export { FusedRecurrentGLA, fusedRecurrentGlaTask } from './L1/recurrent/fused_recurrent_gla.js';
export { NaiveRecurrentGLA, glaRecurrenceTask } from './L1/recurrent/gla_recurrence.js';
export { glaRecurrenceReference } from './L1/recurrent/gla-common.js';
export { CausalConv1d, causalConv1dReference, causalConv1dTask } from './L1/recurrent/causal_conv1d.js';
export { ChunkGatedDeltaRule, chunkGatedDeltaRuleTask } from './L1/recurrent/chunk_gated_delta_rule.js';
export { FusedRecurrentGatedDeltaRule, fusedRecurrentGatedDeltaRuleTask } from './L1/recurrent/fused_recurrent_gated_delta_rule.js';
export { chunkGatedDeltaRuleReference, gatedDeltaRuleReference } from './L1/recurrent/delta-rule-common.js';
export { ChunkKDA, chunkKdaTask } from './L1/recurrent/chunk_kda.js';
export { FusedRecurrentKDA, fusedRecurrentKdaTask } from './L1/recurrent/fused_recurrent_kda.js';
export { GemmaRMSNorm, gemmaRmsNormReference, gemmaRmsNormTask } from './L1/norm/gemma_rms_norm.js';
export { quickgeluTask, quickGeluReference } from './L1/activation/quickgelu.js';
export { T5LayerNorm, t5LayerNormTask, t5LayerNormReference } from './L1/norm/t5_layer_norm.js';
export { DiffusionRoPE, diffusionRopeTask, diffusionRopeReference } from './L1/rotary/diffusion_rope.js';
export { YaRNRotaryEmbedding, yarnRotaryEmbTask, yarnInvFreq, yarnCosSinCache, yarnAttentionFactor, type YarnRopeScaling } from './L1/rotary/yarn_rotary_emb.js';
export { FluxPosEmbed, fluxPosEmbedTask, fluxPosEmbedReference } from './L1/rotary/flux_pos_embed.js';
export { DenseAttention, denseAttentionTask, denseAttentionReference } from './L1/attention/dense_attention.js';
export { FlashAttnVarlen, flashAttnVarlenTask, flashAttnVarlenReference } from './L1/attention/flash_attn_varlen.js';
export { FlashAttnPrefill, flashAttnPrefillTask, slidingWindowOf, type WindowSize } from './L1/attention/flash_attn_prefill.js';
export { flashAttnDecodeTask } from './L1/attention/flash_attn_decode.js';
export { TRTLLMPrefill, flashinferPrefillTask } from './L1/attention/flashinfer_prefill.js';
export { TRTLLMDecode, flashinferDecodeTask } from './L1/attention/flashinfer_decode.js';
export { StoreKVCacheHND, storeKvcacheHndTask, storeKvcacheHndReference } from './L1/kvcache/store_kvcache_hnd.js';
export { Fp8Linear, fp8LinearTask, fp8LinearReference } from './L1/quant/fp8_linear.js';
export { PerTokenGroupQuantFp8, perTokenGroupQuantFp8Task } from './L1/quant/per_token_group_quant_fp8.js';
export { SiluMulQuantFp8, siluMulQuantFp8Task, siluMulQuantFp8Reference } from './L1/quant/silu_mul_quant_fp8.js';
export { groupQuantFp8Reference, roundE4m3 } from './L1/quant/fp8-reference.js';
export { VocabParallelEmbedding, embeddingTask } from './L1/embedding/embedding.js';
export { KV_BLOCK_SIZE } from './L1/kvcache/store_kvcache.js';
export { cosSinCacheReference } from './L1/rotary/rotary_emb.js';
export { allreduceTask } from './L1/collective/allreduce.js';
export {
  columnParallelLinearTask,
  mergedColumnParallelLinearTask,
  parallelLinearTasks,
  qkvParallelLinearTask,
  rowParallelLinearTask,
} from './L2/linear/parallel_linear.js';

/** Every shared L1 task, by id. */
export const sharedL1Tasks: readonly TaskDefinition[] = [
  chunkGlaTask,
  causalConv1dTask,
  chunkGatedDeltaRuleTask,
  fusedRecurrentGatedDeltaRuleTask,
  chunkKdaTask,
  fusedRecurrentKdaTask,
  gemmaRmsNormTask,
  batchNorm2dTask,
  conv2dTask,
  denseAttentionTask,
  embeddingTask,
  flashAttnVarlenTask,
  flashAttnPrefillTask,
  flashAttnDecodeTask,
  flashinferPrefillTask,
  flashinferDecodeTask,
  storeKvcacheHndTask,
  fp8LinearTask,
  perTokenGroupQuantFp8Task,
  siluMulQuantFp8Task,
  fusedRecurrentGlaTask,
  gateLinearTask,
  geluTask,
  globalAvgPool2dTask,
  grnTask,
  geluAndMulTask,
  glaRecurrenceTask,
  groupNormTask,
  groupedTopkTask,
  interpolateTask,
  l2NormTask,
  layerNormTask,
  layerNorm2dTask,
  linearTask,
  maxPool2dTask,
  logSigmoidTask,
  moeAlignTask,
  moeGroupedGemmTask,
  moeSumTask,
  pagedDecodeAttentionTask,
  reluTask,
  rmsNormTask,
  rmsNormGatedTask,
  rotaryEmbTask,
  yarnRotaryEmbTask,
  samplerTask,
  sigmoidTask,
  siluTask,
  siluAndMulTask,
  softmaxTask,
  storeKvcacheTask,
  tensorOpsTask,
  topkSoftmaxTask,
  varlenPrefillAttentionTask,
  quickgeluTask,
  t5LayerNormTask,
  diffusionRopeTask,
  fluxPosEmbedTask,
];

/** The shared tasks as a provider (`fastkernels list` shows them; the baseline registry builds them). */
export const sharedTasksProvider: TaskProvider = { family: 'shared', tasks: () => sharedL1Tasks };

/** The tensor-parallel tasks, L1 first (register all of them: RowParallelLinear imports L1/allreduce). */
export const tensorParallelTasks = [allreduceTask, ...parallelLinearTasks] as const;

/**
 * The tensor-parallel tasks (L1/allreduce, the L2 parallel linear layers), in the dense LLM family: registered by
 * model-zoo's plugin (`fastkernels list` shows them, the baseline registry of the CLI builds them, the Llama modules use
 * them at world > 1). Not in taskProviders: baselineRegistry() without arguments leaves them out, as before.
 */
export const tensorParallelProvider: TaskProvider = { family: DENSE_MOE_LLM, tasks: () => tensorParallelTasks };
