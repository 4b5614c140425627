/**
 * Cases and harness functions of gpt-oss's L3 / L4 tasks: one step of a mixed batch over a valid paged cache
 * (task-batch.ts), the float64 references of gpt-oss/reference.ts, and work counts (L2/attention's and L2/gpt_oss_moe's).
 */
import { DTYPE_INFO, hostArray, type ExecutionContext, type HostArray, type Module, type Rng, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { attentionWork, initProjections } from '../L2/attention.js';
import { gptOssMoeWork, initGptOssMoeParameters } from '../L2/gpt_oss_moe.js';
import { buildTaskStep, stepSpec, stepTokens, taskStepFor } from '../task-batch.js';
import type { GptOssConfig } from './config.js';
import { gptOssDecoderLayer, gptOssModel } from './reference.js';

export const gptOssCaseConfig = (c: Pick<TaskCase, 'init'>) => c.init[0] as GptOssConfig;
const caseLayer = (c: Pick<TaskCase, 'init'>) => (c.init[1] as number | undefined) ?? 0;
const tokens = (prefillLens: number[], decodeCtxLens: number[]) => prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;

export function gptOssDecoderCase(name: string, dtype: 'f32' | 'bf16', config: GptOssConfig, prefillLens: number[], decodeCtxLens: number[], extra: { residual?: boolean; layerIdx?: number } = {}) {
  return {
    name, dtype, dims: { T: tokens(prefillLens, decodeCtxLens), H: config.hiddenSize },
    init: extra.layerIdx !== undefined ? [config, extra.layerIdx] : [config],
    options: { prefillLens, decodeCtxLens, residual: extra.residual ?? true },
  };
}

export function gptOssModelCase(name: string, dtype: 'f32' | 'bf16', config: GptOssConfig, prefillLens: number[], decodeCtxLens: number[]) {
  return { name, dtype, dims: { T: tokens(prefillLens, decodeCtxLens), H: config.hiddenSize, V: config.vocabSize }, init: [config], options: { prefillLens, decodeCtxLens } };
}

/** Attention as initProjections draws it (sinks included), then the MoE's router and experts. */
export function initGptOssParameters(m: Module, rng: Rng): void {
  initProjections(m, rng);
  initGptOssMoeParameters(m, rng);
}

export function gptOssDecoderInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): (Tensor | null)[] {
  const cfg = gptOssCaseConfig(c);
  const step = buildTaskStep(c, ctx, rng, { numLayers: caseLayer(c) + 1, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim, lastLayerOnly: true });
  const T = step.positions.length;
  return [
    fromInts(ctx, step.positions, [T], 'i64'),
    randn(ctx, rng, [T, cfg.hiddenSize], c.dtype),
    c.options.residual === false ? null : randn(ctx, rng, [T, cfg.hiddenSize], c.dtype),
  ];
}

export function gptOssDecoderReference([positions, hidden, residual]: readonly (HostArray | null)[], params: ReadonlyMap<string, HostArray>, c: TaskCase): HostArray[] {
  const [y, r] = gptOssDecoderLayer(hidden!.data, residual?.data ?? null, positions!.data, params, '', gptOssCaseConfig(c), caseLayer(c), taskStepFor(c).seqs);
  return [hostArray(hidden!.shape, y), hostArray(hidden!.shape, r)];
}

export function gptOssModelInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): Tensor[] {
  const cfg = gptOssCaseConfig(c);
  const step = buildTaskStep(c, ctx, rng, { numLayers: cfg.numHiddenLayers, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim });
  const T = step.positions.length;
  const ids = Array.from({ length: T }, () => rng.int(0, cfg.vocabSize));
  return [fromInts(ctx, ids, [T], 'i64'), fromInts(ctx, step.positions, [T], 'i64')];
}

export function gptOssModelReference([ids, positions]: readonly (HostArray | null)[], params: ReadonlyMap<string, HostArray>, c: TaskCase): HostArray[] {
  const cfg = gptOssCaseConfig(c);
  return [hostArray([ids!.data.length, cfg.hiddenSize], gptOssModel(ids!.data, positions!.data, params, cfg, taskStepFor(c).seqs))];
}

/** One layer's bytes and FLOPs: its attention (window included), the MoE block, norms and residuals. */
export function gptOssDecoderWork(c: TaskCase, cfg: GptOssConfig = gptOssCaseConfig(c), layer = caseLayer(c)): { bytes: number; flops: number } {
  const T = stepTokens(stepSpec(c));
  const H = cfg.hiddenSize;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const attnInit = [H, cfg.numAttentionHeads, cfg.numKeyValueHeads, cfg.ropeTheta, cfg.ropeScaling, cfg.maxPositionEmbeddings, cfg.attentionBias, cfg.attentionBias, cfg.headDim, cfg.slidingWindows[layer] ?? 0, layer, true];
  const attn = attentionWork({ ...c, init: attnInit });
  const moe = gptOssMoeWork({ dtype: c.dtype, dims: { T, H, I: cfg.intermediateSize, E: cfg.numLocalExperts, K: cfg.numExpertsPerTok }, init: [H, cfg.numLocalExperts, cfg.numExpertsPerTok, cfg.intermediateSize, cfg.swigluLimit, cfg.expertsFormat, cfg.swigluAlpha] });
  return { bytes: attn.bytes + moe.bytes + 2 * bytesOf([H], it) + 8 * bytesOf([T, H], it), flops: attn.flops + moe.flops + 10 * T * H };
}

export function gptOssModelWork(c: TaskCase): { bytes: number; flops: number } {
  const cfg = gptOssCaseConfig(c);
  const T = stepTokens(stepSpec(c));
  const it = DTYPE_INFO[c.dtype].itemsize;
  let bytes = bytesOf([T, cfg.hiddenSize], it) * 3 + bytesOf([cfg.hiddenSize], it) + bytesOf([T], 8);
  let flops = 4 * T * cfg.hiddenSize;
  for (let l = 0; l < cfg.numHiddenLayers; l++) {
    const w = gptOssDecoderWork(c, cfg, l);
    bytes += w.bytes;
    flops += w.flops;
  }
  return { bytes, flops };
}
