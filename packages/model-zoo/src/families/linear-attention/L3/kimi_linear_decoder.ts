import { DTYPE_INFO, Module, defineTask, hostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { stepSpec, stepTokens } from '../../dense-moe-llm/task-batch.js';
import { DECODER_LAYER_IO, decodeCtx } from '../../../common/decoder-layer.js';
import { FAMILY } from '../family.js';
import { hybridDecoderForward, type FeedForward } from '../hybrid-decoder.js';
import { kdaWork, type KimiDeltaAttention } from '../L2/kimi_delta_attention.js';
import { mlaWork, type KimiMLAAttention } from '../L2/kimi_mla_attention.js';
import { kimiMoeWork } from '../L2/kimi_moe.js';
import { KIMI_STATE_TOLERANCE, initKimiParameters, kimiConfigOf, kimiLayerOf } from '../kimi-linear-cases.js';
import { KIMI_LINEAR_48B, tinyKimiLinearConfig, type KimiLinearConfig } from '../kimi-linear-config.js';
import { refKimiDecoderLayer } from '../kimi-linear-reference.js';
import { buildKimiStep, kimiStepFor } from '../kimi-linear-step.js';

/**
 * Kimi-Linear's decoder layer (the remote code's KimiDecoderLayer; vLLM's KimiDecoderLayer) in vLLM's residual form:
 * input_layernorm (L1/rms_norm, fused with the residual add), self_attn of the layer's type (KDA: L2/kimi_delta_attention,
 * its states in the engine's pool; MLA: L2/kimi_mla_attention over the paged KV cache), post_attention_layernorm (fused
 * add), then block_sparse_moe (L2/kimi_moe) on sparse layers or mlp, a dense SwiGLU of intermediate_size (L2/gla_mlp:
 * gate_proj / up_proj / down_proj). forward(positions [T], hiddenStates [T, D], residual | null) -> [hiddenStates,
 * residual]; the step's metadata, caches and state pools come from the forward context.
 */
export class KimiLinearDecoderLayer extends Module {
  readonly inputLayernorm: RMSNorm;
  readonly kda: KimiDeltaAttention | null = null;
  readonly mla: KimiMLAAttention | null = null;
  readonly postAttentionLayernorm: RMSNorm;
  readonly feedForward: FeedForward;
  constructor(
    readonly config: KimiLinearConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const c = config;
    if (layerIdx >= c.numHiddenLayers) throw new RangeError(`KimiLinearDecoderLayer: layer ${layerIdx} of ${c.numHiddenLayers}`);
    this.inputLayernorm = this.createModule('input_layernorm', 'L1/rms_norm', c.hiddenSize, c.rmsNormEps);
    if (c.layerTypes[layerIdx] === 'kda') this.kda = this.createModule<KimiDeltaAttention>('self_attn', 'L2/kimi_delta_attention', c, layerIdx);
    else this.mla = this.createModule<KimiMLAAttention>('self_attn', 'L2/kimi_mla_attention', c, layerIdx);
    this.postAttentionLayernorm = this.createModule('post_attention_layernorm', 'L1/rms_norm', c.hiddenSize, c.rmsNormEps);
    this.feedForward = c.sparseLayers[layerIdx] ? this.createModule('block_sparse_moe', 'L2/kimi_moe', c) : this.createModule('mlp', 'L2/gla_mlp', c.hiddenSize, null, c.intermediateSize, 'swish');
  }

  forward(positions: Tensor, hiddenStates: Tensor, residual: Tensor | null = null): [Tensor, Tensor] {
    const { inputLayernorm, postAttentionLayernorm } = this;
    return hybridDecoderForward({ inputLayernorm, recurrent: this.kda, attention: this.mla, postAttentionLayernorm, feedForward: this.feedForward }, positions, hiddenStates, residual);
  }
}

export function kimiDecoderCase(name: string, dtype: 'f32' | 'bf16', cfg: KimiLinearConfig, layerIdx: number, prefillLens: number[], decodeCtxLens: number[], residual = true) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg, layerIdx], options: { prefillLens, decodeCtxLens, residual } };
}
const TINY = tinyKimiLinearConfig();

/** One layer: its mixer's, the two norms' and its feed-forward's work over the step. */
export function kimiDecoderWork(c: TaskCase, cfg: KimiLinearConfig = kimiConfigOf(c), layer = kimiLayerOf(c)) {
  const s = stepSpec(c);
  const T = stepTokens(s);
  const it = DTYPE_INFO[c.dtype].itemsize;
  const mixer = cfg.layerTypes[layer] === 'kda' ? kdaWork(cfg, 1, T, c.dtype, s.decodeCtxLens.length > 0) : mlaWork(c, cfg);
  const I = cfg.intermediateSize;
  const ff = cfg.sparseLayers[layer] ? kimiMoeWork(cfg, T, c.dtype) : { bytes: bytesOf([3 * I, cfg.hiddenSize], it) + 2 * bytesOf([T, cfg.hiddenSize], it), flops: 6 * T * cfg.hiddenSize * I };
  return { bytes: mixer.bytes + ff.bytes + 2 * bytesOf([cfg.hiddenSize], it) + 8 * bytesOf([T, cfg.hiddenSize], it), flops: mixer.flops + ff.flops + 10 * T * cfg.hiddenSize };
}

export const kimiLinearDecoderTask = defineTask(
  {
    id: 'L3/kimi_linear_decoder',
    level: 3,
    className: 'KimiLinearDecoderLayer',
    family: [FAMILY],
    architectures: ['kimi_linear'],
    mirrors: 'vllm.model_executor.models.kimi_linear.KimiDecoderLayer',
    description: 'One Kimi-Linear layer: fused residual add + RMSNorm, KDA (conv and recurrent states in the pool) or NoPE MLA (paged KV cache), fused residual add + RMSNorm, the DeepSeek-V3-style sparse MoE with shared experts (or a dense MLP).',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed Kimi-Linear config (KimiLinearConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    ...DECODER_LAYER_IO,
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 }, f32: KIMI_STATE_TOLERANCE },
    imports: ['L1/rms_norm', 'L2/kimi_delta_attention', 'L2/kimi_mla_attention', 'L2/kimi_moe', 'L2/gla_mlp'],
    cases: {
      ci: [
        kimiDecoderCase('tiny-kda-dense-mlp-mixed-f32', 'f32', TINY, 0, [5, 3], [20, 6], false),
        kimiDecoderCase('tiny-kda-moe-decode-f32', 'f32', TINY, 1, [], [9, 4, 1]),
        kimiDecoderCase('tiny-mla-moe-mixed-f32', 'f32', TINY, 2, [7], [12, 3]),
        kimiDecoderCase('tiny-kda-prefill-bf16', 'bf16', TINY, 0, [6, 2], [], false),
      ],
      production: [
        kimiDecoderCase('kimi-linear-48b-kda-decode-b32', 'bf16', KIMI_LINEAR_48B, 1, [], decodeCtx(32, 4096)),
        kimiDecoderCase('kimi-linear-48b-kda-prefill-4096', 'bf16', KIMI_LINEAR_48B, 1, [4096], []),
        kimiDecoderCase('kimi-linear-48b-mla-decode-b32', 'bf16', KIMI_LINEAR_48B, 3, [], decodeCtx(32, 4096)),
        kimiDecoderCase('kimi-linear-48b-mla-mixed-512+b16', 'bf16', KIMI_LINEAR_48B, 3, [512], decodeCtx(16, 2048)),
      ],
    },
  },
  {
    baseline: KimiLinearDecoderLayer,
    makeInputs: (c, ctx, rng) => {
      const cfg = kimiConfigOf(c);
      const layer = kimiLayerOf(c);
      const step = buildKimiStep(c, ctx, rng, cfg, layer + 1, layer);
      const T = step.positions.length;
      return [fromInts(ctx, step.positions, [T], 'i64'), randn(ctx, rng, [T, cfg.hiddenSize], c.dtype), c.options.residual === false ? null : randn(ctx, rng, [T, cfg.hiddenSize], c.dtype)];
    },
    initParameters: (m, _c, rng) => initKimiParameters(m, rng),
    reference: ([, hidden, residual], params, c) => {
      const layer = kimiLayerOf(c);
      const step = kimiStepFor(c);
      const r = refKimiDecoderLayer(hidden!.data, residual?.data ?? null, params, '', kimiConfigOf(c), layer, step.seqs, step.states[layer] ?? []);
      return [hostArray(hidden!.shape, r.out), hostArray(hidden!.shape, r.residual)];
    },
    work: (c) => kimiDecoderWork(c),
  },
);
