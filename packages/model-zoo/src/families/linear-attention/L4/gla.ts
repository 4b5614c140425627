import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { STATE_F32_TOLERANCE, configOf, initGlaParameters } from '../cases.js';
import { GLA_2_7B, tinyGlaConfig, type GlaConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { blockWork, type GLADecoderLayer } from '../L3/gla_decoder.js';
import { refGlaModel } from '../reference.js';
import { setForwardContext } from '../../../engine/forward-context.js';

/** The per-sequence recurrent state of every layer, stacked: [num_hidden_layers, B, num_heads, head_k_dim, head_v_dim] f32. */
export function glaStateShape(cfg: GlaConfig, B: number): number[] {
  return [cfg.numHiddenLayers, B, cfg.numHeads, cfg.headKDim, cfg.headVDim];
}

/**
 * FLA's GLAModel: embeddings (L1/embedding), layers (L3/gla_decoder), norm (L1/rms_norm). forward(inputIds [B, T],
 * state [L, B, H, K, V] f32 | null) -> [hidden [B, T, D] after the final norm, the new state]. Part of the L4 wiring.
 */
export class GLAModel extends Module {
  readonly embeddings: VocabParallelEmbedding;
  readonly layers: GLADecoderLayer[] = [];
  readonly norm: RMSNorm;
  constructor(readonly config: GlaConfig) {
    super();
    this.embeddings = this.createModule('embeddings', 'L1/embedding', config.vocabSize, config.hiddenSize);
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.push(this.createModule(`layers.${i}`, 'L3/gla_decoder', config, i));
    this.norm = this.createModule('norm', 'L1/rms_norm', config.hiddenSize, config.normEps);
  }

  forward(inputIds: Tensor, state: Tensor | null = null): Tensor[] {
    const [B, T] = inputIds.shape as [number, number];
    const D = this.config.hiddenSize;
    const flat = inputIds.reshape([B * T]);
    const e = this.embeddings.forward(flat);
    flat.dispose();
    let h = e.view([B, T, D]);
    e.dispose();
    const finals: Tensor[] = [];
    try {
      this.layers.forEach((layer, l) => {
        const s = state ? state.select(0, l) : null;
        const [out, final] = layer.forward(h, s) as [Tensor, Tensor];
        s?.dispose();
        h.dispose();
        h = out;
        finals.push(final);
      });
      const h2 = h.reshape([B * T, D]);
      const n = this.norm.forward(h2) as Tensor;
      h2.dispose();
      const hidden = n.view([B, T, D]);
      n.dispose();
      return [hidden, F.stack(finals, 0)];
    } finally {
      h.dispose();
      for (const f of finals) f.dispose();
    }
  }
}

/**
 * FLA's GLAForCausalLM: model + lm_head (L1/linear, no bias). forward(inputIds [B, T], state [L, B, H, K, V] f32 |
 * null) -> [logits [B, T, vocab], the new state]: FLA threads the state through past_key_values; here it is an explicit
 * input and output, so a prefill (state null, or a chunk's) and a decode step (T = 1) are the same call and the caller
 * decides where each sequence's state lives.
 */
export class GLAForCausalLM extends Module {
  readonly model: GLAModel;
  readonly lmHead: Linear;
  constructor(readonly config: GlaConfig) {
    super();
    this.model = this.registerModule('model', new GLAModel(config));
    this.lmHead = this.createModule('lm_head', 'L1/linear', config.hiddenSize, config.vocabSize, false);
  }

  forward(inputIds: Tensor, state: Tensor | null = null): Tensor[] {
    const [B, T] = inputIds.shape as [number, number];
    const [hidden, next] = this.model.forward(inputIds, state) as [Tensor, Tensor];
    const h2 = hidden.reshape([B * T, this.config.hiddenSize]);
    hidden.dispose();
    const logits = this.lmHead.forward(h2);
    h2.dispose();
    const shaped = logits.view([B, T, this.config.vocabSize]);
    logits.dispose();
    return [shaped, next];
  }
}

const modelCase = (name: string, dtype: 'f32' | 'bf16', cfg: GlaConfig, B: number, T: number, state: boolean) => ({
  name, dtype, dims: { B, T, L: cfg.numHiddenLayers, H: cfg.numHeads, K: cfg.headKDim, V: cfg.headVDim, W: cfg.vocabSize }, init: [cfg], options: { initial_state: state },
});

export const glaTask = defineTask(
  {
    id: 'L4/gla',
    level: 4,
    className: 'GLAForCausalLM',
    family: [FAMILY],
    architectures: ['gla'],
    mirrors: 'fla.models.gla.modeling_gla.GLAForCausalLM',
    description: 'The GLA language model: embedding, GLA blocks with each layer\'s recurrent state in and out, final norm, LM head over every position.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed GLA config (GlaConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['B', 'T'] },
      { name: 'state', dtype: 'f32', shape: ['L', 'B', 'H', 'K', 'V'], optional: true, doc: 'every layer\'s recurrent state; absent: a fresh sequence' },
    ],
    outputs: [
      { name: 'logits', dtype: 'act', shape: ['B', 'T', 'W'] },
      { name: 'state', dtype: 'f32', shape: ['L', 'B', 'H', 'K', 'V'] },
    ],
    tolerance: { bf16: { atol: 8e-2, rtol: 8e-2 }, f32: STATE_F32_TOLERANCE },
    imports: ['L1/embedding', 'L3/gla_decoder', 'L1/rms_norm', 'L1/linear'],
    cases: {
      ci: [
        modelCase('tiny-prefill-f32', 'f32', tinyGlaConfig(), 2, 9, false),
        modelCase('tiny-decode-state-f32', 'f32', tinyGlaConfig(), 3, 1, true),
        modelCase('tiny-prefill-chunked-state-bf16', 'bf16', tinyGlaConfig(), 1, 66, true),
      ],
      production: [
        modelCase('gla-2.7b-decode-b1', 'bf16', GLA_2_7B, 1, 1, true),
        modelCase('gla-2.7b-decode-b32', 'bf16', GLA_2_7B, 32, 1, true),
        modelCase('gla-2.7b-prefill-2048', 'bf16', GLA_2_7B, 1, 2048, false),
      ],
    },
  },
  {
    baseline: GLAForCausalLM,
    makeInputs: (c, ctx, rng) => {
      // a standalone call (states in and out as arguments): drop any forward context an engine-step case left set, whose
      // state pools the layer would otherwise take for its own
      setForwardContext(null);
      const cfg = configOf(c);
      const { B, T } = c.dims as { B: number; T: number };
      const ids = Array.from({ length: B * T }, () => rng.int(0, cfg.vocabSize));
      // a carried state as a sequence leaves it: O(1) entries
      return [fromInts(ctx, ids, [B, T], 'i64'), c.options.initial_state ? randn(ctx, rng, glaStateShape(cfg, B), 'f32', 0.5) : null];
    },
    initParameters: (m, _c, rng) => initGlaParameters(m, rng),
    reference: ([ids, s0], params, c) => {
      const cfg = configOf(c);
      const [B, T] = ids!.shape as [number, number];
      const r = refGlaModel(ids!.data, B, T, s0?.data ?? null, params, cfg);
      return [hostArray([B, T, cfg.vocabSize], r.logits), hostArray(glaStateShape(cfg, B), r.state)];
    },
    work: (c) => {
      const cfg = configOf(c);
      const { B, T } = c.dims as { B: number; T: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      const N = B * T;
      const l = blockWork(cfg, B, T, c.dtype, !!c.options.initial_state);
      return {
        bytes: cfg.numHiddenLayers * l.bytes + 2 * cfg.vocabSize * cfg.hiddenSize * it + bytesOf([N, cfg.vocabSize], it) + bytesOf([N], 8),
        flops: cfg.numHiddenLayers * l.flops + 2 * N * cfg.hiddenSize * cfg.vocabSize,
      };
    },
  },
);
