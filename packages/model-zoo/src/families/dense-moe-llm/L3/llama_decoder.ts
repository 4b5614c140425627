import { DTYPE_INFO, Module, defineTask, hostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { LLAMA3_8B, tinyLlamaConfig, type LlamaConfig } from '../config.js';
import { FAMILY } from '../family.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { runsOwnForward } from '../../../common/fusion.js';
import { LlamaAttention, attentionWork, initProjections } from '../L2/attention.js';
import { LlamaMLP } from '../L2/llama_mlp.js';
import { denseDecoderLayer } from '../reference.js';
import { buildTaskStep, stepSpec, stepTokens, taskStepFor } from '../task-batch.js';
import { DECODER_LAYER_IO, decodeCtx } from '../../../common/decoder-layer.js';

/**
 * vLLM's LlamaDecoderLayer: input_layernorm (fused residual add after the first layer), self_attn,
 * post_attention_layernorm (fused residual add), mlp. forward(positions, hiddenStates, residual) ->
 * [hiddenStates, residual]; residual null on the first layer (then residual = hiddenStates).
 * Constructor: (config, layerIdx) where vLLM takes (vllm_config, prefix) and reads the HF config.
 */
export class LlamaDecoderLayer extends Module {
  private readonly selfAttn: LlamaAttention;
  private readonly mlp: LlamaMLP;
  private readonly inputLayernorm: RMSNorm;
  private readonly postAttentionLayernorm: RMSNorm;
  constructor(
    readonly config: LlamaConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const c = config;
    this.selfAttn = this.createModule(
      'self_attn', 'L2/attention',
      c.hiddenSize, c.numAttentionHeads, c.numKeyValueHeads, c.ropeTheta, c.ropeScaling, c.maxPositionEmbeddings,
      c.qkvBias, c.oProjBias, c.headDim, c.slidingWindows[layerIdx] ?? 0, layerIdx,
    );
    this.mlp = this.createModule('mlp', 'L2/llama_mlp', c.hiddenSize, c.intermediateSize, 'silu', c.mlpBias);
    this.inputLayernorm = this.createModule('input_layernorm', 'L1/rms_norm', c.hiddenSize, c.rmsNormEps);
    this.postAttentionLayernorm = this.createModule('post_attention_layernorm', 'L1/rms_norm', c.hiddenSize, c.rmsNormEps);
  }

  forward(positions: Tensor, hiddenStates: Tensor, residual?: Tensor | null): [Tensor, Tensor] {
    const [attn, res] = this.attention(positions, hiddenStates, residual ?? null);
    try {
      // post_attention_layernorm inside the MLP's gate_up GEMV where the backend fuses it (LlamaMLP.forwardNormed)
      const fused = runsOwnForward(this.mlp, LlamaMLP) ? this.mlp.forwardNormed(attn, res, this.postAttentionLayernorm) : null;
      if (fused) return fused;
      const [y, res2] = this.postAttentionLayernorm.forward(attn, res) as [Tensor, Tensor];
      try {
        return [this.mlp.forward(y), res2];
      } finally {
        y.dispose();
      }
    } finally {
      attn.dispose();
      if (res !== hiddenStates) res.dispose();
    }
  }

  /**
   * input_layernorm (with the residual after the first layer) and self_attn: [attention output, residual]. The norm
   * runs inside the qkv GEMV where the backend fuses it (LlamaAttention.forwardNormed), else as its own module.
   */
  private attention(positions: Tensor, hiddenStates: Tensor, residual: Tensor | null): [Tensor, Tensor] {
    const fused = runsOwnForward(this.selfAttn, LlamaAttention) ? this.selfAttn.forwardNormed(positions, hiddenStates, residual, this.inputLayernorm) : null;
    if (fused) return [fused[0], fused[1] ?? hiddenStates];
    let x: Tensor;
    let res: Tensor;
    if (!residual) {
      res = hiddenStates;
      x = this.inputLayernorm.forward(hiddenStates) as Tensor;
    } else {
      [x, res] = this.inputLayernorm.forward(hiddenStates, residual) as [Tensor, Tensor];
    }
    try {
      return [this.selfAttn.forward(positions, x), res];
    } catch (e) {
      if (res !== hiddenStates) res.dispose();
      throw e;
    } finally {
      x.dispose();
    }
  }
}

/** The config of a case: init[0]. */
const caseConfig = (c: Pick<TaskCase, 'init'>) => c.init[0] as LlamaConfig;
const caseLayer = (c: Pick<TaskCase, 'init'>) => (c.init[1] as number | undefined) ?? 0;

function decoderCase(name: string, dtype: 'f32' | 'bf16', config: LlamaConfig, prefillLens: number[], decodeCtxLens: number[], extra: { residual?: boolean; layerIdx?: number } = {}) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return {
    name, dtype, dims: { T, H: config.hiddenSize },
    init: extra.layerIdx !== undefined ? [config, extra.layerIdx] : [config],
    options: { prefillLens, decodeCtxLens, residual: extra.residual ?? true },
  };
}

export const llamaDecoderTask = defineTask(
  {
    id: 'L3/llama_decoder',
    level: 3,
    className: 'LlamaDecoderLayer',
    family: [FAMILY],
    architectures: ['llama', 'qwen2', 'mistral'],
    mirrors: 'vllm.model_executor.models.llama.LlamaDecoderLayer',
    description: 'One Llama decoder layer: fused residual add + RMSNorm, self-attention over the paged cache, fused residual add + RMSNorm, SwiGLU MLP.',
    init: [
      { name: 'config', type: 'object', doc: 'the normalised HF config (LlamaConfig: hiddenSize, numAttentionHeads, slidingWindows, ...)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    ...DECODER_LAYER_IO,
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L2/attention', 'L2/llama_mlp', 'L1/rms_norm'],
    cases: {
      ci: [
        decoderCase('tiny-llama-mixed-f32', 'f32', tinyLlamaConfig(), [5, 3], [20, 6]),
        decoderCase('tiny-llama-first-layer-bf16', 'bf16', tinyLlamaConfig(), [6], [18], { residual: false }),
        decoderCase('tiny-qwen2-bias-f32', 'f32', tinyLlamaConfig({ modelType: 'qwen2', qkvBias: true, ropeTheta: 1000000, tieWordEmbeddings: true }), [4], [9, 2]),
        decoderCase('tiny-mistral-window8-layer1-f32', 'f32', tinyLlamaConfig({ modelType: 'mistral', slidingWindows: [8, 8] }), [11], [19], { layerIdx: 1 }),
      ],
      production: [
        decoderCase('llama3-8b-decode-b32', 'bf16', LLAMA3_8B, [], decodeCtx(32, 2048)),
        decoderCase('llama3-8b-prefill-4096', 'bf16', LLAMA3_8B, [4096], []),
        decoderCase('llama3-8b-mixed-512+b16', 'bf16', LLAMA3_8B, [512], decodeCtx(16, 1024)),
      ],
    },
  },
  {
    baseline: LlamaDecoderLayer,
    makeInputs: (c, ctx, rng) => {
      const cfg = caseConfig(c);
      const layer = caseLayer(c);
      // One cache per layer up to this one (the layer reads the cache at its index).
      const step = buildTaskStep(c, ctx, rng, { numLayers: layer + 1, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim, lastLayerOnly: true });
      const T = step.positions.length;
      return [
        fromInts(ctx, step.positions, [T], 'i64'),
        randn(ctx, rng, [T, cfg.hiddenSize], c.dtype),
        c.options.residual === false ? null : randn(ctx, rng, [T, cfg.hiddenSize], c.dtype),
      ];
    },
    initParameters: (m, _c, rng) => initProjections(m, rng),
    reference: ([positions, hidden, residual], params, c) => {
      const step = taskStepFor(c);
      const [y, r] = denseDecoderLayer(hidden!.data, residual?.data ?? null, positions!.data, params, '', caseConfig(c), caseLayer(c), step.seqs);
      return [hostArray(hidden!.shape, y), hostArray(hidden!.shape, r)];
    },
    work: (c) => decoderWork(c),
  },
);

export function decoderWork(c: TaskCase, cfg: LlamaConfig = caseConfig(c), layer = caseLayer(c)): { bytes: number; flops: number } {
  const spec = stepSpec(c);
  const T = stepTokens(spec);
  const H = cfg.hiddenSize;
  const I = cfg.intermediateSize;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const attnInit = [H, cfg.numAttentionHeads, cfg.numKeyValueHeads, cfg.ropeTheta, cfg.ropeScaling, cfg.maxPositionEmbeddings, cfg.qkvBias, cfg.oProjBias, cfg.headDim, cfg.slidingWindows[layer] ?? 0];
  const attn = attentionWork({ ...c, init: attnInit });
  return {
    bytes: attn.bytes + bytesOf([3 * I, H], it) + 2 * bytesOf([H], it) + 8 * bytesOf([T, H], it) + 4 * bytesOf([T, I], it),
    flops: attn.flops + 6 * T * H * I + 6 * T * I + 10 * T * H,
  };
}
