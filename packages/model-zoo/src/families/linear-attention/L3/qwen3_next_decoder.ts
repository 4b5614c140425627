import { DTYPE_INFO, Module, defineTask, hostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import type { GemmaRMSNorm } from '../../../tasks/L1/norm/gemma_rms_norm.js';
import { stepSpec, stepTokens } from '../../dense-moe-llm/task-batch.js';
import { FAMILY } from '../family.js';
import { hybridDecoderForward, type FeedForward } from '../hybrid-decoder.js';
import { gatedAttentionWork, type Qwen3NextAttention } from '../L2/qwen3_next_attention.js';
import { gdnWork, type Qwen3NextGDNAttention } from '../L2/qwen3_next_gdn_attention.js';
import { sharedExpertMoeWork } from '../L2/shared_expert_moe.js';
import { QN_STATE_TOLERANCE, initQwen3NextParameters, qnConfigOf, qnLayerOf } from '../qwen3-next-cases.js';
import { QWEN3_NEXT_80B, tinyQwen3NextConfig, type Qwen3NextConfig } from '../qwen3-next-config.js';
import { refQwen3NextDecoderLayer } from '../qwen3-next-reference.js';
import { buildQwen3NextStep, qwen3NextStepFor } from '../qwen3-next-step.js';
import { decodeCtx } from '../../../common/decoder-layer.js';

/**
 * HF's Qwen3NextDecoderLayer (vLLM's Qwen3NextDecoderLayer) in vLLM's residual form: input_layernorm (zero-centred,
 * fused with the residual add; L1/gemma_rms_norm), the token mixer of the layer's type (linear_attention:
 * L2/qwen3_next_gdn_attention as `linear_attn`, its states in the engine's pool; full_attention: L2/qwen3_next_attention
 * as `self_attn`, over the paged KV cache), post_attention_layernorm (fused add), mlp: the sparse block with its shared
 * expert (L2/shared_expert_moe) or, on mlp_only_layers / off decoder_sparse_step, a dense SwiGLU MLP of
 * intermediate_size (L2/gla_mlp: gate_proj / up_proj / down_proj). forward(positions [T], hiddenStates [T, D],
 * residual | null) -> [hiddenStates, residual]; the step's metadata, caches and state pools come from the forward context.
 */
export class Qwen3NextDecoderLayer extends Module {
  readonly inputLayernorm: GemmaRMSNorm;
  readonly linearAttn: Qwen3NextGDNAttention | null = null;
  readonly selfAttn: Qwen3NextAttention | null = null;
  readonly postAttentionLayernorm: GemmaRMSNorm;
  readonly mlp: FeedForward;
  constructor(
    readonly config: Qwen3NextConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const c = config;
    if (layerIdx >= c.numHiddenLayers) throw new RangeError(`Qwen3NextDecoderLayer: layer ${layerIdx} of ${c.numHiddenLayers}`);
    this.inputLayernorm = this.createModule('input_layernorm', 'L1/gemma_rms_norm', c.hiddenSize, c.rmsNormEps);
    if (c.layerTypes[layerIdx] === 'linear_attention') this.linearAttn = this.createModule<Qwen3NextGDNAttention>('linear_attn', 'L2/qwen3_next_gdn_attention', c, layerIdx);
    else this.selfAttn = this.createModule<Qwen3NextAttention>('self_attn', 'L2/qwen3_next_attention', c, layerIdx);
    this.postAttentionLayernorm = this.createModule('post_attention_layernorm', 'L1/gemma_rms_norm', c.hiddenSize, c.rmsNormEps);
    this.mlp = c.sparseLayers[layerIdx] ? this.createModule('mlp', 'L2/shared_expert_moe', c) : this.createModule('mlp', 'L2/gla_mlp', c.hiddenSize, null, c.intermediateSize, 'swish');
  }

  forward(positions: Tensor, hiddenStates: Tensor, residual: Tensor | null = null): [Tensor, Tensor] {
    const { inputLayernorm, postAttentionLayernorm } = this;
    return hybridDecoderForward({ inputLayernorm, recurrent: this.linearAttn, attention: this.selfAttn, postAttentionLayernorm, feedForward: this.mlp }, positions, hiddenStates, residual);
  }
}

export function decoderCase(name: string, dtype: 'f32' | 'bf16', cfg: Qwen3NextConfig, layerIdx: number, prefillLens: number[], decodeCtxLens: number[], residual = true) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg, layerIdx], options: { prefillLens, decodeCtxLens, residual } };
}
const TINY = tinyQwen3NextConfig();

/** One layer: its mixer's, the two norms' and its feed-forward's work over the step. */
export function decoderWork(c: TaskCase, cfg: Qwen3NextConfig = qnConfigOf(c), layer = qnLayerOf(c)) {
  const s = stepSpec(c);
  const T = stepTokens(s);
  const it = DTYPE_INFO[c.dtype].itemsize;
  const mixer = cfg.layerTypes[layer] === 'linear_attention' ? gdnWork(cfg, 1, T, c.dtype, s.decodeCtxLens.length > 0) : gatedAttentionWork(c, cfg);
  const I = cfg.intermediateSize;
  const ff = cfg.sparseLayers[layer] ? sharedExpertMoeWork(cfg, T, c.dtype) : { bytes: bytesOf([3 * I, cfg.hiddenSize], it) + 2 * bytesOf([T, cfg.hiddenSize], it), flops: 6 * T * cfg.hiddenSize * I };
  return { bytes: mixer.bytes + ff.bytes + 2 * bytesOf([cfg.hiddenSize], it) + 8 * bytesOf([T, cfg.hiddenSize], it), flops: mixer.flops + ff.flops + 10 * T * cfg.hiddenSize };
}

export const qwen3NextDecoderTask = defineTask(
  {
    id: 'L3/qwen3_next_decoder',
    level: 3,
    className: 'Qwen3NextDecoderLayer',
    family: [FAMILY],
    architectures: ['qwen3_next'],
    mirrors: 'transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextDecoderLayer',
    description: 'One Qwen3-Next layer: fused residual add + zero-centred RMSNorm, gated DeltaNet (conv and recurrent state in the pool) or gated attention (paged KV cache), fused residual add + RMSNorm, sparse MoE with a shared expert (or a dense MLP).',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed Qwen3-Next config (Qwen3NextConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    inputs: [
      { name: 'positions', dtype: 'i64', shape: ['T'] },
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
      { name: 'residual', dtype: 'act', shape: ['T', 'H'], optional: true, doc: 'null on the first layer' },
    ],
    outputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] },
      { name: 'residual', dtype: 'act', shape: ['T', 'H'] },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 }, f32: QN_STATE_TOLERANCE },
    imports: ['L1/gemma_rms_norm', 'L2/qwen3_next_gdn_attention', 'L2/qwen3_next_attention', 'L2/shared_expert_moe', 'L2/gla_mlp'],
    cases: {
      ci: [
        decoderCase('tiny-deltanet-mixed-f32', 'f32', TINY, 0, [5, 3], [20, 6]),
        decoderCase('tiny-deltanet-dense-mlp-decode-f32', 'f32', TINY, 2, [], [9, 4, 1], false),
        decoderCase('tiny-attention-mixed-f32', 'f32', TINY, 3, [7], [12, 3]),
        decoderCase('tiny-deltanet-prefill-bf16', 'bf16', TINY, 1, [6, 2], []),
      ],
      production: [
        decoderCase('qwen3-next-80b-deltanet-decode-b32', 'bf16', QWEN3_NEXT_80B, 0, [], decodeCtx(32, 4096)),
        decoderCase('qwen3-next-80b-deltanet-prefill-4096', 'bf16', QWEN3_NEXT_80B, 0, [4096], []),
        decoderCase('qwen3-next-80b-attention-decode-b32', 'bf16', QWEN3_NEXT_80B, 3, [], decodeCtx(32, 4096)),
        decoderCase('qwen3-next-80b-attention-mixed-512+b16', 'bf16', QWEN3_NEXT_80B, 3, [512], decodeCtx(16, 2048)),
      ],
    },
  },
  {
    baseline: Qwen3NextDecoderLayer,
    makeInputs: (c, ctx, rng) => {
      const cfg = qnConfigOf(c);
      const layer = qnLayerOf(c);
      const step = buildQwen3NextStep(c, ctx, rng, cfg, layer + 1, layer);
      const T = step.positions.length;
      return [fromInts(ctx, step.positions, [T], 'i64'), randn(ctx, rng, [T, cfg.hiddenSize], c.dtype), c.options.residual === false ? null : randn(ctx, rng, [T, cfg.hiddenSize], c.dtype)];
    },
    initParameters: (m, _c, rng) => initQwen3NextParameters(m, rng),
    reference: ([positions, hidden, residual], params, c) => {
      const layer = qnLayerOf(c);
      const step = qwen3NextStepFor(c);
      const r = refQwen3NextDecoderLayer(hidden!.data, residual?.data ?? null, positions!.data, params, '', qnConfigOf(c), layer, step.seqs, step.states[layer] ?? []);
      return [hostArray(hidden!.shape, r.out), hostArray(hidden!.shape, r.residual)];
    },
    work: (c) => decoderWork(c),
  },
);
