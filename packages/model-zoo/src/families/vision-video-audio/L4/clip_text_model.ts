import { DTYPE_INFO, F, Module, OpScope, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import { initFamilyParameters } from '../cases.js';
import { CLIP_L, tinyClipConfig, type ClipTextConfig } from '../clip-config.js';
import { FAMILY } from '../family.js';
import { layerNorm, param, sub } from '../host-math.js';
import { clipCausalMask, clipLens } from '../L2/clip_attention.js';
import { CLIPTextEmbeddings } from '../L2/clip_mlp.js';
import { clipLayerReference, type CLIPEncoderLayer } from '../L3/clip_encoder_layer.js';
import { paddedIds } from './t5_encoder.js';

/**
 * HF's CLIPTextModel (FLUX.1-dev's text_encoder): text_model.embeddings, text_model.encoder.layers.N under the causal
 * (+ padding) mask, text_model.final_layer_norm; the pooled output is the final state at the end-of-text token: for the
 * legacy eos_token_id 2 of the original checkpoints the largest id's position (argmax(input_ids)), else the first
 * eos_token_id. forward(inputIds [B, S] i64, attentionMask [B, S] i64 | null) -> [lastHiddenState [B, S, H], pooled
 * [B, H]] (FLUX uses the pooled vector); `hidden` gives last_hidden_state to the encoder runner.
 */
export class CLIPTextModel extends Module {
  readonly embeddings: CLIPTextEmbeddings;
  readonly layers: CLIPEncoderLayer[];
  readonly finalLayerNorm: LayerNorm;
  constructor(readonly config: ClipTextConfig) {
    super();
    this.embeddings = this.registerModule('text_model.embeddings', new CLIPTextEmbeddings(config));
    this.layers = Array.from({ length: config.numHiddenLayers }, (_, i) => this.createModule<CLIPEncoderLayer>(`text_model.encoder.layers.${i}`, 'L3/clip_encoder_layer', config));
    this.finalLayerNorm = this.registerModule('text_model.final_layer_norm', createLayer('LayerNorm', config.hiddenSize, config.layerNormEps));
  }

  get hiddenSize(): number {
    return this.config.hiddenSize;
  }

  hidden(inputIds: Tensor, attentionMask: Tensor): Tensor {
    const [h, pooled] = this.forward(inputIds, attentionMask);
    pooled!.dispose();
    return h!;
  }

  /** The pooled rows: last_hidden_state at each sequence's end-of-text position. */
  pool(lastHiddenState: Tensor, inputIds: Tensor): Tensor {
    const [B, , H] = lastHiddenState.shape as [number, number, number];
    const s = new OpScope();
    const pos = this.config.eosTokenId === 2 ? s.own(F.argmax(inputIds, { dim: -1 })) : s.own(F.argmax(s.op('to', [s.op('eq', [inputIds, this.config.eosTokenId])], { dtype: 'i64' }), { dim: -1 }));
    const index = s.op('contiguous', [s.own(s.own(pos.view(B, 1, 1)).expand([B, 1, H]))]);
    return s.keep([s.own(F.gather(lastHiddenState, 1, index)).view(B, H)])[0];
  }

  forward(inputIds: Tensor, attentionMask: Tensor | null = null): Tensor[] {
    const s = new OpScope();
    try {
      const [B, S] = inputIds.shape as [number, number];
      const mask = s.own(clipCausalMask(inputIds, B, S, attentionMask));
      let h = s.own(this.embeddings.forward(inputIds));
      for (const layer of this.layers) h = s.own(layer.forward(h, mask));
      const last = this.finalLayerNorm.forward(h);
      s.dispose();
      return [last, this.pool(last, inputIds)];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** Golden float64 CLIPTextModel -> [last_hidden_state, pooled]. */
export function clipTextModelReference(ids: HostArray, params: ReadonlyMap<string, HostArray>, c: ClipTextConfig, lens: readonly number[] | null): HostArray[] {
  const [B, S] = ids.shape as [number, number];
  const H = c.hiddenSize;
  const tok = param(params, 'text_model.embeddings.token_embedding.weight');
  const pos = param(params, 'text_model.embeddings.position_embedding.weight');
  let h = hostArray([B, S, H]);
  ids.data.forEach((id, t) => {
    for (let j = 0; j < H; j++) h.data[t * H + j] = tok.data[id * H + j]! + pos.data[(t % S) * H + j]!;
  });
  for (let i = 0; i < c.numHiddenLayers; i++) h = clipLayerReference(h, sub(params, `text_model.encoder.layers.${i}`), c, lens);
  const last = layerNorm(h.data, B * S, H, c.layerNormEps, param(params, 'text_model.final_layer_norm.weight'), param(params, 'text_model.final_layer_norm.bias'));
  const pooled = hostArray([B, H]);
  for (let b = 0; b < B; b++) {
    const row = Array.from(ids.data.subarray(b * S, (b + 1) * S));
    const at = c.eosTokenId === 2 ? row.indexOf(Math.max(...row)) : Math.max(0, row.indexOf(c.eosTokenId));
    pooled.data.set(last.subarray((b * S + at) * H, (b * S + at + 1) * H), b * H);
  }
  return [hostArray([B, S, H], last), pooled];
}

const modelCase = (name: string, dtype: 'f32' | 'bf16', cfg: ClipTextConfig, B: number, S: number, lens: number[] | null) => ({
  name, dtype, dims: { B, S, H: cfg.hiddenSize }, init: [cfg], options: lens ? { lens } : {},
});

export const clipTextModelTask = defineTask(
  {
    id: 'L4/clip_text_model',
    level: 4,
    className: 'CLIPTextModel',
    family: [FAMILY],
    architectures: ['flux'],
    mirrors: 'transformers.models.clip.modeling_clip.CLIPTextModel',
    description: 'The CLIP text tower (FLUX text_encoder): token + position embeddings, causal encoder layers, final LayerNorm; last_hidden_state and the pooled end-of-text vector.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed CLIP text config (ClipTextConfig)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['B', 'S'] },
      { name: 'attentionMask', dtype: 'i64', shape: ['B', 'S'], optional: true, doc: '1 = token, 0 = pad (FLUX passes none)' },
    ],
    outputs: [
      { name: 'lastHiddenState', dtype: 'act', shape: ['B', 'S', 'H'] },
      { name: 'pooled', dtype: 'act', shape: ['B', 'H'] },
    ],
    tolerance: { bf16: { atol: 8e-2, rtol: 8e-2 } },
    imports: ['L1/embedding', 'L3/clip_encoder_layer', 'L1/layer_norm'],
    cases: {
      ci: [modelCase('tiny-padded-f32', 'f32', tinyClipConfig(), 3, 10, [10, 4, 7]), modelCase('tiny-bf16', 'bf16', tinyClipConfig(), 1, 9, null)],
      production: [modelCase('clip-l-77', 'bf16', CLIP_L, 1, 77, null), modelCase('clip-l-b8-77', 'bf16', CLIP_L, 8, 77, null)],
    },
  },
  {
    baseline: CLIPTextModel,
    makeInputs: (c, ctx, rng) => {
      const cfg = c.init[0] as ClipTextConfig;
      const { B, S } = c.dims as Record<string, number>;
      const lens = clipLens(c);
      const { ids, mask } = paddedIds(rng, lens ?? Array.from({ length: B! }, () => S!), S!, cfg.vocabSize, cfg.padTokenId);
      return [fromInts(ctx, ids, [B!, S!], 'i64'), lens ? fromInts(ctx, mask, [B!, S!], 'i64') : null];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([ids], params, c) => clipTextModelReference(ids!, params, c.init[0] as ClipTextConfig, clipLens(c)),
    work: (c) => {
      const cfg = c.init[0] as ClipTextConfig;
      const { B, S, H } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      const L = cfg.numHiddenLayers;
      return {
        bytes: bytesOf([L * (4 * H! + 2 * cfg.intermediateSize) + cfg.vocabSize, H!], it) + L * 10 * bytesOf([B!, S!, H!], it),
        flops: L * (8 * B! * S! * H! * H! + 4 * B! * S! * S! * H! + 4 * B! * S! * H! * cfg.intermediateSize),
      };
    },
  },
);
