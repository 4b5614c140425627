import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { Embedding } from '../../../layers/embedding.js';
import { createLayer } from '../../../layers/registry.js';
import type { VocabParallelEmbedding } from '../../../tasks/L1/embedding/embedding.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { CLIP_L, tinyClipConfig, type ClipTextConfig } from '../clip-config.js';
import { FAMILY } from '../family.js';
import { geluErf, linear, param, quickGelu } from '../host-math.js';

type Act = Module & { forward(x: Tensor): Tensor };

/** HF's CLIPMLP: fc2(act(fc1(h))), act quick_gelu (CLIP-L) or gelu. forward(hiddenStates [..., H]) -> [..., H]. */
export class CLIPMLP extends Module {
  readonly fc1: Linear;
  readonly activationFn: Act;
  readonly fc2: Linear;
  constructor(readonly config: ClipTextConfig) {
    super();
    this.fc1 = this.createModule('fc1', 'L1/linear', config.hiddenSize, config.intermediateSize, true);
    this.activationFn = this.registerModule('activation_fn', config.hiddenAct === 'quick_gelu' ? createLayer('QuickGELU') : createLayer('GELU'));
    this.fc2 = this.createModule('fc2', 'L1/linear', config.intermediateSize, config.hiddenSize, true);
  }

  forward(hiddenStates: Tensor): Tensor {
    const h = this.fc1.forward(hiddenStates);
    const a = this.activationFn.forward(h);
    h.dispose();
    const y = this.fc2.forward(a);
    a.dispose();
    return y;
  }
}

/**
 * HF's CLIPTextEmbeddings: token_embedding(ids) + position_embedding(0..S-1). forward(inputIds [B, S]) -> [B, S, H].
 * The second class of the clip_mlp task (the original groups them); CLIPTextModel builds it with `new`.
 */
export class CLIPTextEmbeddings extends Module {
  readonly tokenEmbedding: VocabParallelEmbedding;
  readonly positionEmbedding: Embedding;
  constructor(readonly config: ClipTextConfig) {
    super();
    this.tokenEmbedding = this.createModule('token_embedding', 'L1/embedding', config.vocabSize, config.hiddenSize);
    this.positionEmbedding = this.registerModule('position_embedding', createLayer('Embedding', config.maxPositionEmbeddings, config.hiddenSize));
  }

  forward(inputIds: Tensor): Tensor {
    const S = inputIds.shape[1]!;
    if (S > this.config.maxPositionEmbeddings) throw new RangeError(`CLIPTextEmbeddings: ${S} tokens exceed max_position_embeddings ${this.config.maxPositionEmbeddings}`);
    const tok = this.tokenEmbedding.forward(inputIds);
    const pos = this.positionEmbedding.weight.narrow(0, 0, S);
    const y = F.add(tok, pos);
    tok.dispose();
    pos.dispose();
    return y;
  }
}

/** Golden float64 CLIPMLP. */
export function clipMlpReference(x: HostArray, params: ReadonlyMap<string, HostArray>, c: ClipTextConfig): HostArray {
  const rows = x.data.length / c.hiddenSize;
  const f = c.hiddenAct === 'quick_gelu' ? quickGelu : geluErf;
  const h = linear(x.data, rows, param(params, 'fc1.weight'), param(params, 'fc1.bias')).map(f);
  return hostArray(x.shape, linear(h, rows, param(params, 'fc2.weight'), param(params, 'fc2.bias')));
}

const mlpCase = (name: string, dtype: 'f32' | 'bf16', cfg: ClipTextConfig, T: number) => ({ name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg] });

export const clipMlpTask = defineTask(
  {
    id: 'L2/clip_mlp',
    level: 2,
    className: 'CLIPMLP',
    family: [FAMILY],
    architectures: ['flux'],
    mirrors: 'transformers.models.clip.modeling_clip.CLIPMLP',
    description: 'CLIP MLP: fc1, QuickGELU, fc2. CLIPTextEmbeddings (token + position embeddings) lives in the same file.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed CLIP text config (ClipTextConfig)' }],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 2e-2 } },
    imports: ['L1/linear', 'L1/quickgelu'],
    cases: {
      ci: [mlpCase('tiny-f32', 'f32', tinyClipConfig(), 9), mlpCase('tiny-gelu-bf16', 'bf16', tinyClipConfig({ hiddenAct: 'gelu' }), 7)],
      production: [mlpCase('clip-l-77', 'bf16', CLIP_L, 77), mlpCase('clip-l-b8-77', 'bf16', CLIP_L, 616)],
    },
  },
  {
    baseline: CLIPMLP,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x], params, c) => [clipMlpReference(x!, params, c.init[0] as ClipTextConfig)],
    work: (c) => {
      const cfg = c.init[0] as ClipTextConfig;
      const { T, H } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([2 * cfg.intermediateSize, H!], it) + 2 * bytesOf([T!, H!], it) + 2 * bytesOf([T!, cfg.intermediateSize], it), flops: 4 * T! * H! * cfg.intermediateSize };
    },
  },
);
