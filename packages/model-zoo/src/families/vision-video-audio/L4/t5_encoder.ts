import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import type { T5LayerNorm } from '../../../tasks/L1/norm/t5_layer_norm.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { param, rmsNorm, sub } from '../host-math.js';
import { caseLens } from '../L2/t5_attention.js';
import { t5BlockReference, type T5Block } from '../L3/t5_block.js';
import { T5_XXL, tinyT5Config, type T5Config } from '../t5-config.js';

/**
 * HF's T5EncoderModel (FLUX.1-dev's text_encoder_2): `shared` token embedding, encoder.block.N (block 0 owns the
 * relative attention bias, the others reuse its [B, H, S, S] bias with the padding mask folded in), encoder
 * final_layer_norm. forward(inputIds [B, S] i64, attentionMask [B, S] i64) -> last_hidden_state [B, S, d_model];
 * `hidden` is the same for the encoder runner.
 */
export class T5EncoderModel extends Module {
  readonly shared: VocabParallelEmbedding;
  readonly blocks: T5Block[];
  readonly finalLayerNorm: T5LayerNorm;
  constructor(readonly config: T5Config) {
    super();
    this.shared = this.createModule('shared', 'L1/embedding', config.vocabSize, config.dModel);
    this.blocks = Array.from({ length: config.numLayers }, (_, i) => this.createModule<T5Block>(`encoder.block.${i}`, 'L3/t5_block', config, i === 0));
    this.finalLayerNorm = this.createModule('encoder.final_layer_norm', 'L1/t5_layer_norm', config.dModel, config.layerNormEpsilon);
  }

  get hiddenSize(): number {
    return this.config.dModel;
  }

  hidden(inputIds: Tensor, attentionMask: Tensor): Tensor {
    return this.forward(inputIds, attentionMask);
  }

  forward(inputIds: Tensor, attentionMask: Tensor | null = null): Tensor {
    const mask = attentionMask ? F.ne(attentionMask, 0) : null;
    let h = this.shared.forward(inputIds);
    let bias: Tensor | null = null;
    for (const block of this.blocks) {
      const [y, b] = block.forward(h, mask, bias) as [Tensor, Tensor];
      h.dispose();
      h = y;
      bias = b;
    }
    bias?.dispose();
    mask?.dispose();
    const out = this.finalLayerNorm.forward(h);
    h.dispose();
    return out;
  }
}

/** Golden float64 T5EncoderModel of ids / 0-1 mask [B, S]. */
export function t5EncoderReference(ids: HostArray, mask: HostArray | null, params: ReadonlyMap<string, HostArray>, c: T5Config): HostArray {
  const [B, S] = ids.shape as [number, number];
  const D = c.dModel;
  const table = param(params, 'shared.weight');
  let h = hostArray([B, S, D]);
  ids.data.forEach((id, t) => h.data.set(table.data.subarray(id * D, (id + 1) * D), t * D));
  // every block sees block 0's relative bias (HF passes it down the stack): give each block block 0's table
  const table0 = 'layer.0.SelfAttention.relative_attention_bias.weight';
  const rel = param(sub(params, 'encoder.block.0'), table0);
  for (let i = 0; i < c.numLayers; i++) h = t5BlockReference(h, mask, new Map([...sub(params, `encoder.block.${i}`), [table0, rel]]), c, true)[0]!;
  return hostArray(h.shape, rmsNorm(h.data, B * S, D, param(params, 'encoder.final_layer_norm.weight'), c.layerNormEpsilon));
}

/** Padded ids (random non-pad tokens, pad after each length) and the 0/1 mask. */
export function paddedIds(rng: { int(lo: number, hi: number): number }, lens: readonly number[], S: number, vocab: number, pad: number): { ids: number[]; mask: number[] } {
  const ids: number[] = [];
  const mask: number[] = [];
  for (const n of lens)
    for (let s = 0; s < S; s++) {
      let id = pad;
      if (s < n) while (id === pad) id = rng.int(0, vocab);
      ids.push(id);
      mask.push(s < n ? 1 : 0);
    }
  return { ids, mask };
}

const encCase = (name: string, dtype: 'f32' | 'bf16', cfg: T5Config, B: number, S: number, lens: number[]) => ({ name, dtype, dims: { B, S, D: cfg.dModel }, init: [cfg], options: { lens } });
const TINY = tinyT5Config();

export const t5EncoderTask = defineTask(
  {
    id: 'L4/t5_encoder',
    level: 4,
    className: 'T5EncoderModel',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video'],
    mirrors: 'transformers.models.t5.modeling_t5.T5EncoderModel',
    description: 'The T5 v1.1 encoder (FLUX text_encoder_2): token embedding, blocks with the shared relative position bias, final T5LayerNorm -> last_hidden_state.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed T5 config (T5Config)' }],
    inputs: [
      { name: 'inputIds', dtype: 'i64', shape: ['B', 'S'] },
      { name: 'attentionMask', dtype: 'i64', shape: ['B', 'S'], optional: true, doc: '1 = token, 0 = pad' },
    ],
    outputs: [{ name: 'lastHiddenState', dtype: 'act', shape: ['B', 'S', 'D'] }],
    tolerance: { bf16: { atol: 8e-2, rtol: 8e-2 } },
    imports: ['L1/embedding', 'L3/t5_block', 'L1/t5_layer_norm'],
    cases: {
      ci: [encCase('tiny-padded-f32', 'f32', TINY, 3, 19, [19, 4, 11]), encCase('tiny-bf16', 'bf16', TINY, 1, 8, [8])],
      production: [encCase('t5-xxl-512', 'bf16', T5_XXL, 1, 512, [512]), encCase('t5-xxl-b4-512', 'bf16', T5_XXL, 4, 512, [512, 77, 200, 31])],
    },
  },
  {
    baseline: T5EncoderModel,
    makeInputs: (c, ctx, rng) => {
      const cfg = c.init[0] as T5Config;
      const lens = caseLens(c)!;
      const { ids, mask } = paddedIds(rng, lens, c.dims.S!, cfg.vocabSize, cfg.padTokenId);
      return [fromInts(ctx, ids, [lens.length, c.dims.S!], 'i64'), fromInts(ctx, mask, [lens.length, c.dims.S!], 'i64')];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([ids, mask], params, c) => [t5EncoderReference(ids!, mask ?? null, params, c.init[0] as T5Config)],
    work: (c) => {
      const cfg = c.init[0] as T5Config;
      const { B, S, D } = c.dims as Record<string, number>;
      const I = cfg.numHeads * cfg.dKv;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return {
        bytes: bytesOf([cfg.numLayers * (4 * I + 3 * cfg.dFf) + cfg.vocabSize, D!], it) + cfg.numLayers * 12 * bytesOf([B!, S!, D!], it),
        flops: cfg.numLayers * (8 * B! * S! * D! * I + 4 * B! * S! * S! * I + 6 * B! * S! * D! * cfg.dFf),
      };
    },
  },
);
