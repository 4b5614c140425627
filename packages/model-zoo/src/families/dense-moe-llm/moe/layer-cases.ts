/**
 * Cases and harness functions of the MoE decoder tasks (L3 mixtral_decoder / qwen3_moe_decoder, L4 mixtral /
 * qwen3_moe): one step of a mixed batch over a valid paged cache (task-batch.ts), the float64 references of
 * moe/reference.ts, and work counts (attention as the Llama layer's, the experts a step can hit).
 */
import { DTYPE_INFO, hostArray, type ExecutionContext, type HostArray, type Rng, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { attentionWork } from '../L2/attention.js';
import { buildTaskStep, stepSpec, stepTokens, taskStepFor } from '../task-batch.js';
import type { MoeConfig } from './config.js';
import { denseMoeDecoderLayer, denseMoeModel } from './reference.js';

export const moeCaseConfig = (c: Pick<TaskCase, 'init'>) => c.init[0] as MoeConfig;
const caseLayer = (c: Pick<TaskCase, 'init'>) => (c.init[1] as number | undefined) ?? 0;

export function moeDecoderCase(name: string, dtype: 'f32' | 'bf16', config: MoeConfig, prefillLens: number[], decodeCtxLens: number[], extra: { residual?: boolean; layerIdx?: number } = {}) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return {
    name, dtype, dims: { T, H: config.hiddenSize },
    init: extra.layerIdx !== undefined ? [config, extra.layerIdx] : [config],
    options: { prefillLens, decodeCtxLens, residual: extra.residual ?? true },
  };
}

export function moeModelCase(name: string, dtype: 'f32' | 'bf16', config: MoeConfig, prefillLens: number[], decodeCtxLens: number[]) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: config.hiddenSize, V: config.vocabSize }, init: [config], options: { prefillLens, decodeCtxLens } };
}


export function moeDecoderInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): (Tensor | null)[] {
  const cfg = moeCaseConfig(c);
  const layer = caseLayer(c);
  const step = buildTaskStep(c, ctx, rng, { numLayers: layer + 1, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim, lastLayerOnly: true });
  const T = step.positions.length;
  return [
    fromInts(ctx, step.positions, [T], 'i64'),
    randn(ctx, rng, [T, cfg.hiddenSize], c.dtype),
    c.options.residual === false ? null : randn(ctx, rng, [T, cfg.hiddenSize], c.dtype),
  ];
}

export function moeDecoderReference([positions, hidden, residual]: readonly (HostArray | null)[], params: ReadonlyMap<string, HostArray>, c: TaskCase): HostArray[] {
  const [y, r] = denseMoeDecoderLayer(hidden!.data, residual?.data ?? null, positions!.data, params, '', moeCaseConfig(c), caseLayer(c), taskStepFor(c).seqs);
  return [hostArray(hidden!.shape, y), hostArray(hidden!.shape, r)];
}

export function moeModelInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng): Tensor[] {
  const cfg = moeCaseConfig(c);
  const step = buildTaskStep(c, ctx, rng, { numLayers: cfg.numHiddenLayers, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim });
  const T = step.positions.length;
  const ids = Array.from({ length: T }, () => rng.int(0, cfg.vocabSize));
  return [fromInts(ctx, ids, [T], 'i64'), fromInts(ctx, step.positions, [T], 'i64')];
}

export function moeModelReference([ids, positions]: readonly (HostArray | null)[], params: ReadonlyMap<string, HostArray>, c: TaskCase): HostArray[] {
  const cfg = moeCaseConfig(c);
  return [hostArray([ids!.data.length, cfg.hiddenSize], denseMoeModel(ids!.data, positions!.data, params, cfg, taskStepFor(c).seqs))];
}

/** One layer's bytes and FLOPs: attention, norms, and the router plus the experts the step's tokens can hit. */
export function moeDecoderWork(c: TaskCase, cfg: MoeConfig = moeCaseConfig(c), layer = caseLayer(c)): { bytes: number; flops: number } {
  const T = stepTokens(stepSpec(c));
  const H = cfg.hiddenSize;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const attnInit = [H, cfg.numAttentionHeads, cfg.numKeyValueHeads, cfg.ropeTheta, cfg.ropeScaling, cfg.maxPositionEmbeddings, cfg.qkvBias, false, cfg.headDim, cfg.slidingWindows[layer] ?? 0];
  const attn = attentionWork({ ...c, init: attnInit });
  let ffBytes: number;
  let ffFlops: number;
  if (cfg.denseLayers.includes(layer)) {
    ffBytes = bytesOf([3 * cfg.intermediateSize, H], it);
    ffFlops = 6 * T * H * cfg.intermediateSize;
  } else {
    const I = cfg.moeIntermediateSize;
    const K = cfg.numExpertsPerTok;
    ffBytes = Math.min(cfg.numExperts, T * K) * bytesOf([3 * I, H], it) + bytesOf([cfg.numExperts, H], it) + bytesOf([T * K, 3 * I + H], it);
    ffFlops = 6 * T * K * H * I + 2 * T * H * cfg.numExperts;
  }
  return { bytes: attn.bytes + ffBytes + 2 * bytesOf([H], it) + 8 * bytesOf([T, H], it), flops: attn.flops + ffFlops + 10 * T * H };
}

export function moeModelWork(c: TaskCase): { bytes: number; flops: number } {
  const cfg = moeCaseConfig(c);
  const T = stepTokens(stepSpec(c));
  const it = DTYPE_INFO[c.dtype].itemsize;
  let bytes = bytesOf([T, cfg.hiddenSize], it) * 3 + bytesOf([cfg.hiddenSize], it) + bytesOf([T], 8);
  let flops = 4 * T * cfg.hiddenSize;
  for (let l = 0; l < cfg.numHiddenLayers; l++) {
    const w = moeDecoderWork(c, cfg, l);
    bytes += w.bytes;
    flops += w.flops;
  }
  return { bytes, flops };
}
